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

// sentinelGroup starts a Sentinel group on backend be, skipping the test
// where the backend is not available; the cluster is closed at the end.
func sentinelGroup(t *testing.T, be string) *redisnode.SentinelGroup {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := redisnode.Start(ctx, redisnode.Options{Backend: be, N: 1, Label: t.Name()})
	if be == backends.Docker && err != nil {
		t.Skip("no Docker engine:", err)
	}
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	g, err := c.StartSentinels(ctx, redisnode.SentinelOptions{})
	require.NoError(t, err)
	return g
}

// A failover that cuts the master off from its replicas and the Sentinels,
// but not from the clients, lets two masters grant set-nx-px at once: the
// old one to the clients that have not yet asked the Sentinels again, the
// new one to the others. Client pauses and crashes are off and the TTL far
// above any scheduling delay, so the overlaps are the failover's.
//
// The clients ask the Sentinels every 4s (StressServers.SentinelRefresh), their
// questions spread over that period, so they move to the new master over
// about 4s after the promotion. The first to move may be the one holding
// the lock: its release then goes to the new master, and the key it
// leaves on the old one shuts the clients still there out for up to its
// 1s TTL. With the default 1s refresh that could last until every client
// had moved, and a run on a loaded machine showed no overlap; with 4s the
// old master grants the lock again for seconds while the new one grants
// it to the clients that have moved. A run whose failover still shows no
// overlap (a machine stalled for most of those seconds) runs once more,
// and the test fails if that run shows none either, or no fence refusal.
// A run goes on until its first failover is over, an election the
// Sentinels fail and retry (6s later) on a loaded machine included.
func TestFailoverBreaksSetNXPX(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Sentinel group and waits for a failover")
	}
	t.Parallel()
	for _, be := range []string{backends.Process, backends.Docker} {
		t.Run(be, func(t *testing.T) {
			g := sentinelGroup(t, be)
			for _, processes := range []bool{false, true} {
				for attempt := 1; ; attempt++ {
					rep, f := failoverRun(t, g, processes)
					if rep.InFaults[stress.KindOverlap] > 0 || attempt == 2 {
						assert.Positive(t, rep.InFaults[stress.KindOverlap],
							"processes %v, run %d: %d cycles, %d overlaps, none during the failover; steps %+v",
							processes, attempt, rep.Cycles, rep.Overlaps, f.Steps)
						// The clients that moved to the new master while
						// the old one granted: the new master's fence
						// counter lags the old one's.
						assert.Positive(t, rep.FenceRefusals, "the new master's fence counter lags the old one's")
						break
					}
					t.Logf("processes %v: no overlap during the failover of run %d (%d fence refusals, steps %+v): once more",
						processes, attempt, rep.FenceRefusals, f.Steps)
				}
			}
		})
	}
}

// failoverRun runs set-nx-px on g, failing its master over, and checks
// what every such run shows: the failover's steps. It returns the report
// and the first failover once the old master is a replica again, ready for
// the next run's failover.
func failoverRun(t *testing.T, g *redisnode.SentinelGroup, processes bool) (*stress.Report, stress.NodeFault) {
	t.Helper()
	o := stress.Options{
		Strategy: "set-nx-px", Store: &redis.StressServers{Sentinels: g, SentinelRefresh: 4 * time.Second}, Faults: []fault.Fault{fault.Failover},
		FaultEvery: 500 * time.Millisecond, Duration: 3 * time.Minute, TTL: time.Second,
		PauseProb: -1, CrashProb: -1, Seed: 5,
	}
	rep, f := runFailover(t, o, processes, 1)
	assert.Empty(t, f.Err)
	require.GreaterOrEqual(t, len(f.Steps), 3, "cut, promotion, reconnection: %+v", f.Steps)
	assert.Contains(t, f.Steps[1].What, "the master")
	t.Logf("processes %v: %d cycles, %d overlaps (%d during the failover), %d fence refusals",
		processes, rep.Cycles, rep.Overlaps, rep.InFaults[stress.KindOverlap], rep.FenceRefusals)
	if processes {
		stresstest.NoWorkersLeft(t)
	}
	// Let the old master be demoted before the next run's failover.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, n := range g.Nodes() {
		if n.Name() == f.Node {
			for role, _ := n.Role(ctx); role != "slave" && ctx.Err() == nil; role, _ = n.Role(ctx) {
				time.Sleep(100 * time.Millisecond)
			}
		}
	}
	return rep, f
}

// runFailover runs o, with worker processes when processes is set, until
// its first failovers are over, every stage of them, and the clients have
// taken the lock after them; o.Duration is a deadline, which leaves room
// for the stages' bounds on a loaded machine. It returns the report and
// the first failover.
func runFailover(t *testing.T, o stress.Options, processes bool, failovers int) (*stress.Report, stress.NodeFault) {
	t.Helper()
	if processes {
		o.Processes, o.WorkerCommand = true, stresstest.WorkerCommand(t)
	}
	rep := stresstest.Until(t, o, stresstest.AfterFaults(failovers, 20))
	require.NotEmpty(t, rep.NodeFaults)
	return rep, rep.NodeFaults[0]
}

// What a run on a Sentinel group refuses.
func TestFailoverBadOptions(t *testing.T) {
	t.Parallel()
	_, err := stress.Run(context.Background(), stress.Options{
		Strategy: "set-nx-px", Store: nodes(t), Faults: []fault.Fault{fault.Failover},
	})
	require.ErrorIs(t, err, locklab.ErrInvalid)
	assert.Contains(t, err.Error(), "needs a Sentinel group")
	if testing.Short() {
		return
	}
	g := sentinelGroup(t, backends.Process)
	for _, o := range []stress.Options{
		{Strategy: "redlock", Store: &redis.StressServers{Sentinels: g}, Faults: []fault.Fault{fault.Failover}},
		{Strategy: "set-nx-px", Store: &redis.StressServers{Sentinels: g}, Faults: []fault.Fault{fault.Failover, fault.Pause}},
		{Strategy: "set-nx-px", Store: &redis.StressServers{Sentinels: g, Nodes: nodes(t).Nodes}},
		{Strategy: "set-nx-px", Store: &redis.StressServers{Sentinels: g, SentinelRefresh: -time.Second}},
	} {
		_, err := stress.Run(context.Background(), o)
		require.ErrorIs(t, err, locklab.ErrInvalid, "%+v", o)
	}
}
