package stress_test

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/harness/stress"
	"github.com/locklab/locklab/strategies"
)

// TestOptionsOutOfRange: a value out of its range is refused with
// ErrInvalid, naming the field, before any server is used (none is given
// here), never replaced by a default.
func TestOptionsOutOfRange(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		set  func(*stress.Options)
		want string
	}{
		{func(o *stress.Options) { o.Clients = -4 }, "Clients -4"},
		{func(o *stress.Options) { o.Cycles = -1 }, "Cycles -1"},
		{func(o *stress.Options) { o.Duration = -time.Second }, "Duration -1s"},
		{func(o *stress.Options) { o.TTL = -time.Second }, "TTL -1s"},
		{func(o *stress.Options) { o.TTL = 500 * time.Microsecond }, "TTL 500µs: want at least 1ms"},
		{func(o *stress.Options) { o.HoldMax = -1 }, "HoldMax -1ns"},
		{func(o *stress.Options) { o.PauseFor = -time.Millisecond }, "PauseFor -1ms"},
		{func(o *stress.Options) { o.Skew = -time.Second }, "Skew -1s"},
		{func(o *stress.Options) { o.Stuck = -time.Second }, "Stuck -1s"},
		{func(o *stress.Options) { o.FaultEvery = -time.Second }, "FaultEvery -1s"},
		{func(o *stress.Options) { o.FaultFor = -time.Second }, "FaultFor -1s"},
		{func(o *stress.Options) { o.PauseProb = 1.5 }, "PauseProb 1.5"},
		{func(o *stress.Options) { o.CrashProb = math.NaN() }, "CrashProb NaN"},
	} {
		o := stress.Options{Strategy: "set-nx-px"}
		c.set(&o)
		_, err := stress.Run(context.Background(), o)
		require.ErrorIs(t, err, locklab.ErrInvalid, c.want)
		assert.Contains(t, err.Error(), c.want)
	}
}

// Two locks of TestStoreOfFamily: one of a store outside locklab, which
// names its package, and one of one's own.
func init() {
	build := func(locklab.Config) (locklab.Locker, error) { return nil, errors.New("never built") }
	strategies.MustRegister(strategies.Description{Name: "stress-elsewhere", Family: "elsewhere",
		StorePackage: "example.com/elsewhere/store"}, build)
	strategies.MustRegister(strategies.Description{Name: "stress-own", Family: "stress-own"}, build)
}

// TestStoreOfFamily: a strategy finds its store by its family and nothing
// else. A family whose store is not registered is refused with the
// package to import, and a lock of one's own, whose family no store
// claims, locks on the servers given, which it cannot run without: no
// family falls back to the main store.
func TestStoreOfFamily(t *testing.T) {
	t.Parallel()
	_, err := stress.Run(context.Background(), stress.Options{Strategy: "stress-elsewhere", Store: nodes(t)})
	require.ErrorIs(t, err, locklab.ErrInvalid)
	assert.ErrorContains(t, err, `stress: strategy stress-elsewhere: the strategies of family "elsewhere" lock on a store that is not registered with stress mode: import _ "example.com/elsewhere/store"`)

	_, err = stress.Run(context.Background(), stress.Options{Strategy: "stress-own"})
	require.ErrorIs(t, err, locklab.ErrInvalid)
	assert.ErrorContains(t, err, "which no registered store claims) locks on the store whose servers Options.Store gives")

	_, err = stress.Run(context.Background(), stress.Options{Strategy: "set-nx-px"})
	require.ErrorIs(t, err, locklab.ErrInvalid)
	assert.ErrorContains(t, err, "stress: strategy set-nx-px locks on Redis: Options.Store is required",
		"Redis's families are its StoreDriver's")
}
