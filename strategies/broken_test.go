package strategies_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/gomodule/redigo/redis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/deploy"
	"github.com/locklab/locklab/strategies"
)

// A strategy says it is broken by design exactly when the recorded matrix
// (docs/matrix.md) shows it failing a scenario that set-nx-px, the sound
// single-node lock, passes: a race, a client's crash or a client's delay on
// one healthy server. Scenarios whose resource checks fence numbers are
// left aside: a lock without fences fails them whether or not it is
// broken, and that is Properties.Fencing's to say.
func TestBrokenByDesignIsWhatTheMatrixShows(t *testing.T) {
	m := deploy.Verdicts()
	require.NotEmpty(t, m.Cells)
	for _, name := range m.Strategies {
		d, err := strategies.Info(name)
		require.NoError(t, err)
		var fails []string
		for _, sc := range m.Scenarios {
			if strings.HasSuffix(sc, "-fenced") {
				continue
			}
			c, ok := m.Cell(name, sc)
			ref, refOK := m.Cell("set-nx-px", sc)
			if ok && c.Failed() && refOK && !ref.Failed() {
				fails = append(fails, sc+" "+c.Outcome)
			}
		}
		if d.BrokenByDesign != "" {
			assert.NotEmpty(t, fails, "%s says it is broken by design (%s), but fails nothing set-nx-px passes", name, d.BrokenByDesign)
		} else {
			assert.Empty(t, fails, "%s fails where set-nx-px holds, but does not say it is broken by design", name)
		}
	}
}

// An unknown name is bad input: ErrInvalid as well as ErrUnknown, and the
// message lists the valid names.
func TestUnknownNameIsInvalid(t *testing.T) {
	for _, f := range []func() error{
		func() error { _, err := strategies.New("nosuch", locklab.Config{}); return err },
		func() error { _, err := strategies.Info("nosuch"); return err },
		func() error { _, _, err := strategies.Lookup("nosuch"); return err },
	} {
		err := f()
		require.Error(t, err)
		assert.ErrorIs(t, err, locklab.ErrInvalid)
		assert.ErrorIs(t, err, strategies.ErrUnknown)
		assert.False(t, errors.Is(err, locklab.ErrUnavailable))
		assert.Contains(t, err.Error(), `unknown strategy "nosuch": valid names are `)
		assert.Contains(t, err.Error(), "set-nx-px")
	}
}

// A missing connection source is named once, with its type when it is a
// typed nil.
func TestNilPoolMessage(t *testing.T) {
	_, err := strategies.New("set-nx-px", locklab.Config{})
	require.ErrorIs(t, err, locklab.ErrInvalid)
	assert.Contains(t, err.Error(), "Config.Pool is nil: ")
	_, err = strategies.New("set-nx-px", locklab.Config{Pool: (*redis.Pool)(nil)})
	require.ErrorIs(t, err, locklab.ErrInvalid)
	assert.Contains(t, err.Error(), "Config.Pool is a nil *redis.Pool: ")
	_, err = strategies.New("redlock", locklab.Config{Nodes: []locklab.ConnSource{nil, nil, nil}})
	require.ErrorIs(t, err, locklab.ErrInvalid)
	assert.Contains(t, err.Error(), "Config.Nodes[0] is nil")
}
