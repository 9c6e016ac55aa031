package stress_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/harness/stress"
	"github.com/locklab/locklab/harness/stress/stresstest"
	"github.com/locklab/locklab/internal/tooling/redistest"
	"github.com/locklab/locklab/stores/redis"
)

// The process-mode tests run this test binary as their workers.
func TestMain(m *testing.M) { stresstest.Main(m) }

// processOptions runs on one fresh redis-server in process mode.
func processOptions(t *testing.T, o stress.Options) stress.Options {
	srv := redistest.StartOne(t)
	o.Store = &redis.StressServers{Nodes: []locklab.ConnSource{srv.Pool}, Addrs: []string{srv.Addr}}
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
				Strategy: name, Clients: 4, Duration: 2 * time.Minute, TTL: 250 * time.Millisecond,
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
// workers are replaced. A cycle is four events, each followed by a crash
// one time in a hundred: 300 cycles hold some 12 crashes (none at all: a
// chance of 1e-5) and some 30 pauses. The stuck window is far longer than
// the default 1s of a 50ms TTL, which a loaded machine's workers can
// spend on one cycle: a lock nobody can take stays so much longer.
func TestProcessesSetNXPXFenced(t *testing.T) {
	t.Parallel()
	rep, err := stress.Run(context.Background(), processOptions(t, stress.Options{
		Strategy: "set-nx-px", Clients: 4, Cycles: 300, Duration: 2 * time.Minute, TTL: 50 * time.Millisecond,
		Stuck: 10 * time.Second, PauseProb: 0.1, CrashProb: 0.01, Seed: 6,
	}))
	require.NoError(t, err)
	t.Logf("%d cycles, %d pauses, %d crashes, %d overlaps, %d refusals, %d lost, %d errors",
		rep.Cycles, rep.Pauses, rep.Crashes, rep.Overlaps, rep.FenceRefusals, rep.LostUpdates, rep.Errors)
	stresstest.Cycles(t, rep, 300)
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

// A worker process that is slow to start (a loaded machine, a big binary)
// is not a client kept from the lock: the stuck window starts when the
// workers are up, so no starvation is reported before they try. The run
// goes on until they have taken the lock, however late they start.
func TestProcessesSlowStartIsNotStarvation(t *testing.T) {
	t.Parallel()
	o := processOptions(t, stress.Options{
		Strategy: "set-nx-px", Clients: 2, Cycles: 20, Duration: 2 * time.Minute, TTL: 50 * time.Millisecond,
		Stuck: time.Second, PauseProb: -1, CrashProb: -1, Seed: 11,
	})
	// The workers start 1.5s late, longer than the stuck window.
	o.WorkerCommand = append([]string{"sh", "-c", `sleep 1.5; exec "$@"`, "sh"}, o.WorkerCommand...)
	rep, err := stress.Run(context.Background(), o)
	require.NoError(t, err)
	assert.Empty(t, rep.Liveness, "no liveness violation while the workers start: %+v", rep.First)
	stresstest.Cycles(t, rep, 20)
	stresstest.NoWorkersLeft(t)
}
