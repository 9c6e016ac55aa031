package harness

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/strategies"
)

type (
	lockConfig = locklab.Config
	lockLocker = locklab.Locker
)

// RunOptions describe one run of a scenario on a strategy.
type RunOptions struct {
	Scenario string
	Strategy string
	Nodes    []Node
	// Schedule overrides the scenario's schedule; after it runs out the
	// default order continues (the client that ran last goes on, else the
	// lowest-numbered one).
	Schedule string
	// Seed seeds the clients' token sources.
	Seed uint64
	// Record reads the lock key on every node after every step, for the
	// timeline (default in Run: true).
	NoRecord bool
	// DB is the database to use on every node (default 0).
	DB int
	// Factory overrides the strategy registry.
	Factory Factory
}

// Run runs one schedule of a scenario on a strategy on fresh Redis state
// and returns its history, with the verdict of the scenario's property.
func Run(ctx context.Context, o RunOptions) (*History, error) {
	sc, spec, err := resolve(o.Scenario, o.Strategy, o.Factory, o.Nodes)
	if err != nil {
		return nil, err
	}
	text := o.Schedule
	if text == "" {
		text = sc.Schedule
	}
	sched, err := ParseSchedule(text)
	if err != nil {
		return nil, err
	}
	spec.seed = o.Seed
	spec.record = !o.NoRecord
	nodes := o.Nodes[:sc.nodes()]
	if !spec.multi {
		nodes = o.Nodes[:1]
	}
	sl := newSlot(nodes, o.DB)
	defer sl.close()
	r := newRun(ctx, spec, sl)
	return r.execute(explicit(sched))
}

// explicit follows sched, skipping client steps that name a client with
// nothing to do, then continues in the default order.
func explicit(sched Schedule) chooser {
	i := 0
	return func(r *run, enabled []Step) (Step, bool) {
		r.mu.Lock()
		defer r.mu.Unlock()
		for i < len(sched) {
			st := sched[i]
			i++
			if !st.IsClient() || r.pickLocked(st) != nil {
				return st, true
			}
			r.hist.Skipped = append(r.hist.Skipped, fmt.Sprintf("step %d of the schedule (%s): nothing to run", i, st))
		}
		return r.defaultStepLocked(enabled)
	}
}

// Result is a demonstrated run: its history, verdict and renderings.
type Result struct {
	Scenario *Scenario
	Strategy string
	History  *History
	Verdict  Verdict
	// Timeline is the text swimlane; Mermaid the sequence diagram.
	Timeline string
	Mermaid  string
	// Explored counts the schedules explored to find the run when the
	// scenario has no schedule of its own.
	Explored int
}

// Demo shows a scenario on a strategy: the scenario's own schedule when it
// has one, else the shortest counterexample exploration finds (or, when
// there is none, the default run), recorded with the key's value on every
// node after every step.
func Demo(ctx context.Context, scenario, strategy string, nodes []Node) (*Result, error) {
	sc, err := Lookup(scenario)
	if err != nil {
		return nil, err
	}
	res := &Result{Scenario: sc, Strategy: strategy}
	sched := sc.Schedule
	if sched == "" {
		ex, err := Explore(ctx, ExploreOptions{Scenario: scenario, Strategy: strategy, Nodes: nodes, MaxSchedules: 5000})
		if err != nil {
			return nil, err
		}
		res.Explored = ex.Schedules
		if ex.Counterexample != nil {
			sched = ex.Counterexample.Schedule
		}
	}
	h, err := Run(ctx, RunOptions{Scenario: scenario, Strategy: strategy, Nodes: nodes, Schedule: sched})
	if err != nil {
		return nil, err
	}
	res.History, res.Verdict = h, h.Verdict
	res.Timeline = Timeline(h)
	res.Mermaid = Mermaid(h)
	return res, nil
}

// RaceDemo prints the C1/C2 race of the SETNX page: the schedule on
// setnx-del, where both clients end up holding the lock, then the same
// schedule on setnx-getset, where the second client is refused, and which
// Redis it ran on.
func RaceDemo(ctx context.Context, w io.Writer, nodes []Node) error {
	if len(nodes) == 0 {
		return fmt.Errorf("race demo: no Redis node")
	}
	sc, _ := Lookup("stale-recovery")
	fmt.Fprintf(w, "The C1/C2 race of the SETNX page (%s)\n\n", sc.Source)
	fmt.Fprintf(w, "%s\n\nSchedule: %s\n\n", WrapText(sc.Story, 78, ""), sc.Schedule)
	for _, strat := range []string{"setnx-del", "setnx-getset"} {
		h, err := Run(ctx, RunOptions{Scenario: sc.Name, Strategy: strat, Nodes: nodes})
		if err != nil {
			return fmt.Errorf("%s: %w", strat, err)
		}
		fmt.Fprintf(w, "== %s ==\n%s\n", strat, Timeline(h))
	}
	sl := newSlot(nodes[:1], 0)
	defer sl.close()
	v := serverVersion(ctx, sl.pool(0))
	fmt.Fprintf(w, "Ran on %s at %s (Redis %s).\n", nodes[0].Name(), nodes[0].Addr(), v)
	if d, ok := nodes[0].(interface{ Describe() string }); ok {
		fmt.Fprintln(w, d.Describe())
	}
	return nil
}

// MatrixOptions bound the verdict matrix.
type MatrixOptions struct {
	// Nodes: at least 3 for the multi-node scenarios (they are n/a with
	// fewer).
	Nodes []Node
	// Strategies and Scenarios restrict the matrix (default: all).
	Strategies []string
	Scenarios  []string
	// MaxPreemptions and MaxSchedules bound each cell's exploration
	// (defaults 2 and 3000).
	MaxPreemptions int
	MaxSchedules   int
	// Workers run each cell's schedules on that many databases at once.
	Workers int
	// Progress, when set, is called after every cell.
	Progress func(Cell)
}

// Cell is one strategy on one scenario.
type Cell struct {
	Strategy string   `json:"strategy"`
	Scenario string   `json:"scenario"`
	Outcome  Outcome  `json:"outcome"`
	Property Property `json:"property,omitempty"`
	// Schedule is the shortest counterexample found, in the text form.
	Schedule string `json:"schedule,omitempty"`
	Message  string `json:"message,omitempty"`
	// Schedules is how many schedules were run; Complete whether that was
	// every one within the bound.
	Schedules int  `json:"schedules"`
	Complete  bool `json:"complete"`
	// Counterexample is the failing run.
	Counterexample *History `json:"-"`
}

// MatrixResult is every strategy against every scenario.
type MatrixResult struct {
	Strategies []string      `json:"strategies"`
	Scenarios  []string      `json:"scenarios"`
	Cells      []Cell        `json:"cells"`
	Elapsed    time.Duration `json:"elapsed_ns"`
}

// Cell returns the cell of strategy and scenario.
func (m *MatrixResult) Cell(strategy, scenario string) (Cell, bool) {
	for _, c := range m.Cells {
		if c.Strategy == strategy && c.Scenario == scenario {
			return c, true
		}
	}
	return Cell{}, false
}

// Matrix runs every strategy against every scenario it applies to: the
// scenario's own schedule first, then a bounded exhaustive exploration. A
// cell is SAFE within the bound, VIOLATED (with the shortest
// counterexample found), DEADLOCK, STARVATION, or n/a.
func Matrix(ctx context.Context, o MatrixOptions) (*MatrixResult, error) {
	start := time.Now()
	m := &MatrixResult{Strategies: o.Strategies, Scenarios: o.Scenarios}
	if len(m.Strategies) == 0 {
		m.Strategies = strategies.Names()
	}
	if len(m.Scenarios) == 0 {
		for _, s := range Scenarios() {
			m.Scenarios = append(m.Scenarios, s.Name)
		}
	}
	for _, scName := range m.Scenarios {
		sc, err := Lookup(scName)
		if err != nil {
			return nil, err
		}
		for _, st := range m.Strategies {
			c, err := matrixCell(ctx, o, sc, st)
			if err != nil {
				return nil, fmt.Errorf("%s on %s: %w", st, sc.Name, err)
			}
			m.Cells = append(m.Cells, c)
			if o.Progress != nil {
				o.Progress(c)
			}
		}
	}
	m.Elapsed = time.Since(start)
	return m, nil
}

func matrixCell(ctx context.Context, o MatrixOptions, sc *Scenario, strategy string) (Cell, error) {
	c := Cell{Strategy: strategy, Scenario: sc.Name, Property: sc.Property}
	d, err := strategies.Info(strategy)
	if err != nil {
		return c, err
	}
	switch {
	case !sc.AppliesTo(d):
		c.Outcome, c.Message = NA, "not for this kind of strategy"
		return c, nil
	case len(o.Nodes) < sc.nodes():
		c.Outcome, c.Message = NA, fmt.Sprintf("needs %d nodes", sc.nodes())
		return c, nil
	}
	for _, need := range sc.Needs {
		for _, n := range o.Nodes[:sc.nodes()] {
			if !supports(n, need) {
				c.Outcome, c.Message = NA, fmt.Sprintf("the nodes cannot %s", need)
				return c, nil
			}
		}
	}
	record := func(h *History) {
		c.Outcome, c.Message = h.Verdict.Outcome, h.Verdict.Message
		c.Schedule = cut(h)
		c.Counterexample = h
	}
	if sc.Schedule != "" {
		h, err := Run(ctx, RunOptions{Scenario: sc.Name, Strategy: strategy, Nodes: o.Nodes, NoRecord: true})
		if err != nil {
			return c, err
		}
		c.Schedules = 1
		if h.Verdict.Failed() {
			record(h)
			return c, nil
		}
	}
	maxSched := o.MaxSchedules
	if maxSched <= 0 {
		maxSched = 3000
	}
	ex, err := Explore(ctx, ExploreOptions{Scenario: sc.Name, Strategy: strategy, Nodes: o.Nodes,
		MaxPreemptions: o.MaxPreemptions, MaxSchedules: maxSched, Workers: o.Workers})
	if err != nil {
		return c, err
	}
	c.Schedules += ex.Schedules
	c.Complete = ex.Complete
	if ex.Counterexample != nil {
		record(ex.Counterexample)
		return c, nil
	}
	c.Outcome = Safe
	if !ex.Complete {
		c.Message = fmt.Sprintf("no violation in %d schedules (bound not exhausted)", ex.Schedules)
	}
	return c, nil
}

// cut returns the schedule of h up to its violation.
func cut(h *History) string {
	s, err := ParseSchedule(h.Schedule)
	if err != nil || h.Verdict.Step <= 0 || h.Verdict.Step > len(s) {
		return h.Schedule
	}
	return s[:h.Verdict.Step].String()
}

// WrapText breaks s into lines of at most width characters, at spaces
// (a longer word gets a line of its own), and starts each line after the
// first with indent.
func WrapText(s string, width int, indent string) string {
	var b strings.Builder
	n := 0
	for _, w := range strings.Fields(s) {
		if n > 0 && n+1+len(w) > width {
			b.WriteString("\n" + indent)
			n = 0
		} else if n > 0 {
			b.WriteByte(' ')
			n++
		}
		b.WriteString(w)
		n += len(w)
	}
	return b.String()
}
