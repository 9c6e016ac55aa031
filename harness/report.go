package harness

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Timeline renders a history as a text swimlane: one row per step, one
// column per client (what it sent, what came back, what it concluded), one
// column per node with the lock key's value after the step, and the
// violation marked in the row where it happens. Tokens are shown as the
// client that wrote them ("c1's"). About 100 columns wide for 3 clients
// and one node.
func Timeline(h *History) string {
	nc := len(h.Clients)
	owner := owners(h)
	colW := 22
	if nc > 3 {
		colW = 18
	}
	keyW := 10
	const evW = 13 // fits "failover(n1)", "time(+1m2s)", "restart(n2)"
	var b strings.Builder
	fmt.Fprintf(&b, "%s on %s, key %q, TTL %v\n", h.Scenario, h.Strategy, h.Key, h.TTL)
	head := fmt.Sprintf("%-4s %-*s", "step", evW, "event")
	for _, c := range h.Clients {
		name := fmt.Sprintf("c%d", c.ID)
		if c.Probe {
			name += " (probe)"
		}
		head += " " + pad(name, colW)
	}
	for _, n := range h.Nodes {
		head += " " + pad(n, keyW)
	}
	b.WriteString(strings.TrimRight(head, " ") + "\n")
	b.WriteString(strings.Repeat("-", len(strings.TrimRight(head, " "))) + "\n")
	for _, e := range h.Events {
		cells := make([][]string, nc)
		if e.Client > 0 && e.Client <= nc {
			cmd := strings.Join(shortArgs(e.Command, owner), " ")
			lines := []string{cmd}
			if e.Reply != "" {
				lines = append(lines, "-> "+shorten(e.Reply, owner))
			}
			for _, n := range e.Notes {
				lines = append(lines, strings.TrimPrefix(n, fmt.Sprintf("c%d ", e.Client)))
			}
			cells[e.Client-1] = lines
		}
		rows := 1
		for _, c := range cells {
			rows = max(rows, len(c))
		}
		for i := 0; i < rows; i++ {
			line := ""
			if i == 0 {
				mark := " "
				if e.Violation != "" {
					mark = "!"
				}
				lbl := e.Label
				line = fmt.Sprintf("%3d%s %-*s", e.Step, mark, evW, pad(lbl, evW))
			} else {
				line = fmt.Sprintf("%-4s %-*s", "", evW, "")
			}
			for _, c := range cells {
				s := ""
				if i < len(c) {
					s = c[i]
				}
				line += " " + pad(s, colW)
			}
			if i == 0 {
				for _, k := range e.Keys {
					line += " " + pad(shorten(k, owner), keyW)
				}
			}
			b.WriteString(strings.TrimRight(line, " ") + "\n")
		}
		if e.Client == 0 && len(e.Notes) > 0 {
			b.WriteString(fmt.Sprintf("%-4s   (%s)\n", "", strings.Join(e.Notes, "; ")))
		}
		if len(e.Holders) > 1 || e.Violation != "" {
			b.WriteString(fmt.Sprintf("%-4s !! %s\n", "", violationLine(h, e)))
		}
	}
	b.WriteString(fmt.Sprintf("verdict: %s\n", h.Verdict))
	if len(h.Skipped) > 0 {
		b.WriteString("skipped: " + strings.Join(h.Skipped, "; ") + "\n")
	}
	b.WriteString("schedule: " + h.Schedule + "\n")
	return b.String()
}

func violationLine(h *History, e Event) string {
	if len(e.Holders) > 1 {
		return fmt.Sprintf("%s hold the lock at once", clientList(e.Holders))
	}
	if h.Verdict.Step == e.Step {
		return h.Verdict.Message
	}
	return e.Violation
}

func pad(s string, w int) string {
	if len(s) > w {
		return s[:w-1] + "~"
	}
	return s + strings.Repeat(" ", w-len(s))
}

func shorten(s string, owner map[string]string) string {
	if o, ok := owner[s]; ok {
		return o
	}
	if o, ok := owner[strings.Trim(s, `"`)]; ok {
		return o
	}
	if t, ok := stampLabel(strings.Trim(s, `"`)); ok {
		return t
	}
	if len(s) > 12 {
		return s[:11] + "~"
	}
	return s
}

func shortArgs(args []string, owner map[string]string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		if i == 0 {
			out[i] = a
			continue
		}
		if o, ok := owner[a]; ok {
			out[i] = o
		} else if t, ok := stampLabel(a); ok {
			out[i] = t
		} else if strings.HasPrefix(a, "lock:") {
			out[i] = "K"
		} else if len(a) > 10 {
			out[i] = a[:9] + "~"
		} else {
			out[i] = a
		}
	}
	return out
}

// Mermaid renders a history as a Mermaid sequence diagram: a participant
// per client and per node, a message per command and its reply, a note per
// event and per violation.
func Mermaid(h *History) string {
	owner := owners(h)
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
			fmt.Fprintf(&b, "    %s->>%s: %d. %s\n", c, n, e.Step, mermaidText(strings.Join(shortArgs(e.Command, owner), " ")))
			fmt.Fprintf(&b, "    %s-->>%s: %s\n", n, c, mermaidText(shorten(e.Reply, owner)))
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

// owners maps each lease token written by exactly one client to a label for
// it ("c1's").
func owners(h *History) map[string]string {
	who := map[string][]string{}
	for _, a := range h.Acquisitions {
		c := fmt.Sprintf("c%d", a.Client)
		if !contains(who[a.Token], c) {
			who[a.Token] = append(who[a.Token], c)
		}
	}
	// A value that several clients wrote (the counter "1" of the INCR
	// locks) names nobody: it is shown as it is.
	out := map[string]string{}
	for t, cs := range who {
		if len(cs) == 1 {
			out[t] = cs[0] + "'s"
		}
	}
	return out
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// stampLabel shows a Unix time in milliseconds near Epoch (a timestamp
// lock's stamp that no acquire claimed) as its offset from Epoch: "@30.012s".
func stampLabel(s string) (string, bool) {
	ms, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return "", false
	}
	d := time.Duration(ms-Epoch.UnixMilli()) * time.Millisecond
	if d < -24*time.Hour || d > 24*time.Hour {
		return "", false
	}
	return "@" + d.String(), true
}
