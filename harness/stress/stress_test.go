package stress_test

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
	"github.com/locklab/locklab/internal/tooling/redistest"
	"github.com/locklab/locklab/stores/redis"
)

// nodes are the servers of a run on one fresh redis-server.
func nodes(t *testing.T) *redis.StressServers {
	srv := redistest.StartOne(t)
	return &redis.StressServers{Nodes: []locklab.ConnSource{srv.Pool}}
}

// Every strategy unsafe on one node shows a violation under the default
// faults; the run stops at the first one, its Duration only a deadline
// for a loaded machine.
func TestUnsafeStrategiesViolate(t *testing.T) {
	t.Parallel()
	n := nodes(t)
	for name, kinds := range map[string][]string{
		"setnx-del":         {stress.KindOverlap, stress.KindLostUpdate},
		"set-nx-px-del":     {stress.KindOverlap, stress.KindLostUpdate},
		"incr-expire":       {stress.KindDeadlock, stress.KindOverlap, stress.KindLostUpdate},
		"setnx-expire":      {stress.KindDeadlock, stress.KindOverlap, stress.KindLostUpdate},
		"incr-expire-multi": {stress.KindStarvation, stress.KindOverlap, stress.KindLostUpdate},
		"setnx-getset":      {stress.KindOverlap, stress.KindLostUpdate},
		"incr-expire-lua":   {stress.KindOverlap, stress.KindLostUpdate},
		"set-nx-px-getdel":  {stress.KindOverlap, stress.KindLostUpdate},
	} {
		t.Run(name, func(t *testing.T) {
			rep, err := stress.Run(context.Background(), stress.Options{
				Strategy: name, Store: n, Duration: 2 * time.Minute, StopOnViolation: true, Seed: 1,
			})
			require.NoError(t, err)
			require.True(t, rep.Violated(), "%s ran %d cycles in %v without a violation", name, rep.Cycles, rep.Elapsed)
			assert.Contains(t, kinds, rep.First[0].Kind)
			assert.NotEmpty(t, rep.First[0].Timeline, "the first violation comes with the events before it")
			t.Logf("%s: %s after %v and %d cycles: %s", name, rep.First[0].Kind, rep.First[0].At.Round(time.Millisecond), rep.Cycles, rep.First[0].Detail)
		})
	}
}

// set-nx-px with the fence checked at the register: without client pauses
// nothing goes wrong, crashes included. The TTL is far above the holds (2ms
// at most): only a pause longer than the TTL overlaps holds, and a loaded
// machine that stops a goroutine for a few hundred milliseconds is such a
// pause too.
func TestSetNXPXWithFencing(t *testing.T) {
	t.Parallel()
	n := nodes(t)
	rep, err := stress.Run(context.Background(), stress.Options{
		Strategy: "set-nx-px", Store: n, Cycles: 2000, Duration: 3 * time.Minute,
		PauseProb: -1, TTL: 750 * time.Millisecond, Seed: 2,
	})
	require.NoError(t, err)
	// A stall of the machine longer than the TTL is a pause all the same,
	// and overlaps holds; the fence keeps the late holder's write out, so
	// no update is lost whatever the load.
	for _, v := range rep.First {
		assert.Equal(t, stress.KindOverlap, v.Kind, "violations: %+v", rep.First)
	}
	assert.Zero(t, rep.LostUpdates)
	if rep.Overlaps > 0 {
		t.Logf("%d holds overlapped: the machine stalled a holder past the %v TTL", rep.Overlaps, 750*time.Millisecond)
	}
	// The run stops at 2000; the clients inside a cycle then finish it.
	// (A crashed holder keeps everybody out for the TTL: the Duration is a
	// deadline for the crashes of 2000 cycles on a loaded machine.)
	stresstest.Cycles(t, rep, 2000)
	assert.Less(t, rep.Cycles, int64(2000+8), "at most one more cycle per other client")
	assert.Positive(t, rep.Crashes, "the run must have exercised crashes")
}

// With client pauses, set-nx-px's holds overlap (the paused holder does not
// know it lost the lock) but the fence refuses its stale access, so no
// update is lost. A pause outlasts the TTL: once one has begun, the next
// cycle is a successor's, which overlaps the paused holder, and whose
// fence refuses the paused one's write. 200 cycles hold some 20 pauses
// (none at all: a chance of 1e-9).
func TestSetNXPXWithFencingPaused(t *testing.T) {
	t.Parallel()
	rep, err := stress.Run(context.Background(), stress.Options{
		Strategy: "set-nx-px", Store: nodes(t), Cycles: 200, Duration: 2 * time.Minute, PauseProb: 0.1, CrashProb: -1, Seed: 3,
	})
	require.NoError(t, err)
	stresstest.Cycles(t, rep, 200)
	assert.Positive(t, rep.Pauses)
	assert.Positive(t, rep.Overlaps, "a holder paused past its TTL overlaps its successor")
	assert.Positive(t, rep.FenceRefusals, "the fence refuses the stale holder")
	assert.Zero(t, rep.LostUpdates)
}

// The same pauses without the fence check lose updates: the checker can
// fail. Each pause outlasts the TTL, and its holder, woken (or told the
// run is over), writes over its successor's write: 100 cycles hold some 20
// pauses.
func TestWithoutFenceUpdatesAreLost(t *testing.T) {
	t.Parallel()
	rep, err := stress.Run(context.Background(), stress.Options{
		Strategy: "set-nx-px", Store: nodes(t), Cycles: 100, Duration: 2 * time.Minute, PauseProb: 0.2,
		CrashProb: -1, NoFence: true, Seed: 4, HoldMax: 5 * time.Millisecond,
	})
	require.NoError(t, err)
	stresstest.Cycles(t, rep, 100)
	assert.Positive(t, rep.LostUpdates)
	assert.Zero(t, rep.FenceRefusals)
}

func TestBadOptions(t *testing.T) {
	t.Parallel()
	_, err := stress.Run(context.Background(), stress.Options{Strategy: "nope", Store: nodes(t)})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "set-nx-px", "the error lists valid names")
	_, err = stress.Run(context.Background(), stress.Options{Strategy: "set-nx-px"})
	require.ErrorIs(t, err, locklab.ErrInvalid)
}

// The CLI's spellings of the node faults a run injects, and nothing else.
func TestParseFaults(t *testing.T) {
	fs, err := stress.ParseFaults([]string{"pause", "restart", "restart-keep", "partition"})
	require.NoError(t, err)
	assert.Equal(t, redis.StressNodeFaults, fs)
	fs, err = stress.ParseFaults([]string{"failover"})
	require.NoError(t, err)
	assert.Equal(t, []fault.Fault{fault.Failover}, fs)
	for _, bad := range []string{"explode", "Pause"} {
		_, err := stress.ParseFaults([]string{"pause", bad})
		require.Error(t, err, bad)
		assert.Contains(t, err.Error(), `"`+bad+`"`)
		assert.Contains(t, err.Error(), "pause,restart,restart-keep,partition,failover", "the error lists the kinds")
	}
}
