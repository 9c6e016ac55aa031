// The verdict matrix as text: a table for terminals (MatrixText) and one
// for Markdown documents (MatrixMarkdown).

package render

import (
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"

	"github.com/locklab/locklab/harness"
)

// short is how a cell's outcome reads in the terminal's matrix table.
func short(o harness.Outcome) string {
	switch o {
	case harness.Safe:
		return "safe"
	case harness.Violated:
		return "VIOL"
	case harness.Deadlock:
		return "DEAD"
	case harness.Starvation:
		return "STARV"
	case harness.NA:
		return "-"
	}
	return string(o)
}

// MatrixText prints the matrix for a terminal: one row per strategy, one
// numbered column per scenario (named in a legend below), then each failing
// cell's shortest counterexample. A safe cell whose bound was not explored
// in full is marked with '*'.
func MatrixText(w io.Writer, m *harness.MatrixResult) error {
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
				text = short(c.Outcome)
				if c.Outcome == harness.Safe && !c.Complete {
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
		if t := rowTitle(m, sc); t != "" {
			title = " — " + t
		}
		fmt.Fprintf(&b, "  %2d %s%s\n", i+1, sc, title)
	}
	b.WriteString("\nsafe: no violation in any schedule within the bound; VIOL: mutual exclusion,\n" +
		"release or fencing violated; DEAD: deadlock; STARV: starvation; -: n/a.\n")
	for _, st := range m.Strategies {
		if w := harness.RunSetting(st); w != "" {
			fmt.Fprintf(&b, "%s runs with its lease renewed while its holder runs (%s), as the lock it stands for does by default.\n", st, w)
		}
	}
	if partial {
		b.WriteString("*: the cell's schedule limit was reached before the bound was explored in full:\n")
		for _, c := range m.Cells {
			if c.Outcome == harness.Safe && !c.Complete {
				limit := "its limit"
				if c.Limit > 0 {
					limit = fmt.Sprintf("%d schedules", c.Limit)
				}
				fmt.Fprintf(&b, "   %s × %s stopped at %s\n", c.Strategy, c.Scenario, limit)
			}
		}
	}
	first := true
	for _, c := range m.Cells {
		if !(harness.Verdict{Outcome: c.Outcome}).Failed() {
			continue
		}
		if first {
			b.WriteString("\nshortest counterexamples:\n")
			first = false
		}
		fmt.Fprintf(&b, "  %s × %s: %s (%s)\n    %s\n", c.Strategy, c.Scenario, c.Outcome, c.Property, c.Schedule)
	}
	// The schedule counts, when the matrix has them (matrices recorded
	// before the explorer counted the plain enumeration have none).
	counted := slices.ContainsFunc(m.Cells, func(c harness.Cell) bool { return c.Naive > 0 })
	first = true
	var run, naive int64
	for _, c := range m.Cells {
		if !counted || c.Outcome == harness.NA {
			continue
		}
		if first {
			b.WriteString("\nschedules run / the plain enumeration's (?: not counted; --naive counts them):\n")
			first = false
		}
		n := "?"
		if c.Naive > 0 {
			n = fmt.Sprint(c.Naive)
			naive += c.Naive
		}
		run += int64(c.Schedules)
		fmt.Fprintf(&b, "  %-*s %-24s %7d / %s\n", nameW, c.Strategy, c.Scenario, c.Schedules, n)
	}
	if counted {
		fmt.Fprintf(&b, "  total %d run; %d counted plain\n", run, naive)
	}
	fmt.Fprintf(&b, "\n%d cells in %v\n", len(m.Cells), m.Elapsed.Round(1e6))
	if m.Shard != nil {
		fmt.Fprintf(&b, "shard %v: the cells of the other shards show as ?; locklab matrix merge puts every shard's --json together\n", *m.Shard)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// scenarioOrder is the order of the rows; scenarios not listed follow,
// sorted.
var (
	scenarioOrder = []string{"stale-recovery", "stale-recovery-getset", "clock-skew", "crash-before-expire",
		"ttl-pushed-by-waiters", "release-after-expiry", "pause-past-ttl", "pause-past-ttl-fenced",
		"partitioned-holder", "failover-loses-lock", "redlock-restart", "redlock-restart-delayed",
		"redlock-restart-fsync", "redlock-clock-jump", "redlock-pause"}
)

// strategyOrder is the order of the columns: each registered store's
// (Driver.Columns), store by store; strategies not listed follow, sorted.
func strategyOrder() []string {
	var out []string
	for _, d := range harness.Stores() {
		out = append(out, d.Columns...)
	}
	return out
}

func ordered(names, pref []string) []string {
	var out []string
	for _, p := range pref {
		if slices.Contains(names, p) {
			out = append(out, p)
		}
	}
	var rest []string
	for _, n := range names {
		if !slices.Contains(pref, n) {
			rest = append(rest, n)
		}
	}
	sort.Strings(rest)
	return append(out, rest...)
}

func cellText(c harness.Cell) string {
	switch c.Outcome {
	case harness.Safe:
		if !c.Complete {
			return "safe\\*"
		}
		return "safe"
	case harness.Violated:
		return "**VIOLATED**"
	case harness.Deadlock:
		return "**DEADLOCK**"
	case harness.Starvation:
		return "**STARVATION**"
	case harness.NA:
		return "·"
	}
	return string(c.Outcome)
}

// MatrixMarkdown renders the verdict matrix as a Markdown table, one row
// per scenario and one column per strategy, followed by each failing cell's
// shortest counterexample; preemptions and schedules are the bounds it ran
// with, for the legend. It writes nothing that varies between runs.
func MatrixMarkdown(m *harness.MatrixResult, preemptions, schedules int) string {
	return matrixMarkdown(m, preemptions, schedules, false)
}

func matrixMarkdown(m *harness.MatrixResult, preemptions, schedules int, stores bool) string {
	strats := ordered(m.Strategies, strategyOrder())
	scens := ordered(m.Scenarios, scenarioOrder)
	var b strings.Builder
	b.WriteString("| scenario | checks |")
	for _, s := range strats {
		fmt.Fprintf(&b, " %s |", column(s))
	}
	b.WriteString("\n|---|---|")
	for range strats {
		b.WriteString("---|")
	}
	b.WriteString("\n")
	partial := false
	for _, sc := range scens {
		prop := ""
		if s, ok := m.Scenario(sc); ok {
			prop = string(s.Property)
		}
		fmt.Fprintf(&b, "| `%s` | %s |", sc, prop)
		for _, s := range strats {
			c, ok := m.Cell(s, sc)
			text := "?"
			if ok {
				text = cellText(c)
				partial = partial || (c.Outcome == harness.Safe && !c.Complete)
			}
			fmt.Fprintf(&b, " %s |", text)
		}
		b.WriteString("\n")
	}
	bound := "every schedule of every cell within it explored"
	if partial {
		bound = fmt.Sprintf("at most %d schedules per cell", schedules)
		if slices.ContainsFunc(m.Cells, func(c harness.Cell) bool { return c.Limit > 0 && c.Limit < schedules }) {
			bound += ", fewer where safe\\* below says"
		}
	}
	fmt.Fprintf(&b, "\nsafe: no violation in any schedule within the bound (at most %d preemptions, %s); "+
		"VIOLATED: mutual exclusion, release safety or fencing broken; DEADLOCK: nobody can ever acquire again "+
		"(two fresh clients, a TTL apart, both refused); "+
		"STARVATION: a waiter never gets a free lock; ·: the scenario does not apply to the strategy.", preemptions, bound)
	if partial {
		fmt.Fprintf(&b, " safe\\*: the cell's schedule limit was reached before the bound was explored in full: %s.",
			limitsText(m, strats, scens, schedules))
	}
	for _, s := range strats {
		if w := harness.RunSetting(s); w != "" {
			fmt.Fprintf(&b, " `%s` (%s): run with its lease renewed while its holder runs, as the lock it stands for "+
				"runs by default (locklab's %s renews only with `Config.Watchdog`).", s, w, s)
		}
	}
	if stores {
		b.WriteString("\n\n**Counterexamples** (the first found with the fewest preemptions). Look at any of them step " +
			"by step with `locklab demo X --strategy S --schedule '...'`.\n")
	} else {
		b.WriteString("\n\n**Shortest counterexamples.** Replay any of them with " +
			"`locklab explore --strategy S --scenario X`, or look at it step by step with `locklab demo X --strategy S`.\n")
	}
	for _, sc := range scens {
		var lines []string
		for _, s := range strats {
			c, ok := m.Cell(s, sc)
			if !ok || !(harness.Verdict{Outcome: c.Outcome}).Failed() {
				continue
			}
			lines = append(lines, fmt.Sprintf("  - `%s`: %s (%s) — `%s`", s, c.Outcome, c.Property, c.Schedule))
		}
		if len(lines) == 0 {
			continue
		}
		fmt.Fprintf(&b, "\n- `%s`\n%s", sc, strings.Join(lines, "\n"))
	}
	b.WriteString("\n")
	countsMarkdown(&b, m, strats, scens, stores)
	return b.String()
}

// limitsText names, for each schedule limit that stopped a SAFE cell
// short of its bound, the cells it stopped; a cell that does not say its
// limit (an older recording) stopped at schedules.
func limitsText(m *harness.MatrixResult, strats, scens []string, schedules int) string {
	byLimit := map[int][]string{}
	for _, sc := range scens {
		for _, s := range strats {
			c, ok := m.Cell(s, sc)
			if !ok || c.Outcome != harness.Safe || c.Complete {
				continue
			}
			l := c.Limit
			if l == 0 {
				l = schedules
			}
			byLimit[l] = append(byLimit[l], fmt.Sprintf("`%s` on `%s`", sc, s))
		}
	}
	limits := make([]int, 0, len(byLimit))
	for l := range byLimit {
		limits = append(limits, l)
	}
	slices.SortFunc(limits, func(a, b int) int { return b - a })
	parts := make([]string, len(limits))
	for i, l := range limits {
		parts[i] = fmt.Sprintf("%d schedules for %s", l, strings.Join(byLimit[l], ", "))
	}
	return strings.Join(parts, "; ")
}

// storeCounts writes the schedules each cell of another store ran (each
// level of preemptions counts the lower levels' schedules again).
func storeCounts(b *strings.Builder, m *harness.MatrixResult, strats, scens []string) {
	b.WriteString("\n**Schedules run** (with at most two preemptions; where that finds a violation, then with at most one too).\n\n| scenario |")
	for _, s := range strats {
		fmt.Fprintf(b, " %s |", column(s))
	}
	b.WriteString("\n|---|")
	for range strats {
		b.WriteString("---:|")
	}
	b.WriteString("\n")
	run := 0
	for _, sc := range scens {
		fmt.Fprintf(b, "| `%s` |", sc)
		for _, s := range strats {
			c, ok := m.Cell(s, sc)
			if !ok || c.Outcome == harness.NA {
				b.WriteString(" · |")
				continue
			}
			fmt.Fprintf(b, " %d |", c.Schedules)
			run += c.Schedules
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(b, "\nIn all: %d schedules run.\n", run)
}

// StoresMarkdown renders the matrix of the strategies of the stores other
// than Redis as MatrixMarkdown does, with preemptions and schedules their
// cells' bounds, followed by why each n/a cell is n/a: on these stores a
// scenario is n/a for a reason of the store's, which the table's dot
// does not tell. It writes nothing that varies between runs.
func StoresMarkdown(m *harness.MatrixResult, preemptions, schedules int) string {
	var b strings.Builder
	b.WriteString(matrixMarkdown(m, preemptions, schedules, true))
	type group struct {
		why    string
		cells  []string
		strats []string
	}
	var groups []*group
	for _, s := range ordered(m.Strategies, strategyOrder()) {
		for _, c := range m.Cells {
			if c.Strategy != s || c.Outcome != harness.NA || c.Message == "" {
				continue
			}
			i := slices.IndexFunc(groups, func(g *group) bool { return g.why == c.Message })
			if i < 0 {
				groups = append(groups, &group{why: c.Message})
				i = len(groups) - 1
			}
			g := groups[i]
			if !slices.Contains(g.cells, c.Scenario) {
				g.cells = append(g.cells, c.Scenario)
			}
			if !slices.Contains(g.strats, s) {
				g.strats = append(g.strats, s)
			}
		}
	}
	if len(groups) == 0 {
		return b.String()
	}
	b.WriteString("\n**Not applicable, and why.**\n\n")
	for _, g := range groups {
		scs := ordered(g.cells, scenarioOrder)
		for i := range scs {
			scs[i] = "`" + scs[i] + "`"
		}
		sts := slices.Clone(g.strats)
		for i := range sts {
			sts[i] = "`" + sts[i] + "`"
		}
		fmt.Fprintf(&b, "- %s on %s: %s.\n", strings.Join(scs, ", "), strings.Join(sts, ", "), g.why)
	}
	return b.String()
}

// countsMarkdown writes, when m has them, the schedules each cell ran and
// those the plain enumeration runs within the same bound.
func countsMarkdown(b *strings.Builder, m *harness.MatrixResult, strats, scens []string, stores bool) {
	if stores {
		storeCounts(b, m, strats, scens)
		return
	}
	if !slices.ContainsFunc(m.Cells, func(c harness.Cell) bool { return c.Naive > 0 }) {
		return
	}
	b.WriteString("\n**Schedules run / the plain enumeration's.** The explorer keeps sleep sets (a step whose other orders " +
		"run elsewhere is not taken again until a step it depends on runs) and does not branch between a client's MULTI " +
		"and its EXEC; the plain enumeration does neither ([reduction.md](reduction.md)).\n\n| scenario |")
	for _, s := range strats {
		fmt.Fprintf(b, " %s |", column(s))
	}
	b.WriteString("\n|---|")
	for range strats {
		b.WriteString("---:|")
	}
	b.WriteString("\n")
	var run, naive int64
	unknown := false
	for _, sc := range scens {
		fmt.Fprintf(b, "| `%s` |", sc)
		for _, s := range strats {
			c, ok := m.Cell(s, sc)
			switch {
			case !ok || c.Outcome == harness.NA:
				b.WriteString(" · |")
			case c.Naive > 0:
				fmt.Fprintf(b, " %d / %d |", c.Schedules, c.Naive)
				run, naive = run+int64(c.Schedules), naive+c.Naive
			default:
				fmt.Fprintf(b, " %d / ? |", c.Schedules)
				run += int64(c.Schedules)
				unknown = true
			}
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(b, "\nIn all: %d schedules run, %d in the plain enumeration.", run, naive)
	if unknown {
		b.WriteString(" ?: not counted (`locklab matrix --naive` counts them).")
	}
	b.WriteString("\n")
}

// MatrixSummary sums the matrix up row by row, in words, for the prose
// beside a table: each scenario's columns grouped by outcome, the largest
// group, when it holds more than half of the row, written as "every other
// lock". Generated from the cells, it cannot contradict the table.
func MatrixSummary(m *harness.MatrixResult) string {
	strats := ordered(m.Strategies, strategyOrder())
	var b strings.Builder
	for _, sc := range ordered(m.Scenarios, scenarioOrder) {
		var order []harness.Outcome
		groups := map[harness.Outcome][]string{}
		capped := map[harness.Outcome][]string{} // safe*: the limit stopped the search
		for _, s := range strats {
			c, ok := m.Cell(s, sc)
			if !ok || c.Outcome == harness.NA {
				continue
			}
			o := c.Outcome
			if _, seen := groups[o]; !seen {
				order = append(order, o)
			}
			name := "`" + s + "`"
			if o == harness.Safe && !c.Complete {
				name += " (safe\\*)"
				capped[o] = append(capped[o], "`"+s+"`")
			}
			groups[o] = append(groups[o], name)
		}
		if len(order) == 0 {
			continue
		}
		n := 0
		for _, g := range groups {
			n += len(g)
		}
		// The outcomes in a fixed order: SAFE first, then the failures.
		slices.SortStableFunc(order, func(a, b harness.Outcome) int { return outcomeRank(a) - outcomeRank(b) })
		big := harness.Outcome("")
		for _, o := range order {
			if len(order) > 1 && 2*len(groups[o]) > n && (big == "" || len(groups[o]) > len(groups[big])) {
				big = o
			}
		}
		var parts []string
		for _, o := range order {
			if o == big {
				continue
			}
			parts = append(parts, fmt.Sprintf("%s on %s", summaryWord(o), strings.Join(groups[o], ", ")))
		}
		whole := func(o harness.Outcome, text string) string {
			if len(capped[o]) > 0 {
				text += fmt.Sprintf(" (safe\\* on %s: the search stopped at its limit)", strings.Join(capped[o], ", "))
			}
			return text
		}
		switch {
		case len(order) == 1 && n > 1:
			parts = []string{whole(order[0], fmt.Sprintf("%s on all %d locks it applies to", summaryWord(order[0]), n))}
		case big != "":
			parts = append(parts, whole(big, fmt.Sprintf("%s on every other one (%d)", summaryWord(big), len(groups[big]))))
		}
		fmt.Fprintf(&b, "- `%s`: %s.\n", sc, strings.Join(parts, "; "))
	}
	return b.String()
}

func outcomeRank(o harness.Outcome) int {
	switch o {
	case harness.Safe:
		return 0
	case harness.Violated:
		return 1
	case harness.Deadlock:
		return 2
	case harness.Starvation:
		return 3
	}
	return 4
}

func summaryWord(o harness.Outcome) string {
	if o == harness.Safe {
		return "safe"
	}
	return "**" + string(o) + "**"
}

// column is a strategy's column header: its name, and how the harness
// runs it where that is not its default (harness.RunSetting).
func column(strategy string) string {
	if w := harness.RunSetting(strategy); w != "" {
		return fmt.Sprintf("`%s` (%s)", strategy, w)
	}
	return "`" + strategy + "`"
}
