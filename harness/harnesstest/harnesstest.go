// Package harnesstest holds what the tests of the harness's stores share:
// resolving a case, reading a history's notes, running a guarded write,
// checking a reduction against the plain walk.
package harnesstest

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/locklab/locklab/harness"
)

// Case resolves scenario on strategy, or fails the test.
func Case(t testing.TB, scenario, strategy string) harness.Case {
	t.Helper()
	c, err := harness.Resolve(scenario, strategy)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// GuardedRun runs scenario (a Scenario.Guarded one) on strategy with
// schedule, on nodes, and returns its verdict and what became of client
// 1's stale write (a write made after a client that took the lock later
// had written): "accepted", "refused", or "none" when it made none.
func GuardedRun(t testing.TB, nodes []harness.Node, scenario, strategy, schedule string) (harness.Outcome, string) {
	t.Helper()
	cs := Case(t, scenario, strategy)
	h, err := harness.Run(context.Background(), harness.RunOptions{Case: cs, Nodes: nodes, Schedule: schedule})
	if err != nil {
		t.Fatalf("%s on %s (%s): %v", scenario, strategy, schedule, err)
	}
	for _, w := range h.Writes {
		if w.Client == 1 && w.Stale {
			if w.Accepted {
				return h.Verdict.Outcome, "accepted"
			}
			return h.Verdict.Outcome, "refused"
		}
	}
	return h.Verdict.Outcome, "none"
}

// Noted reports whether a note of one of h's events begins with prefix.
func Noted(h *harness.History, prefix string) bool {
	for _, e := range h.Events {
		if slices.ContainsFunc(e.Notes, func(n string) bool { return strings.HasPrefix(n, prefix) }) {
			return true
		}
	}
	return false
}

// WorkersAgree explores each scenario on strategy on a store's nodes with
// one worker and with four (each on a key of its own), stopping at the
// first violation, and fails the test unless both give the same result:
// the schedules run and their commands, the outcome, the counterexample's
// schedule, and whether the search was complete. bound is the preemption
// bound (ExploreOptions.MaxPreemptions).
func WorkersAgree(t *testing.T, nodes []harness.Node, strategy string, bound int, scenarios ...string) {
	t.Helper()
	for _, sc := range scenarios {
		cs := Case(t, sc, strategy)
		explore := func(workers int) *harness.ExploreResult {
			res, err := harness.Explore(t.Context(), harness.ExploreOptions{Case: cs, Nodes: nodes,
				MaxPreemptions: bound, Workers: workers, StopAtFirst: true})
			if err != nil {
				t.Fatalf("%s on %s, %d workers: %v", strategy, sc, workers, err)
			}
			return res
		}
		one, four := explore(1), explore(4)
		schedule := func(r *harness.ExploreResult) string {
			if r.Counterexample == nil {
				return ""
			}
			return r.Counterexample.Schedule
		}
		if one.Schedules != four.Schedules || one.Commands != four.Commands || one.Outcome != four.Outcome ||
			schedule(one) != schedule(four) || one.Complete != four.Complete {
			t.Errorf("%s on %s: one worker %s after %d schedules (%d commands, complete %v) %q; four %s after %d (%d, %v) %q",
				strategy, sc, one.Outcome, one.Schedules, one.Commands, one.Complete, schedule(one),
				four.Outcome, four.Schedules, four.Commands, four.Complete, schedule(four))
		}
		t.Logf("%s on %s: %s after %d schedules; one worker %v, four %v", strategy, sc, one.Outcome, one.Schedules,
			one.Elapsed.Round(time.Millisecond), four.Elapsed.Round(time.Millisecond))
	}
}

// Cell is a strategy and a scenario: a cell of the matrix.
type Cell struct{ Strategy, Scenario string }

// ReductionKeepsTraces explores each cell on a store's nodes to the end
// of the bound twice, plainly and reduced (with no symmetry: the cells'
// traces are counted one by one), and fails the test unless, cell by
// cell, the reduced walk reaches the plain walk's verdict with a
// counterexample as short, its runs fall into as many traces as the plain
// walk's, and it runs no more schedules; and, over all the cells, fewer.
// Each cell's figures are logged.
func ReductionKeepsTraces(t *testing.T, nodes []harness.Node, cells ...Cell) {
	t.Helper()
	steps := func(h *harness.History) int {
		if h == nil {
			return 0
		}
		return len(strings.Fields(h.Schedule))
	}
	var plainRuns, reducedRuns int
	for _, cell := range cells {
		cs := Case(t, cell.Scenario, cell.Strategy)
		name := cell.Strategy + " × " + cell.Scenario
		explore := func(plain bool) *harness.ExploreResult {
			res, err := harness.Explore(t.Context(), harness.ExploreOptions{Case: cs, Nodes: nodes,
				MaxSchedules: 1 << 20, Workers: 2, NoReduction: plain, NoSymmetry: true})
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if !res.Complete {
				t.Fatalf("%s: not complete after %d schedules", name, res.Schedules)
			}
			return res
		}
		p, r := explore(true), explore(false)
		plainRuns += p.Schedules
		reducedRuns += r.Schedules
		if r.Outcome != p.Outcome || steps(r.Counterexample) != steps(p.Counterexample) {
			t.Errorf("%s: reduced %s in %d steps, plain %s in %d", name, r.Outcome, steps(r.Counterexample), p.Outcome, steps(p.Counterexample))
		}
		if r.Traces != p.Traces {
			t.Errorf("%s: the reduced walk's runs fall into %d traces, the plain walk's %d", name, r.Traces, p.Traces)
		}
		if r.Schedules > p.Schedules {
			t.Errorf("%s: reduced ran %d schedules, plain %d", name, r.Schedules, p.Schedules)
		}
		t.Logf("%-45s %-8s reduced %5d schedules (%5d traces), plain %5d (%5d traces)", name, p.Outcome, r.Schedules, r.Traces, p.Schedules, p.Traces)
	}
	if reducedRuns >= plainRuns {
		t.Errorf("the reduction ran %d schedules, the plain walk %d", reducedRuns, plainRuns)
	}
}

// Conflict fails the test unless footprints a and b of the steps named
// what conflict as want says, either way round; undeclared (nil) fails.
func Conflict(t *testing.T, what string, a, b *harness.Touch, want bool) {
	t.Helper()
	if a == nil || b == nil {
		t.Errorf("%s: undeclared (%v, %v)", what, a, b)
		return
	}
	if got := a.Conflicts(b); got != want {
		t.Errorf("%s: Conflicts = %v, want %v (%+v, %+v)", what, got, want, *a, *b)
	}
	if got := b.Conflicts(a); got != want {
		t.Errorf("%s (the other way): Conflicts = %v, want %v", what, got, want)
	}
}

// Undeclared fails the test unless u, what the store declared for the
// step named what, is no footprint, one that conflicts with everything,
// even a step that touches nothing.
func Undeclared(t *testing.T, what string, u *harness.Touch) {
	t.Helper()
	if u != nil {
		t.Errorf("%s: declared %+v", what, *u)
	}
	if !u.Conflicts(&harness.Touch{}) || !(&harness.Touch{}).Conflicts(u) {
		t.Errorf("%s: an undeclared step commutes with a step that touches nothing", what)
	}
}
