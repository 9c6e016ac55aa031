package redis_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/harness/fault"
	"github.com/locklab/locklab/harness/stress"
	"github.com/locklab/locklab/harness/stress/stresstest"
	"github.com/locklab/locklab/internal/tooling/backends"
	"github.com/locklab/locklab/stores/redis"
	"github.com/locklab/locklab/stores/redis/redisnode"
)

// redisCluster starts a Redis Cluster on backend be, skipping the test
// where the docker engine does not answer; the cluster is closed at the
// end.
func redisCluster(t *testing.T, be string) *redisnode.RedisCluster {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := redisnode.Start(ctx, redisnode.Options{Backend: be, N: 1, Label: t.Name()})
	if be == backends.Docker && err != nil {
		t.Skip("no Docker engine:", err)
	}
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	g, err := c.StartRedisCluster(ctx, redisnode.RedisClusterOptions{})
	require.NoError(t, err)
	return g
}

// A Redis Cluster failover of the lock key's master loses what its replica
// had not received: the replica, elected in its place, serves a fence
// counter behind the fences already handed out, and the register refuses
// the accesses of the next holders. That is certain: the fault cuts the
// replication link for FaultFor (1s) before the kill, while the clients
// take the lock thousands of times, and the run goes on until two
// failovers are over and the clients have taken the lock after them. Overlaps need a holder still inside
// when the new master grants the lock, which the short holds of this run
// make rare: they are logged, not asserted. Client pauses and crashes are
// off, so what the run reports is the failover's.
func TestClusterFailoverBreaksSetNXPX(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Redis Cluster and waits for a failover")
	}
	t.Parallel()
	for _, be := range []string{backends.Process, backends.Docker} {
		t.Run(be, func(t *testing.T) {
			g := redisCluster(t, be)
			for _, processes := range []bool{false, true} {
				if processes && be == backends.Docker {
					continue // the worker's cluster pool is the same on both
				}
				rep, f := runFailover(t, stress.Options{
					Strategy: "set-nx-px", Store: &redis.StressServers{Cluster: g}, Faults: []fault.Fault{fault.ClusterFailover},
					FaultEvery: 500 * time.Millisecond, FaultFor: time.Second, Duration: 3 * time.Minute,
					PauseProb: -1, CrashProb: -1, Seed: 5,
				}, processes, 2)
				for _, nf := range rep.NodeFaults {
					// The second failover runs on the master the first
					// one restarted, with the clients' user made again.
					assert.Empty(t, nf.Err, "%+v", nf.Steps)
				}
				require.GreaterOrEqual(t, len(f.Steps), 5, "cut, kill, election, restart, rejoin: %+v", f.Steps)
				assert.Contains(t, f.Steps[0].What, "cut off from its replica")
				assert.Contains(t, f.Steps[2].What, "elected")
				assert.Contains(t, f.Steps[4].What, "a replica again")
				assert.Positive(t, rep.FenceRefusals,
					"processes %v: the elected replica's fence counter is behind the old master's; steps %+v", processes, f.Steps)
				t.Logf("processes %v: %d cycles, %d overlaps (%d during the failover), %d lost updates, %d fence refusals; %d failovers",
					processes, rep.Cycles, rep.Overlaps, rep.InFaults[stress.KindOverlap], rep.LostUpdates, rep.FenceRefusals, len(rep.NodeFaults))
				for _, s := range f.Steps {
					t.Logf("  %v %s", s.At.Round(time.Millisecond), s.What)
				}
				if processes {
					stresstest.NoWorkersLeft(t)
				}
			}
		})
	}
}

// What a run on a Redis Cluster refuses.
func TestClusterFailoverBadOptions(t *testing.T) {
	t.Parallel()
	_, err := stress.Run(context.Background(), stress.Options{
		Strategy: "set-nx-px", Store: nodes(t), Faults: []fault.Fault{fault.ClusterFailover},
	})
	require.ErrorIs(t, err, locklab.ErrInvalid)
	assert.Contains(t, err.Error(), "needs a Redis Cluster")
	if testing.Short() {
		return
	}
	g := redisCluster(t, backends.Process)
	for o, want := range map[*stress.Options]string{
		{Strategy: "redlock", Store: &redis.StressServers{Cluster: g}}:                                                              "cannot run on a Redis Cluster",
		{Strategy: "set-nx-px", Store: &redis.StressServers{Cluster: g}, Faults: []fault.Fault{fault.ClusterFailover, fault.Pause}}: "cannot be combined",
		{Strategy: "set-nx-px", Store: &redis.StressServers{Cluster: g, Nodes: nodes(t).Nodes}}:                                     "takes no Nodes",
	} {
		_, err := stress.Run(context.Background(), *o)
		require.ErrorIs(t, err, locklab.ErrInvalid, "%+v", o)
		assert.Contains(t, err.Error(), want)
	}
}
