package etcd_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/harness/fault"
	"github.com/locklab/locklab/harness/stress"
	"github.com/locklab/locklab/harness/stress/stresstest"
	"github.com/locklab/locklab/internal/tooling/dockerbox"
	"github.com/locklab/locklab/stores/etcd"
	"github.com/locklab/locklab/stores/etcd/etcdproc"
	"github.com/locklab/locklab/stores/etcd/etcdproc/etcdtest"
	"github.com/locklab/locklab/stores/redis"
	_ "github.com/locklab/locklab/strategies/etcdlock" // etcd-lease
)

// The stress tests of the process mode run this test binary as their
// workers.
func TestMain(m *testing.M) { stresstest.Main(m) }

// An etcd-lease run is refused without an etcd cluster, with a TTL under
// etcd's 1s, and with a Redis node fault; a Redis strategy is refused on
// etcd, and etcd's leader-kill on Redis.
func TestEtcdOptions(t *testing.T) {
	t.Parallel()
	c := etcd.NewNode("n1", &etcdproc.Cluster{}) // never started: every case is refused first
	for name, o := range map[string]stress.Options{
		"no cluster":   {Strategy: "etcd-lease"},
		"ttl":          {Strategy: "etcd-lease", Store: c, TTL: 500 * time.Millisecond},
		"ttl 1.5s":     {Strategy: "etcd-lease", Store: c, TTL: 1500 * time.Millisecond},
		"restart":      {Strategy: "etcd-lease", Store: c, Faults: []fault.Fault{fault.Restart}},
		"redis on etc": {Strategy: "set-nx-px", Store: c},
		"leader-kill":  {Strategy: "set-nx-px", Store: &redis.StressServers{Nodes: []locklab.ConnSource{nil}}, Faults: []fault.Fault{fault.LeaderKill}},
	} {
		_, err := stress.Run(context.Background(), o)
		assert.True(t, errors.Is(err, locklab.ErrInvalid), "%s: %v, want ErrInvalid", name, err)
	}
	_, err := stress.Run(context.Background(), stress.Options{Strategy: "etcd-lease", Store: c, TTL: 1500 * time.Millisecond})
	assert.ErrorContains(t, err, "stress: TTL 1.5s: etcd's leases are whole seconds, at least 1s")
	_, err = stress.Run(context.Background(), stress.Options{Strategy: "set-nx-px", Store: &redis.StressServers{Nodes: []locklab.ConnSource{nil}}, Faults: []fault.Fault{fault.LeaderKill}})
	assert.ErrorContains(t, err, "stress: node fault leader-kill strikes an etcd cluster's leader: it takes an etcd strategy")
}

// etcd-lease with its fence checked, clients pausing past the TTL and the
// leader killed, paused and cut off from the clients: the paused holders
// overlap their successors (Jepsen's etcd 3.4.3 finding: a lock is a
// lease), the fence refuses their stale accesses, and no update is lost;
// on both backends. The run goes on until three faults are over and the
// clients have taken the lock after them, and until the fence has refused
// a holder; the Duration is a deadline.
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
			after := stresstest.AfterFaults(3, 10)
			rep := stresstest.Until(t, stress.Options{
				Strategy: "etcd-lease", Store: etcd.NewNode("n1", c), Clients: 4, Duration: 3 * time.Minute, TTL: time.Second,
				PauseProb: 0.1, PauseFor: 2500 * time.Millisecond, CrashProb: -1, Seed: 4,
				Faults: etcd.StressFaults, FaultEvery: 2 * time.Second, FaultFor: time.Second,
			}, func(p stress.Progress) bool { return after(p) && p.FenceRefusals > 0 })
			t.Logf("%d cycles, %d pauses, %d overlaps, %d fence refusals, %d lost updates, node faults %+v",
				rep.Cycles, rep.Pauses, rep.Overlaps, rep.FenceRefusals, rep.LostUpdates, rep.NodeFaults)
			assert.Positive(t, rep.Cycles)
			assert.NotEmpty(t, rep.NodeFaults)
			for _, f := range rep.NodeFaults {
				assert.Empty(t, f.Err, "%v on %s", f.Kind, f.Node)
			}
			assert.Positive(t, rep.Pauses)
			assert.Positive(t, rep.Overlaps, "a holder paused past its lease overlaps the next holder")
			assert.Positive(t, rep.FenceRefusals, "the fence refuses the paused holder")
			assert.Zero(t, rep.LostUpdates, "the fence keeps every update")
			assert.Empty(t, rep.Liveness)
		})
	}
}

// etcd-lease with each client a process of its own, with an etcd client
// of its own: a pause is SIGSTOP, past the lease, whose holder the fence
// then refuses; a crash is SIGKILL, whose lease expires. The run goes on
// for 50 cycles; the Duration is a deadline.
func TestEtcdLeaseStressProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("runs worker processes on an etcd cluster for several seconds")
	}
	t.Parallel()
	c := etcdtest.Start(t, etcdproc.Options{})
	rep, err := stress.Run(context.Background(), stress.Options{
		Strategy: "etcd-lease", Store: etcd.NewNode("n1", c), Clients: 3, Cycles: 50, Duration: 2 * time.Minute,
		PauseProb: 0.05, CrashProb: 0.02, Seed: 5, Processes: true, WorkerCommand: stresstest.WorkerCommand(t),
	})
	require.NoError(t, err)
	t.Logf("%d cycles, %d pauses, %d crashes, %d overlaps, %d fence refusals, %d errors (%s)",
		rep.Cycles, rep.Pauses, rep.Crashes, rep.Overlaps, rep.FenceRefusals, rep.Errors, rep.FirstError)
	assert.Equal(t, time.Second, rep.TTL, "the TTL defaults to etcd's lease granularity")
	stresstest.Cycles(t, rep, 50)
	assert.Zero(t, rep.LostUpdates, "the fence keeps every update")
	assert.Empty(t, rep.Liveness)
	stresstest.NoWorkersLeft(t)
}
