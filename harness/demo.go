// Demo: one case shown step by step, with the key's value recorded after
// every step: the scenario's own schedule, else the shortest counterexample
// exploration finds.

package harness

import "context"

// Result is a demonstrated run: its history and verdict.
type Result struct {
	Case    Case
	History *History
	Verdict Verdict
	// Explored counts the schedules explored to find the run when the
	// scenario has no schedule of its own.
	Explored int
}

// Demo shows a scenario on a strategy: the scenario's own schedule when it
// has one, else the shortest counterexample exploration finds (or, when
// there is none, the default run), recorded with the key's value on every
// node after every step.
func Demo(ctx context.Context, c Case, nodes []Node) (*Result, error) {
	res := &Result{Case: c}
	sched := c.Scenario.Schedule
	if sched == "" {
		ex, err := Explore(ctx, ExploreOptions{Case: c, Nodes: nodes, MaxSchedules: 5000})
		if err != nil {
			return nil, err
		}
		res.Explored = ex.Schedules
		if ex.Counterexample != nil {
			sched = ex.Counterexample.Schedule
		}
	}
	h, err := Run(ctx, RunOptions{Case: c, Nodes: nodes, Schedule: sched})
	if err != nil {
		return nil, err
	}
	res.History, res.Verdict = h, h.Verdict
	return res, nil
}
