package stress_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/harness/node"
	"github.com/locklab/locklab/harness/stress"
	"github.com/locklab/locklab/harness/stress/stresstest"
	"github.com/locklab/locklab/internal/tooling/redistest"
)

// The process-mode tests run this test binary as their workers.
func TestMain(m *testing.M) { stresstest.Main(m) }

// processOptions runs on one fresh redis-server in process mode.
func processOptions(t *testing.T, o stress.Options) stress.Options {
	srv := redistest.StartOne(t)
	o.Nodes = []locklab.ConnSource{srv.Pool}
	o.Addrs = []string{srv.Addr}
	o.Processes = true
	o.WorkerCommand = stresstest.WorkerCommand(t)
	return o
}

// A worker really stopped with SIGSTOP past its TTL overlaps its successor
// and, with an unsafe release, deletes the successor's key. (setnx-del may
// break even before a pause, through its stale-lock recovery race.) The
// TTL is long enough that a loaded machine holding a worker back for tens
// of milliseconds does not expire it: only the SIGSTOP does.
func TestProcessesUnsafeViolates(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"setnx-del", "set-nx-px-del"} {
		t.Run(name, func(t *testing.T) {
			rep, err := stress.Run(context.Background(), processOptions(t, stress.Options{
				Strategy: name, Clients: 4, Duration: 10 * time.Second, TTL: 250 * time.Millisecond,
				PauseProb: 0.1, CrashProb: -1, StopOnViolation: true, Seed: 5,
			}))
			require.NoError(t, err)
			require.True(t, rep.Violated(), "%s ran %d cycles in %v without a violation", name, rep.Cycles, rep.Elapsed)
			assert.NotEmpty(t, rep.First[0].Timeline)
			if name == "set-nx-px-del" {
				// Holds are far shorter than the TTL: only a SIGSTOP lets
				// a lease expire under its holder.
				assert.Positive(t, rep.Pauses)
				assert.Contains(t, fmt.Sprint(rep.First[0].Timeline), "SIGSTOP")
			}
			t.Logf("%s: %s after %v and %d cycles: %s", name, rep.First[0].Kind, rep.First[0].At.Round(time.Millisecond), rep.Cycles, rep.First[0].Detail)
			stresstest.NoWorkersLeft(t)
		})
	}
}

// set-nx-px with the register's fence check: SIGSTOPped holders overlap
// their successors, the fence refuses them, no update is lost; SIGKILLed
// workers are replaced.
func TestProcessesSetNXPXFenced(t *testing.T) {
	t.Parallel()
	rep, err := stress.Run(context.Background(), processOptions(t, stress.Options{
		Strategy: "set-nx-px", Clients: 4, Duration: 4 * time.Second, TTL: 50 * time.Millisecond,
		PauseProb: 0.1, CrashProb: 0.01, Seed: 6,
	}))
	require.NoError(t, err)
	t.Logf("%d cycles, %d pauses, %d crashes, %d overlaps, %d refusals, %d lost, %d errors",
		rep.Cycles, rep.Pauses, rep.Crashes, rep.Overlaps, rep.FenceRefusals, rep.LostUpdates, rep.Errors)
	assert.Positive(t, rep.Cycles)
	assert.Positive(t, rep.Pauses)
	assert.Positive(t, rep.Crashes, "the run must have exercised SIGKILL")
	assert.Zero(t, rep.LostUpdates, "violations: %+v", rep.First)
	assert.Empty(t, rep.Liveness)
	stresstest.NoWorkersLeft(t)
}

// A worker that cannot start fails the run with its error, not a report.
func TestProcessesBadWorker(t *testing.T) {
	t.Parallel()
	o := processOptions(t, stress.Options{Strategy: "set-nx-px", Clients: 2, Duration: 5 * time.Second})
	o.WorkerCommand = []string{"/bin/false"}
	_, err := stress.Run(context.Background(), o)
	require.Error(t, err)
	o.WorkerCommand = nil
	_, err = stress.Run(context.Background(), o)
	require.ErrorIs(t, err, locklab.ErrInvalid)
}

// A node restarted without its data forgets the lock: with a TTL far
// longer than any hold and no client pause, holds still overlap, and the
// faults are in the report and the timeline. Restarted with an append-only
// file, the node remembers, and nothing overlaps.
func TestNodeFaultRestart(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, err := node.Start(ctx, node.Options{Backend: node.BackendProcess, N: 1})
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	n := c.Nodes()[0]
	base := stress.Options{
		Strategy: "set-nx-px", Nodes: []locklab.ConnSource{n.Pool()}, FaultNodes: []stress.FaultNode{n},
		Clients: 4, TTL: 10 * time.Second, HoldMax: 400 * time.Millisecond, PauseProb: -1, CrashProb: -1,
		NoFence: true, FaultEvery: 300 * time.Millisecond, FaultFor: 5 * time.Millisecond, Seed: 7,
	}

	// A restart breaks the lock only when it strikes while a key is held
	// and another client takes it before the holder is done: a loaded
	// machine runs few cycles in a run, so up to four runs are allowed.
	o := base
	o.Faults, o.Duration = []node.Fault{node.Restart}, 4*time.Second
	var rep *stress.Report
	for run := 1; run <= 4 && (rep == nil || rep.Overlaps == 0); run++ {
		o.Seed = base.Seed + uint64(run) - 1
		var err error
		rep, err = stress.Run(ctx, o)
		require.NoError(t, err)
		t.Logf("restart, run %d: %d cycles, %d node faults, %d overlaps, %d lost updates", run, rep.Cycles, len(rep.NodeFaults), rep.Overlaps, rep.LostUpdates)
		require.NotEmpty(t, rep.NodeFaults)
		for _, f := range rep.NodeFaults {
			assert.Equal(t, node.Restart, f.Kind)
			assert.Empty(t, f.Err)
		}
	}
	require.Positive(t, rep.Overlaps, "a holder's key vanished with the restart")
	var ov stress.Violation
	for _, v := range rep.First {
		if v.Kind == stress.KindOverlap {
			ov = v
		}
	}
	assert.Contains(t, fmt.Sprint(ov.Timeline), "restart without its data")

	require.NoError(t, n.SetAppendOnly(ctx, true, "always"))
	o = base
	o.Faults, o.Duration = []node.Fault{node.RestartKeep}, 1500*time.Millisecond
	rep, err = stress.Run(ctx, o)
	require.NoError(t, err)
	t.Logf("restart-keep: %d cycles, %d node faults, %d overlaps", rep.Cycles, len(rep.NodeFaults), rep.Overlaps)
	require.NotEmpty(t, rep.NodeFaults)
	assert.Zero(t, rep.Overlaps, "the append-only file brought the lock back: %+v", rep.First)
}

// Pause and partition faults are injected and healed, in process mode too.
func TestNodeFaultPausePartition(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, err := node.Start(ctx, node.Options{Backend: node.BackendProcess, N: 1})
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	n := c.Nodes()[0]
	rep, err := stress.Run(ctx, stress.Options{
		Strategy: "set-nx-px", Nodes: []locklab.ConnSource{n.Pool()}, Addrs: []string{n.Addr()},
		Processes: true, WorkerCommand: stresstest.WorkerCommand(t), FaultNodes: []stress.FaultNode{n},
		Faults: []node.Fault{node.Pause, node.Partition}, Clients: 3, Duration: 2500 * time.Millisecond,
		PauseProb: -1, CrashProb: -1, FaultEvery: 300 * time.Millisecond, FaultFor: 100 * time.Millisecond, Seed: 8,
	})
	require.NoError(t, err)
	kinds := map[node.Fault]int{}
	for _, f := range rep.NodeFaults {
		kinds[f.Kind]++
		assert.Empty(t, f.Err)
	}
	t.Logf("%d cycles, node faults %v, %d errors", rep.Cycles, kinds, rep.Errors)
	assert.Positive(t, kinds[node.Pause])
	assert.Positive(t, kinds[node.Partition])
	assert.Positive(t, rep.Cycles)
	assert.Zero(t, rep.LostUpdates)
	_, err = n.Do(ctx, "PING")
	require.NoError(t, err, "the node answers after the run")
	stresstest.NoWorkersLeft(t)

	_, err = stress.Run(ctx, stress.Options{Strategy: "set-nx-px", Nodes: []locklab.ConnSource{n.Pool()}, Faults: []node.Fault{node.Failover}, FaultNodes: []stress.FaultNode{n}})
	require.ErrorIs(t, err, locklab.ErrInvalid, "a run does not fail nodes over")
}

// A node paused for longer than the stuck window makes the lock
// unobtainable for the whole fault: that is the fault, not starvation. Only
// a lock that stays unobtainable after the fault ends is a violation.
func TestNodeFaultLongerThanStuckWindow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, err := node.Start(ctx, node.Options{Backend: node.BackendProcess, N: 1})
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	n := c.Nodes()[0]
	rep, err := stress.Run(ctx, stress.Options{
		Strategy: "set-nx-px", Nodes: []locklab.ConnSource{n.Pool()}, FaultNodes: []stress.FaultNode{n},
		Faults: []node.Fault{node.Pause}, FaultEvery: time.Second, FaultFor: 3 * time.Second,
		Stuck: 2 * time.Second, PauseProb: -1, CrashProb: -1, Duration: 10 * time.Second, Seed: 9,
	})
	require.NoError(t, err)
	t.Logf("%d cycles, %d node faults, liveness %q", rep.Cycles, len(rep.NodeFaults), rep.Liveness)
	require.NotEmpty(t, rep.NodeFaults)
	assert.GreaterOrEqual(t, rep.NodeFaults[0].For, 3*time.Second, "the fault outlasts the 2s window")
	assert.Empty(t, rep.Liveness, "no liveness violation from the faults alone: %+v", rep.First)
	assert.Positive(t, rep.Cycles, "the lock was taken between the faults")
}

// A worker process that is slow to start (a loaded machine, a big binary)
// is not a client kept from the lock: the stuck window starts when the
// workers are up, so no starvation is reported before they try.
func TestProcessesSlowStartIsNotStarvation(t *testing.T) {
	t.Parallel()
	o := processOptions(t, stress.Options{
		Strategy: "set-nx-px", Clients: 2, Duration: 4 * time.Second, TTL: 50 * time.Millisecond,
		Stuck: time.Second, PauseProb: -1, CrashProb: -1, Seed: 11,
	})
	// The workers start 1.5s late, longer than the stuck window.
	o.WorkerCommand = append([]string{"sh", "-c", `sleep 1.5; exec "$@"`, "sh"}, o.WorkerCommand...)
	rep, err := stress.Run(context.Background(), o)
	require.NoError(t, err)
	assert.Empty(t, rep.Liveness, "no liveness violation while the workers start: %+v", rep.First)
	assert.Positive(t, rep.Cycles)
	stresstest.NoWorkersLeft(t)
}
