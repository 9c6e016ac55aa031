package zookeeper

import (
	"testing"

	"github.com/locklab/locklab/harness/harnesstest"
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
	// The cell a footprint too small fails, and a safe one. Four more
	// (zk-ephemeral × stale-recovery and partitioned-holder, zk-recipe
	// and zk-golib × release-after-expiry) passed too, at minutes more
	// under -race.
	harnesstest.ReductionKeepsTraces(t, ensemble(t),
		harnesstest.Cell{Strategy: "zk-recipe", Scenario: "partitioned-holder"},
		harnesstest.Cell{Strategy: "zk-ephemeral", Scenario: "release-after-expiry"})
}
