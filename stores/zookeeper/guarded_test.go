package zookeeper

import (
	"testing"

	"github.com/locklab/locklab/harness"
	"github.com/locklab/locklab/harness/harnesstest"
)

// TestGuardedWriteChecksTheNode: on a real ensemble, c1 takes the lock and
// stops past its session; c2 takes it and writes; c1's multi checks its
// lock node at version 0. zk-recipe's node is c1's own sequential node,
// gone with its session: the check fails and the write is refused.
// zk-ephemeral's node is the lock's one fixed path, which c2 created again
// at version 0: the check passes on c2's node, and c1's stale write goes
// through. zk-golib hands its caller no node: the scenario is n/a on it.
func TestGuardedWriteChecksTheNode(t *testing.T) {
	nodes := ensemble(t)
	for _, tc := range []struct {
		strategy, schedule string
		want               harness.Outcome
		stale              string
	}{
		{"zk-recipe", "c1 c1 c1 c1 c2 c2 c2 c2 c1", harness.Safe, "refused"},
		{"zk-ephemeral", "c1 c1 c1 c2 c2 c2 c1", harness.Violated, "accepted"},
	} {
		out, stale := harnesstest.GuardedRun(t, nodes, "pause-past-ttl-guarded", tc.strategy, tc.schedule)
		if out != tc.want || stale != tc.stale {
			t.Errorf("%s (%s): %v, c1's stale write %s; want %v, %s", tc.strategy, tc.schedule, out, stale, tc.want, tc.stale)
		}
	}
	if why, ok := harness.GuardOf("zk-golib"); ok || why != unguardedGolib {
		t.Errorf("GuardOf(zk-golib) = %q, %v; want the reason, false", why, ok)
	}
}
