// The verdict matrix: every strategy against every scenario it applies to,
// each cell the scenario's own schedule then a bounded exploration; and
// Record, which replays the failing cells with the key recorded.

package harness

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/locklab/locklab/harness/node"
	"github.com/locklab/locklab/strategies"
)

// MatrixSchedules is the default most schedules a matrix cell may run: a
// safety net above every catalog cell's whole bound (the largest,
// stale-recovery on Redlock's three nodes, runs 3705), so that the matrix
// states no verdict it did not establish; a cell that reached it would be
// marked safe*.
const MatrixSchedules = 5000

// MatrixOptions bound the verdict matrix.
type MatrixOptions struct {
	// Nodes: at least 3 for the multi-node scenarios (they are n/a with
	// fewer).
	Nodes []Node
	// Strategies and Scenarios restrict the matrix (default: all).
	Strategies []string
	Scenarios  []string
	// MaxPreemptions and MaxSchedules bound each cell's exploration
	// (defaults 2 and MatrixSchedules).
	MaxPreemptions int
	MaxSchedules   int
	// Workers run each cell's schedules on that many databases at once.
	Workers int
	// NoReduction explores every schedule within the bounds, branching
	// inside transactions too (ExploreOptions.NoReduction).
	NoReduction bool
	// Naive counts the schedules of the plain enumeration in every cell:
	// where the reduction skipped some, by running it.
	Naive bool
	// Parallel is how many cells explore at once (default 1), each on
	// Workers databases of its own; a cell that faults a node has the node
	// to itself (place.go).
	Parallel int
	// Progress, when set, is called after every cell, from one cell at a
	// time.
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
	// Naive is how many schedules a plain enumeration would have run
	// within the same bounds (the scenario's own schedule included): the
	// reduction ran Schedules of them. 0 when not counted (the reduction
	// skipped some and MatrixOptions.Naive was off).
	Naive int64 `json:"naive,omitempty"`
	// Elapsed is the time the cell took.
	Elapsed time.Duration `json:"elapsed_ns,omitempty"`
	// Counterexample is the failing run.
	Counterexample *History `json:"-"`
	// cs is the case the cell ran, which Record replays.
	cs *Case
}

// MatrixResult is every strategy against every scenario.
type MatrixResult struct {
	Strategies []string `json:"strategies"`
	Scenarios  []string `json:"scenarios"`
	// About describes each of Scenarios, in the same order: what a
	// rendering of the matrix shows beside its cells.
	About   []ScenarioAbout `json:"about,omitempty"`
	Cells   []Cell          `json:"cells"`
	Elapsed time.Duration   `json:"elapsed_ns"`
}

// ScenarioAbout is what a matrix shows of a scenario: its catalog entry's
// title, story, source and the property it checks.
type ScenarioAbout struct {
	Name     string   `json:"name"`
	Title    string   `json:"title"`
	Story    string   `json:"story"`
	Source   string   `json:"source"`
	Property Property `json:"property"`
}

// Scenario returns what m says about the scenario name.
func (m *MatrixResult) Scenario(name string) (ScenarioAbout, bool) {
	for _, a := range m.About {
		if a.Name == name {
			return a, true
		}
	}
	return ScenarioAbout{}, false
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
// counterexample found), DEADLOCK, STARVATION, or n/a. Parallel cells
// explore at once (place.go).
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
	var jobs []cellJob
	for _, name := range m.Scenarios {
		sc, err := Lookup(name)
		if err != nil {
			return nil, err
		}
		m.About = append(m.About, ScenarioAbout{Name: sc.Name, Title: sc.Title, Story: sc.Story, Source: sc.Source, Property: sc.Property})
		for _, st := range m.Strategies {
			cs, err := sc.Resolve(st)
			if err != nil {
				return nil, fmt.Errorf("%s on %s: %w", st, name, err)
			}
			i := len(m.Cells)
			c, ok := applicable(o, cs)
			m.Cells = append(m.Cells, c)
			if !ok {
				if o.Progress != nil {
					o.Progress(c)
				}
				continue
			}
			jobs = append(jobs, jobFor(i, cs, o.Nodes))
		}
	}
	order(jobs)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	p := newPlacer(len(o.Nodes), o.Workers, o.Parallel)
	var (
		wg       sync.WaitGroup
		firstErr error
	)
	p.mu.Lock()
	for len(jobs) > 0 && firstErr == nil {
		j, pl, ok := p.take(&jobs)
		if !ok && p.running == 0 {
			firstErr = fmt.Errorf("%s on %s: no nodes to run it on", jobs[0].cs.Strategy.Name, jobs[0].cs.Scenario.Name)
			break
		}
		if !ok {
			p.cond.Wait()
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			began := time.Now()
			c, err := exploreCell(ctx, o, j.cs, pl)
			c.Elapsed = time.Since(began)
			p.release(j, pl)
			p.mu.Lock()
			defer p.mu.Unlock()
			if err != nil {
				if firstErr == nil {
					firstErr = fmt.Errorf("%s on %s: %w", j.cs.Strategy.Name, j.cs.Scenario.Name, err)
					cancel()
				}
				return
			}
			m.Cells[j.index] = c
			if o.Progress != nil {
				o.Progress(c)
			}
		}()
	}
	p.mu.Unlock()
	wg.Wait()
	if firstErr != nil {
		return nil, firstErr
	}
	m.Elapsed = time.Since(start)
	return m, nil
}

// applicable returns cs's cell with ok=false when the scenario does not
// apply to the strategy or the nodes cannot run it.
func applicable(o MatrixOptions, cs Case) (Cell, bool) {
	sc := cs.Scenario
	c := Cell{Strategy: cs.Strategy.Name, Scenario: sc.Name, Property: sc.Property, cs: &cs}
	switch {
	case !sc.AppliesTo(cs.Strategy):
		c.Outcome, c.Message = NA, "not for this kind of strategy"
		return c, false
	case len(o.Nodes) < sc.nodes():
		c.Outcome, c.Message = NA, fmt.Sprintf("needs %d nodes", sc.nodes())
		return c, false
	}
	if why, err := sc.unsupported(o.Nodes); err != nil || why != "" {
		if err != nil {
			why = err.Error()
		}
		c.Outcome, c.Message = NA, why
		return c, false
	}
	if cs.Strategy.Replica {
		if _, ok := o.Nodes[0].(replicaLink); !ok {
			c.Outcome, c.Message = NA, "needs a replica to acknowledge (WAIT)"
			return c, false
		}
	}
	return c, true
}

// exploreCell runs cs's cell where pl places it.
func exploreCell(ctx context.Context, o MatrixOptions, cs Case, pl placement) (_ Cell, err error) {
	sc := cs.Scenario
	c := Cell{Strategy: cs.Strategy.Name, Scenario: sc.Name, Property: sc.Property, cs: &cs}
	nodes := make([]Node, len(pl.nodes))
	for i, n := range pl.nodes {
		nodes[i] = o.Nodes[n]
	}
	if slices.Contains(sc.Needs, node.Failover) {
		// Leave the replica in sync for the cells that share the node next
		// (jobFor): the last run may have failed over, or cut it off.
		defer func() {
			for _, n := range nodes {
				if rl, ok := n.(replicaLink); ok && ctx.Err() == nil {
					if cerr := rl.CatchUp(ctx); cerr != nil && err == nil {
						err = fmt.Errorf("catching the replica of %s up: %w", n.Name(), cerr)
					}
				}
			}
		}()
	}
	record := func(h *History) {
		c.Outcome, c.Message = h.Verdict.Outcome, h.Verdict.Message
		c.Schedule = cut(h)
		c.Counterexample = h
	}
	if sc.Schedule != "" {
		h, err := Run(ctx, RunOptions{Case: cs, Nodes: nodes, NoRecord: true, DB: pl.db})
		if err != nil {
			return c, err
		}
		c.Schedules = 1
		if h.Verdict.Failed() {
			c.Naive = 1 // the plain enumeration stops there too
			record(h)
			return c, nil
		}
	}
	maxSched := o.MaxSchedules
	if maxSched <= 0 {
		maxSched = MatrixSchedules
	}
	eo := ExploreOptions{Case: cs, Nodes: nodes, MaxPreemptions: o.MaxPreemptions, MaxSchedules: maxSched,
		Workers: o.Workers, DB: pl.db, NoReduction: o.NoReduction}
	ex, err := Explore(ctx, eo)
	if err != nil {
		return c, err
	}
	c.Schedules += ex.Schedules
	c.Complete = ex.Complete
	naive := ex.Naive
	if naive == 0 && ex.Complete && o.Naive {
		eo.MaxSchedules, eo.NoReduction = 1<<30, true
		plain, err := Explore(ctx, eo)
		if err != nil {
			return c, err
		}
		naive = int64(plain.Schedules)
	}
	if naive > 0 {
		c.Naive = int64(c.Schedules-ex.Schedules) + naive
	}
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

// Record replays the counterexample of every failing cell of m, a matrix
// Matrix ran, on nodes with the lock key read on every node after every
// step, so that the timelines show the key's value, as "locklab demo"
// does. The matrix's exploration does not record it, to run fast. A replay
// replaces the counterexample only when it reaches the same verdict; it
// returns how many were replaced.
func Record(ctx context.Context, m *MatrixResult, nodes []Node) (int, error) {
	n := 0
	for i := range m.Cells {
		c := &m.Cells[i]
		ce := c.Counterexample
		if ce == nil || !(Verdict{Outcome: c.Outcome}).Failed() {
			continue
		}
		if c.cs == nil {
			continue // not a cell Matrix ran (one read back from JSON, say)
		}
		h, err := Run(ctx, RunOptions{Case: *c.cs, Nodes: nodes, Schedule: ce.Schedule})
		if err != nil {
			if ctx.Err() != nil {
				return n, ctx.Err()
			}
			continue // keep the unrecorded history
		}
		if h.Verdict.Outcome != ce.Verdict.Outcome || h.Verdict.Property != ce.Verdict.Property || h.Schedule != ce.Schedule {
			continue
		}
		c.Counterexample = h
		n++
	}
	if ctx.Err() != nil {
		return n, fmt.Errorf("report: %w", ctx.Err())
	}
	return n, nil
}

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
