package stress_test

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/harness/stress"
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
