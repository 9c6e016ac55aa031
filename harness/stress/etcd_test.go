package stress_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/harness/node"
	"github.com/locklab/locklab/harness/stress"
	"github.com/locklab/locklab/internal/tooling/dockerbox"
	"github.com/locklab/locklab/stores/etcd/etcdproc"
	"github.com/locklab/locklab/stores/etcd/etcdproc/etcdtest"
	_ "github.com/locklab/locklab/strategies/etcdlock" // etcd-lease
)

// An etcd-lease run is refused without an etcd cluster, with a TTL under
// etcd's 1s, and with a Redis node fault; a Redis strategy is refused on
// etcd.
func TestEtcdOptions(t *testing.T) {
	t.Parallel()
	c := &etcdproc.Cluster{} // never started: every case is refused first
	for name, o := range map[string]stress.Options{
		"no cluster":   {Strategy: "etcd-lease", Nodes: []locklab.ConnSource{nil}},
		"ttl":          {Strategy: "etcd-lease", Etcd: c, TTL: 500 * time.Millisecond},
		"restart":      {Strategy: "etcd-lease", Etcd: c, Faults: []node.Fault{node.Restart}},
		"redis on etc": {Strategy: "set-nx-px", Etcd: c},
		"leader-kill":  {Strategy: "set-nx-px", Nodes: []locklab.ConnSource{nil}, Faults: []node.Fault{node.LeaderKill}},
	} {
		_, err := stress.Run(context.Background(), o)
		assert.True(t, errors.Is(err, locklab.ErrInvalid), "%s: %v, want ErrInvalid", name, err)
	}
}

// etcd-lease with its fence checked, clients pausing past the TTL and the
// leader killed, paused and cut off from the clients: the paused holders
// overlap their successors (Jepsen's etcd 3.4.3 finding: a lock is a
// lease), the fence refuses their stale accesses, and no update is lost;
// on both backends.
func TestEtcdLeaseStress(t *testing.T) {
	if testing.Short() {
		t.Skip("runs an etcd cluster for several seconds")
	}
	t.Parallel()
	for _, backend := range []string{etcdproc.BackendProcess, etcdproc.BackendDocker} {
		t.Run(backend, func(t *testing.T) {
			if backend == etcdproc.BackendDocker {
				if _, err := dockerbox.Connect(context.Background()); err != nil {
					t.Skipf("docker backend: %v", err)
				}
			}
			t.Parallel()
			c := etcdtest.Start(t, etcdproc.Options{Backend: backend})
			rep, err := stress.Run(context.Background(), stress.Options{
				Strategy: "etcd-lease", Etcd: c, Clients: 4, Duration: 12 * time.Second, TTL: time.Second,
				PauseProb: 0.1, PauseFor: 2500 * time.Millisecond, CrashProb: -1, Seed: 4,
				Faults: stress.EtcdFaultKinds, FaultEvery: 2 * time.Second, FaultFor: time.Second,
			})
			require.NoError(t, err)
			t.Logf("%d cycles, %d pauses, %d overlaps, %d fence refusals, %d lost updates, node faults %+v",
				rep.Cycles, rep.Pauses, rep.Overlaps, rep.FenceRefusals, rep.LostUpdates, rep.NodeFaults)
			assert.Positive(t, rep.Cycles)
			assert.NotEmpty(t, rep.NodeFaults)
			for _, f := range rep.NodeFaults {
				assert.Empty(t, f.Err, "%v on %s", f.Kind, f.Node)
			}
			if rep.Pauses > 0 {
				assert.Positive(t, rep.Overlaps, "a holder paused past its lease overlaps the next holder")
				assert.Positive(t, rep.FenceRefusals, "the fence refuses the paused holder")
			}
			assert.Zero(t, rep.LostUpdates, "the fence keeps every update")
			assert.Empty(t, rep.Liveness)
		})
	}
}
