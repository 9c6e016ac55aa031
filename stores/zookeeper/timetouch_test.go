package zookeeper

import (
	"context"
	"strings"
	"testing"

	"github.com/locklab/locklab/harness"
)

// TestTimeStepsCommute: a time step on ZooKeeper touches the zxid and the
// ephemeral nodes of the sessions it ends (the silent clients'), those
// clients' reach, the clock and the holders (TimeTouch), and commutes
// with the steps that touch none of it. On two cells whose scenarios take
// time steps (the holder crashed or cut off in some, whose
// session the step ends), the reduced walk
// reaches the plain walk's verdict with a counterexample as short, and
// its runs fall into as many traces as the plain walk's (up to the
// violation, where a run stops at one): it reaches every one. In all it
// runs fewer schedules. With the footprint left empty (a time step that
// ends nothing), or only the nodes and the zxid left out, the reduced
// walk misses traces of zk-recipe × partitioned-holder.
func TestTimeStepsCommute(t *testing.T) {
	if testing.Short() {
		t.Skip("explores schedules on ZooKeeper twice")
	}
	nodes := ensemble(t)
	steps := func(h *harness.History) int {
		if h == nil {
			return 0
		}
		return len(strings.Fields(h.Schedule))
	}
	var plainRuns, reducedRuns int
	for _, cell := range []struct{ strategy, scenario string }{
		// The cell a footprint too small fails, and a safe one. Four
		// more (zk-ephemeral × stale-recovery and partitioned-holder,
		// zk-recipe and zk-golib × release-after-expiry) passed too, at
		// minutes more under -race.
		{"zk-recipe", "partitioned-holder"},
		{"zk-ephemeral", "release-after-expiry"},
	} {
		cs, err := harness.Resolve(cell.scenario, cell.strategy)
		if err != nil {
			t.Fatal(err)
		}
		explore := func(plain bool) *harness.ExploreResult {
			res, err := harness.Explore(context.Background(), harness.ExploreOptions{Case: cs, Nodes: nodes,
				MaxSchedules: 1 << 20, Workers: 2, NoReduction: plain, NoSymmetry: true})
			if err != nil {
				t.Fatal(err)
			}
			if !res.Complete {
				t.Fatalf("%s × %s: not complete after %d schedules", cell.strategy, cell.scenario, res.Schedules)
			}
			return res
		}
		p, r := explore(true), explore(false)
		plainRuns += p.Schedules
		reducedRuns += r.Schedules
		name := cell.strategy + " × " + cell.scenario
		if r.Outcome != p.Outcome || steps(r.Counterexample) != steps(p.Counterexample) {
			t.Errorf("%s: reduced %s in %d steps, plain %s in %d", name, r.Outcome, steps(r.Counterexample), p.Outcome, steps(p.Counterexample))
		}
		if r.Traces != p.Traces {
			t.Errorf("%s: the reduced walk's runs fall into %d traces, the plain walk's %d", name, r.Traces, p.Traces)
		}
		if r.Schedules > p.Schedules {
			t.Errorf("%s: reduced ran %d schedules, plain %d", name, r.Schedules, p.Schedules)
		}
		t.Logf("%-40s %-8s reduced %5d schedules (%5d traces), plain %5d (%5d traces)", name, p.Outcome, r.Schedules, r.Traces, p.Schedules, p.Traces)
	}
	if reducedRuns >= plainRuns {
		t.Errorf("the reduction ran %d schedules, the plain walk %d", reducedRuns, plainRuns)
	}
}
