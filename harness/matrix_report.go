package harness

import (
	"fmt"
	"io"
	"strings"
)

// Violations counts the cells whose outcome is a failure.
func (m *MatrixResult) Violations() int {
	n := 0
	for _, c := range m.Cells {
		if (Verdict{Outcome: c.Outcome}).Failed() {
			n++
		}
	}
	return n
}

// short is how a cell's outcome reads in the matrix table.
func (o Outcome) short() string {
	switch o {
	case Safe:
		return "safe"
	case Violated:
		return "VIOL"
	case Deadlock:
		return "DEAD"
	case Starvation:
		return "STARV"
	case NA:
		return "-"
	}
	return string(o)
}

// WriteMatrix prints the matrix for a terminal: one row per strategy, one
// numbered column per scenario (named in a legend below), then each failing
// cell's shortest counterexample. A safe cell whose bound was not explored
// in full is marked with '*'.
func WriteMatrix(w io.Writer, m *MatrixResult) error {
	nameW := len("strategy")
	for _, s := range m.Strategies {
		nameW = max(nameW, len(s))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%-*s", nameW, "strategy")
	for i := range m.Scenarios {
		fmt.Fprintf(&b, " %6d", i+1)
	}
	b.WriteByte('\n')
	partial := false
	for _, s := range m.Strategies {
		fmt.Fprintf(&b, "%-*s", nameW, s)
		for _, sc := range m.Scenarios {
			c, ok := m.Cell(s, sc)
			text := "?"
			if ok {
				text = c.Outcome.short()
				if c.Outcome == Safe && !c.Complete {
					text += "*"
					partial = true
				}
			}
			fmt.Fprintf(&b, " %6s", text)
		}
		b.WriteByte('\n')
	}
	b.WriteString("\nscenarios:\n")
	for i, sc := range m.Scenarios {
		title := ""
		if s, err := Lookup(sc); err == nil {
			title = " — " + s.Title
		}
		fmt.Fprintf(&b, "  %2d %s%s\n", i+1, sc, title)
	}
	b.WriteString("\nsafe: no violation in any schedule within the bound; VIOL: mutual exclusion,\n" +
		"release or fencing violated; DEAD: deadlock; STARV: starvation; -: n/a.\n")
	if partial {
		b.WriteString("*: the schedule limit was reached before the bound was explored in full.\n")
	}
	first := true
	for _, c := range m.Cells {
		if !(Verdict{Outcome: c.Outcome}).Failed() {
			continue
		}
		if first {
			b.WriteString("\nshortest counterexamples:\n")
			first = false
		}
		fmt.Fprintf(&b, "  %s × %s: %s (%s)\n    %s\n", c.Strategy, c.Scenario, c.Outcome, c.Property, c.Schedule)
	}
	fmt.Fprintf(&b, "\n%d cells in %v\n", len(m.Cells), m.Elapsed.Round(1e6))
	_, err := io.WriteString(w, b.String())
	return err
}
