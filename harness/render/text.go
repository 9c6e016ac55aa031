// The text swimlane of a history, for terminals and the docs.

package render

import (
	"fmt"
	"strings"

	"github.com/locklab/locklab/harness"
)

// Timeline renders a history as a text swimlane: one row per step, one
// column per client (what it sent, what came back, what it concluded), one
// column per node with the lock key's value after the step, and the
// violation marked in the row where it happens. Tokens are shown as the
// client that wrote them ("c1's"). A command, a reply or a note longer than
// its column goes on over the next lines. About 100 columns wide for 3 clients
// and one node.
func Timeline(h *harness.History) string {
	nc := len(h.Clients)
	l := labelsOf(h)
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
			cmd := strings.Join(l.args(e.Command, 10, "~"), " ")
			lines := wrap(cmd, colW, "  ")
			if e.Reply != "" {
				lines = append(lines, wrap("-> "+l.phrase(e.Reply, 12, "~"), colW, "   ")...)
			}
			for _, n := range e.Notes {
				lines = append(lines, wrap(strings.TrimPrefix(n, fmt.Sprintf("c%d ", e.Client)), colW, "  ")...)
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
					line += " " + pad(l.value(k, 12, "~"), keyW)
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

func pad(s string, w int) string {
	if len(s) > w {
		return s[:w-1] + "~"
	}
	return s + strings.Repeat(" ", w-len(s))
}
