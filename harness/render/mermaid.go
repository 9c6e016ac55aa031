// The Mermaid sequence diagram of a history, for the docs.

package render

import (
	"fmt"
	"strings"

	"github.com/locklab/locklab/harness"
)

// Mermaid renders a history as a Mermaid sequence diagram: a participant
// per client and per node, a message per command and its reply, a note per
// event and per violation.
func Mermaid(h *harness.History) string {
	l := labelsOf(h)
	var b strings.Builder
	b.WriteString("sequenceDiagram\n")
	for _, c := range h.Clients {
		fmt.Fprintf(&b, "    participant c%d\n", c.ID)
	}
	for i, n := range h.Nodes {
		fmt.Fprintf(&b, "    participant n%d as %s\n", i+1, mermaidText(n))
	}
	firstNode := "n1"
	lastNode := fmt.Sprintf("n%d", max(len(h.Nodes), 1))
	for _, e := range h.Events {
		switch {
		case e.Client == 0:
			text := e.Label
			if len(e.Notes) > 0 {
				text += ": " + strings.Join(e.Notes, "; ")
			}
			fmt.Fprintf(&b, "    Note over %s,%s: %s\n", firstNode, lastNode, mermaidText(text))
		case e.Node > 0:
			c := fmt.Sprintf("c%d", e.Client)
			n := fmt.Sprintf("n%d", e.Node)
			fmt.Fprintf(&b, "    %s->>%s: %d. %s\n", c, n, e.Step, mermaidText(strings.Join(l.args(e.Command, 10, "~"), " ")))
			fmt.Fprintf(&b, "    %s-->>%s: %s\n", n, c, mermaidText(l.phrase(e.Reply, 12, "~")))
		default:
			fmt.Fprintf(&b, "    Note over c%d: %d. %s\n", e.Client, e.Step, mermaidText(strings.Join(e.Command, " ")))
		}
		for _, n := range e.Notes {
			if e.Client > 0 {
				fmt.Fprintf(&b, "    Note right of c%d: %s\n", e.Client, mermaidText(n))
			}
		}
		if e.Violation != "" || len(e.Holders) > 1 {
			fmt.Fprintf(&b, "    Note over c1,%s: VIOLATION: %s\n", lastNode, mermaidText(violationLine(h, e)))
		}
	}
	return b.String()
}

func mermaidText(s string) string {
	r := strings.NewReplacer(";", ",", "#", "no.", "\n", " ", ":", " ")
	return r.Replace(s)
}
