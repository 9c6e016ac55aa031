// What a matrix run gives: its cells and what it says about each
// scenario, the lookups over them, and Record, which replays the failing
// cells with the key recorded.

package harness

import (
	"context"
	"fmt"
	"time"
)

// MatrixResult is every strategy against every scenario.
type MatrixResult struct {
	Strategies []string `json:"strategies"`
	Scenarios  []string `json:"scenarios"`
	// About describes each of Scenarios, in the same order: what a
	// rendering of the matrix shows beside its cells.
	About   []ScenarioAbout `json:"about,omitempty"`
	Cells   []Cell          `json:"cells"`
	Elapsed time.Duration   `json:"elapsed_ns"`
	// Shard is the shard the result holds the cells of, nil for a whole
	// matrix (MatrixOptions.Shard).
	Shard *Shard `json:"shard,omitempty"`
}

// ScenarioAbout is what a matrix shows of a scenario: its catalog entry's
// title, story, source and the property it checks.
type ScenarioAbout struct {
	Name     string   `json:"name"`
	Title    string   `json:"title"`
	Story    string   `json:"story"`
	Source   string   `json:"source"`
	Property Property `json:"property"`
	// Stores tell it again for the other stores (Scenario.Stores).
	Stores map[string]Telling `json:"stores,omitempty"`
}

// For returns the scenario as told for the store strategy locks on.
func (a ScenarioAbout) For(strategy string) ScenarioAbout {
	if t, ok := a.Stores[StoreOfStrategy(strategy)]; ok {
		a.Title, a.Story, a.Source = t.Title, t.Story, t.Source
	}
	return a
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
		ns := nodes
		if c.storeNodes != nil {
			ns = c.storeNodes
		}
		h, err := Run(ctx, RunOptions{Case: *c.cs, Nodes: ns, Schedule: ce.Schedule})
		if err != nil {
			if ctx.Err() != nil {
				return n, ctx.Err()
			}
			continue // keep the unrecorded history
		}
		// The search stops a run at its violation; the replay runs on to
		// the end: the two agree when they reach the same violation by the
		// same steps.
		if h.Verdict.Outcome != ce.Verdict.Outcome || h.Verdict.Property != ce.Verdict.Property || cut(h) != cut(ce) {
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
