// The report as text for a terminal: a line about the server, then one
// line per check, exposures first, each exposed scenario with the command
// that replays it.

package deploy

import (
	"fmt"
	"io"
	"slices"
	"strings"
)

// WriteText writes the report for a terminal. Under each exposed check it
// names, per scenario, the strategies that fail there, and the command
// line that replays the cell of the one that fails there while staying
// safe in the most other recorded cells (every cell's is in the JSON).
func WriteText(w io.Writer, r *Report) error {
	var b strings.Builder
	b.WriteString(r.describe())
	b.WriteString("\n")
	if r.RTT.Median > 0 {
		fmt.Fprintf(&b, "round trip %s (median of %d PINGs)", round(r.RTT.Median), len(r.RTT.Samples))
		if r.Clock.Uncertainty > 0 || r.Clock.Offset != 0 {
			fmt.Fprintf(&b, "; server clock %s from this host's (±%s)", signed(r.Clock.Offset), round(r.Clock.Uncertainty))
		}
		b.WriteString("\n")
	}
	b.WriteString("\n")
	const indent = "                       "
	for _, st := range []Status{Exposed, Unknown, NotExposed} {
		for _, e := range r.Exposures {
			if e.Status != st {
				continue
			}
			label := map[Status]string{Exposed: "EXPOSED", Unknown: "unknown", NotExposed: "ok"}[st]
			fmt.Fprintf(&b, "%-8s %-12s  %s\n", label, e.Check, e.Finding)
			switch st {
			case Exposed:
				writeStanding(&b, e, indent[:23])
			case Unknown:
				if len(e.Scenarios) > 0 {
					fmt.Fprintf(&b, "%sat stake: %s\n", indent[:23], strings.Join(e.Scenarios, ", "))
				}
			}
		}
	}
	b.WriteString("\nlocklab scenarios tells each scenario's story; --json lists every failing cell with its replay.\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// describe is the line about the server checked.
func (r *Report) describe() string {
	var parts []string
	if r.Version != "" {
		parts = append(parts, "Redis "+r.Version)
	}
	what := r.Mode
	if r.Role != "" {
		what = strings.TrimSpace(what + " " + r.Role)
	}
	if what != "" {
		parts = append(parts, what)
	}
	switch {
	case r.Replicas == 0 && r.Role != "replica":
		parts = append(parts, "no replica")
	case r.Replicas > 0:
		parts = append(parts, plural(r.Replicas, "replica"))
	}
	server := strings.Join(parts, ", ")
	if server == "" {
		server = "INFO refused"
	}
	if s := r.Sentinel; s != nil {
		names := make([]string, len(s.Masters))
		for i, m := range s.Masters {
			names[i] = m.Name
		}
		return fmt.Sprintf("%s: a Sentinel watching %s (%s); master %s at %s: %s", r.Target,
			plural(len(s.Masters), "master"), strings.Join(names, ", "), s.Checked, r.Addr, server)
	}
	return r.Target + ": " + server
}

// writeStanding writes an exposed check's scenarios: the strategies that
// fail each, and the replay of one.
func writeStanding(b *strings.Builder, e Exposure, indent string) {
	if len(e.Scenarios) == 0 {
		for _, f := range e.Failing {
			fmt.Fprintf(b, "%sfails on %s: %s\n", indent, f.Strategy, f.Reason)
		}
		switch {
		case len(e.Safe) > 3:
			fmt.Fprintf(b, "%sthe other %d strategies are unaffected\n", indent, len(e.Safe))
		case len(e.Safe) > 0:
			fmt.Fprintf(b, "%sunaffected: %s\n", indent, strings.Join(e.Safe, ", "))
		}
		return
	}
	m := Verdicts()
	// checked are the strategies the report is about.
	checked := slices.Clone(e.Safe)
	for _, f := range e.Failing {
		if !slices.Contains(checked, f.Strategy) {
			checked = append(checked, f.Strategy)
		}
	}
	for _, sc := range e.Scenarios {
		var fails []Failure
		for _, f := range e.Failing {
			if f.Scenario == sc {
				fails = append(fails, f)
			}
		}
		var safe []string
		for _, s := range m.Strategies {
			if v, ok := m.Cell(s, sc); ok && !v.Failed() && slices.Contains(checked, s) {
				safe = append(safe, s)
			}
		}
		if len(fails) == 0 {
			if len(safe) > 0 {
				fmt.Fprintf(b, "%s%s: safe on %s\n", indent, sc, strings.Join(safe, ", "))
			}
			continue
		}
		names := make([]string, len(fails))
		for i, f := range fails {
			names[i] = f.Strategy
		}
		fmt.Fprintf(b, "%s%s: %s\n", indent, sc, failsText(names, safe))
		fmt.Fprintf(b, "%s  %s\n", indent, strongest(m, fails).Replay)
	}
}

// failsText says which strategies fail a scenario and which stay safe.
func failsText(fails, safe []string) string {
	switch {
	case len(fails) <= 3:
		s := "fails on " + strings.Join(fails, ", ")
		if len(safe) > 0 && len(safe) <= 3 {
			s += "; safe on " + strings.Join(safe, ", ")
		} else if len(safe) > 3 {
			s += fmt.Sprintf("; safe on the other %d", len(safe))
		}
		return s
	case len(safe) == 0:
		return fmt.Sprintf("fails on all %d strategies", len(fails))
	}
	return fmt.Sprintf("fails on all %d strategies but %s, safe there", len(fails)+len(safe), strings.Join(safe, ", "))
}

// strongest is the failure whose strategy is safe in the largest share of
// its recorded cells: its replay shows that even that one fails.
func strongest(m Matrix, fails []Failure) Failure {
	best, score := fails[0], -1.0
	for _, f := range fails {
		safe, all := 0, 0
		for _, c := range m.Cells {
			if c.Strategy == f.Strategy {
				all++
				if !c.Failed() {
					safe++
				}
			}
		}
		if r := float64(safe) / float64(max(all, 1)); r > score {
			best, score = f, r
		}
	}
	return best
}
