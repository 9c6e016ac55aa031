// Redis's part of stress mode, run by harness/stress: a node fault on
// plain nodes, struck and healed, in goroutine and process mode. (A
// Sentinel group's failover is stressfailover_test.go's, a Redis
// Cluster's stresscluster_test.go's.)

package redis_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/harness/fault"
	"github.com/locklab/locklab/harness/stress"
	"github.com/locklab/locklab/harness/stress/stresstest"
	"github.com/locklab/locklab/internal/tooling/backends"
	"github.com/locklab/locklab/internal/tooling/redistest"
	"github.com/locklab/locklab/stores/redis"
	"github.com/locklab/locklab/stores/redis/redisnode"
)

// The process-mode tests run this test binary as their workers.
func TestMain(m *testing.M) { stresstest.Main(m) }

// nodes are the servers of a run on one fresh redis-server.
func nodes(t *testing.T) *redis.StressServers {
	srv := redistest.StartOne(t)
	return &redis.StressServers{Nodes: []locklab.ConnSource{srv.Pool}}
}

// A node restarted without its data forgets the lock: with a TTL far
// longer than any hold and no client pause, holds still overlap, and the
// faults are in the report and the timeline. Restarted with an append-only
// file, the node remembers, and nothing overlaps.
func TestNodeFaultRestart(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, err := redisnode.Start(ctx, redisnode.Options{Backend: backends.Process, N: 1})
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	n := c.Nodes()[0]
	base := stress.Options{
		Strategy: "set-nx-px", Store: &redis.StressServers{Nodes: []locklab.ConnSource{n.Pool()}, FaultNodes: []redis.StressFaultNode{n}},
		Clients: 4, TTL: 10 * time.Second, HoldMax: 400 * time.Millisecond, PauseProb: -1, CrashProb: -1,
		NoFence: true, FaultEvery: 300 * time.Millisecond, FaultFor: 5 * time.Millisecond, Seed: 7,
	}

	// A restart breaks the lock only when it strikes while a key is held
	// and another client takes it before the holder is done, which a
	// loaded machine, slow to restart a node, makes rare: the run goes on
	// until the first overlap, its Duration a deadline.
	o := base
	o.Faults, o.Duration, o.StopOnViolation = []fault.Fault{fault.Restart}, 2*time.Minute, true
	rep, err := stress.Run(ctx, o)
	require.NoError(t, err)
	t.Logf("restart: %d cycles, %d node faults, %d overlaps, %d lost updates in %v", rep.Cycles, len(rep.NodeFaults), rep.Overlaps, rep.LostUpdates, rep.Elapsed)
	require.NotEmpty(t, rep.NodeFaults)
	for _, f := range rep.NodeFaults {
		assert.Equal(t, fault.Restart, f.Kind)
		assert.Empty(t, f.Err)
	}
	require.Positive(t, rep.Overlaps, "a holder's key vanished with the restart")
	var ov stress.Violation
	for _, v := range rep.First {
		if v.Kind == stress.KindOverlap {
			ov = v
		}
	}
	assert.Contains(t, fmt.Sprint(ov.Timeline), "restart without its data")

	// The run goes on until three restarts are over and a client has
	// taken the lock after them (two cycles: a release that a restart
	// failed leaves the key to its 10s TTL): a restart that forgot a held
	// key would have let one in beside its holder.
	require.NoError(t, n.SetAppendOnly(ctx, true, "always"))
	o = base
	o.Faults, o.Duration = []fault.Fault{fault.RestartKeep}, 2*time.Minute
	rep = stresstest.Until(t, o, stresstest.AfterFaults(3, 2))
	t.Logf("restart-keep: %d cycles, %d node faults, %d overlaps", rep.Cycles, len(rep.NodeFaults), rep.Overlaps)
	require.NotEmpty(t, rep.NodeFaults)
	assert.Zero(t, rep.Overlaps, "the append-only file brought the lock back: %+v", rep.First)
}

// Pause and partition faults are injected and healed, in process mode too.
// Seed 8 draws a pause, then a partition: the run goes on until both are
// over and the clients have taken the lock after them.
func TestNodeFaultPausePartition(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, err := redisnode.Start(ctx, redisnode.Options{Backend: backends.Process, N: 1})
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	n := c.Nodes()[0]
	rep := stresstest.Until(t, stress.Options{
		Strategy: "set-nx-px", Store: &redis.StressServers{Nodes: []locklab.ConnSource{n.Pool()}, Addrs: []string{n.Addr()}, FaultNodes: []redis.StressFaultNode{n}},
		Processes: true, WorkerCommand: stresstest.WorkerCommand(t),
		Faults: []fault.Fault{fault.Pause, fault.Partition}, Clients: 3, Duration: 2 * time.Minute,
		PauseProb: -1, CrashProb: -1, FaultEvery: 300 * time.Millisecond, FaultFor: 100 * time.Millisecond, Seed: 8,
	}, stresstest.AfterFaults(2, 10))
	kinds := map[fault.Fault]int{}
	for _, f := range rep.NodeFaults {
		kinds[f.Kind]++
		assert.Empty(t, f.Err)
	}
	t.Logf("%d cycles, node faults %v, %d errors", rep.Cycles, kinds, rep.Errors)
	assert.Positive(t, kinds[fault.Pause])
	assert.Positive(t, kinds[fault.Partition])
	assert.Positive(t, rep.Cycles)
	assert.Zero(t, rep.LostUpdates)
	_, err = n.Do(ctx, "PING")
	require.NoError(t, err, "the node answers after the run")
	stresstest.NoWorkersLeft(t)

	_, err = stress.Run(ctx, stress.Options{Strategy: "set-nx-px", Store: &redis.StressServers{Nodes: []locklab.ConnSource{n.Pool()}, FaultNodes: []redis.StressFaultNode{n}}, Faults: []fault.Fault{fault.Failover}})
	require.ErrorIs(t, err, locklab.ErrInvalid, "a run does not fail nodes over")
}

// A node paused for longer than the stuck window makes the lock
// unobtainable for the whole fault: that is the fault, not starvation. Only
// a lock that stays unobtainable after the fault ends is a violation.
func TestNodeFaultLongerThanStuckWindow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, err := redisnode.Start(ctx, redisnode.Options{Backend: backends.Process, N: 1})
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	n := c.Nodes()[0]
	// The run goes on until the first fault is over and the lock was
	// taken after it; a liveness violation ends it first.
	rep := stresstest.Until(t, stress.Options{
		Strategy: "set-nx-px", Store: &redis.StressServers{Nodes: []locklab.ConnSource{n.Pool()}, FaultNodes: []redis.StressFaultNode{n}},
		Faults: []fault.Fault{fault.Pause}, FaultEvery: time.Second, FaultFor: 3 * time.Second,
		Stuck: 2 * time.Second, PauseProb: -1, CrashProb: -1, Duration: 2 * time.Minute, Seed: 9,
	}, stresstest.AfterFaults(1, 10))
	t.Logf("%d cycles, %d node faults, liveness %q", rep.Cycles, len(rep.NodeFaults), rep.Liveness)
	require.NotEmpty(t, rep.NodeFaults)
	assert.GreaterOrEqual(t, rep.NodeFaults[0].For, 3*time.Second, "the fault outlasts the 2s window")
	assert.Empty(t, rep.Liveness, "no liveness violation from the faults alone: %+v", rep.First)
	assert.Positive(t, rep.Cycles, "the lock was taken after the fault")
}
