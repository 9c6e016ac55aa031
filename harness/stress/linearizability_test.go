package stress_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/locklab/locklab/harness/stress"
	"github.com/locklab/locklab/harness/stress/stresstest"
)

// The checker catches what a broken lock does: set-nx-px-del, whose
// release deletes whoever's key is there, under pauses past the TTL and
// crashes, without the fence check, gives a history that no order of its
// critical sections explains. Each pause loses its successor's update:
// 300 cycles hold some 15 pauses (none at all: a chance of 2e-7). The
// check has a minute, for a loaded machine.
func TestLinearizabilityCatchesBrokenLock(t *testing.T) {
	t.Parallel()
	rep, err := stress.Run(context.Background(), stress.Options{
		Strategy: "set-nx-px-del", Store: nodes(t), Cycles: 300, Duration: 2 * time.Minute,
		NoFence: true, PauseProb: 0.05, Seed: 5, CheckTimeout: time.Minute,
	})
	require.NoError(t, err)
	stresstest.Cycles(t, rep, 300)
	require.NotNil(t, rep.Linearizability)
	lin := rep.Linearizability
	t.Logf("%d cycles, %d overlaps, %d lost updates; %+v", rep.Cycles, rep.Overlaps, rep.LostUpdates, *lin)
	require.Positive(t, rep.LostUpdates, "the run must have lost updates for the check to find")
	assert.Equal(t, stress.ModelRegister, lin.Model)
	assert.Equal(t, stress.NotLinearizable, lin.Result)
	assert.GreaterOrEqual(t, int64(lin.Operations), rep.Cycles)

	var html bytes.Buffer
	require.NoError(t, rep.Visualize(&html))
	assert.Contains(t, html.String(), "<html")
}

// A correct run is found linearizable: set-nx-px with the fence checked,
// crashes but no pause past the TTL. A crashed holder keeps everybody out
// for the TTL: the Duration is a deadline for the crashes of 1000 cycles
// on a loaded machine, and the check has a minute.
func TestLinearizabilityCorrectLock(t *testing.T) {
	t.Parallel()
	rep, err := stress.Run(context.Background(), stress.Options{
		Strategy: "set-nx-px", Store: nodes(t), Cycles: 1000, Duration: 2 * time.Minute,
		PauseProb: -1, TTL: 750 * time.Millisecond, Seed: 6, CheckTimeout: time.Minute,
	})
	require.NoError(t, err)
	stresstest.Cycles(t, rep, 1000)
	require.NotNil(t, rep.Linearizability)
	t.Logf("%d cycles, %d crashes; %+v", rep.Cycles, rep.Crashes, *rep.Linearizability)
	assert.Zero(t, rep.LostUpdates)
	assert.Equal(t, stress.ModelFencedRegister, rep.Linearizability.Model)
	assert.Equal(t, stress.Linearizable, rep.Linearizability.Result)
}

// With the fence checked, a lock that overlaps under pauses still gives a
// linearizable history: the fence refuses the stale holder's accesses.
// Each pause outlasts the TTL, so its holder is refused: 200 cycles hold
// some 20 pauses (as TestSetNXPXWithFencingPaused). The check has a
// minute, for a loaded machine.
func TestLinearizabilityFencedPauses(t *testing.T) {
	t.Parallel()
	rep, err := stress.Run(context.Background(), stress.Options{
		Strategy: "set-nx-px", Store: nodes(t), Cycles: 200, Duration: 2 * time.Minute, PauseProb: 0.1, CrashProb: -1, Seed: 3,
		CheckTimeout: time.Minute,
	})
	require.NoError(t, err)
	stresstest.Cycles(t, rep, 200)
	t.Logf("%d cycles, %d overlaps, %d fence refusals; %+v", rep.Cycles, rep.Overlaps, rep.FenceRefusals, *rep.Linearizability)
	require.Positive(t, rep.FenceRefusals)
	assert.Equal(t, stress.Linearizable, rep.Linearizability.Result)
}

// A check that cannot finish in time says so.
func TestLinearizabilityTimeout(t *testing.T) {
	t.Parallel()
	rep, err := stress.Run(context.Background(), stress.Options{
		Strategy: "set-nx-px", Store: nodes(t), Cycles: 200, Duration: 10 * time.Second,
		PauseProb: -1, CheckTimeout: time.Nanosecond, Seed: 7,
	})
	require.NoError(t, err)
	assert.Contains(t, []string{stress.Unknown, stress.Linearizable}, rep.Linearizability.Result)
	off, err := stress.Run(context.Background(), stress.Options{
		Strategy: "set-nx-px", Store: nodes(t), Cycles: 10, PauseProb: -1, CheckTimeout: -1,
	})
	require.NoError(t, err)
	assert.Nil(t, off.Linearizability)
}

// A history porcupine finds not linearizable is a violation of the run,
// whatever else was counted: --fail-on-violation exits 1 on it. A check
// that timed out is not one.
func TestViolatedCountsANonLinearizableHistory(t *testing.T) {
	r := &stress.Report{}
	assert.False(t, r.Violated())
	r.Linearizability = &stress.Linearizability{Result: stress.Unknown}
	assert.False(t, r.Violated(), "unknown")
	r.Linearizability.Result = stress.Linearizable
	assert.False(t, r.Violated(), "linearizable")
	r.Linearizability.Result = stress.NotLinearizable
	assert.True(t, r.Violated(), "not linearizable")
}
