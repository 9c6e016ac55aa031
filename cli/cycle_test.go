package cli

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/locklab/locklab"
)

// slowLocker refuses its first acquires, as a lock does that gives up
// waiting for its own request on a loaded machine, then grants; it
// records the keys it was asked for.
type slowLocker struct {
	refusals int
	keys     []string
}

func (l *slowLocker) Acquire(_ context.Context, key string, ttl time.Duration) (locklab.Lease, error) {
	l.keys = append(l.keys, key)
	if len(l.keys) <= l.refusals {
		return locklab.Lease{}, locklab.ErrNotAcquired
	}
	return locklab.Lease{Key: key, Token: "t", Until: time.Now().Add(ttl)}, nil
}

func (l *slowLocker) Release(context.Context, locklab.Lease) error { return nil }

// TestCycleRetryRefused: an uncontended cycle refused is tried again on a
// key of its own and counted, not a failed measurement; an error that is
// neither a refusal nor unavailability fails at once.
func TestCycleRetryRefused(t *testing.T) {
	l := &slowLocker{refusals: 2}
	n := 0
	require.NoError(t, cycleRetry(context.Background(), l, "k", &n))
	assert.Equal(t, 2, n, "tries again")
	assert.Equal(t, []string{"k", "k#1", "k#2"}, l.keys)

	n = 0
	err := cycleRetry(context.Background(), errLocker{locklab.ErrInvalid}, "k", &n)
	assert.ErrorIs(t, err, locklab.ErrInvalid)
	assert.Zero(t, n)
}

// errLocker fails every acquire with err.
type errLocker struct{ err error }

func (l errLocker) Acquire(context.Context, string, time.Duration) (locklab.Lease, error) {
	return locklab.Lease{}, l.err
}

func (l errLocker) Release(context.Context, locklab.Lease) error { return nil }

// leftLocker holds keys as a Redis server does: an acquire of a key held
// is refused. The acquires numbered in failAt (from 1) fail unavailable
// and leave their key held, as a Redlock round does whose late nodes set
// the key after its release gave up on them. Every call is a command.
type leftLocker struct {
	failAt   map[int]bool
	held     map[string]bool
	keys     []string
	commands int64
}

func (l *leftLocker) Acquire(_ context.Context, key string, ttl time.Duration) (locklab.Lease, error) {
	l.commands++
	l.keys = append(l.keys, key)
	switch {
	case l.held[key]:
		return locklab.Lease{}, locklab.ErrNotAcquired
	case l.failAt[len(l.keys)]:
		l.held[key] = true
		return locklab.Lease{}, locklab.ErrUnavailable
	}
	l.held[key] = true
	return locklab.Lease{Key: key, Token: "t", Until: time.Now().Add(ttl)}, nil
}

func (l *leftLocker) Release(_ context.Context, lease locklab.Lease) error {
	l.commands++
	delete(l.held, lease.Key)
	return nil
}

// TestCountedCycleKeyOfItsOwn: the counted cycle runs on the key the
// cycles moved to, never on one a failed attempt left held, whether the
// attempt was the first cycle's (which loads the scripts) or the counted
// cycle's own.
func TestCountedCycleKeyOfItsOwn(t *testing.T) {
	for _, c := range []struct {
		failAt int
		keys   []string
	}{
		{1, []string{"k", "k#1", "k#1"}},
		{2, []string{"k", "k", "k#1"}},
	} {
		l := &leftLocker{failAt: map[int]bool{c.failAt: true}, held: map[string]bool{}}
		n := 0
		got, err := countedCycle(context.Background(), l, "k", &n, func() int64 { return l.commands })
		require.NoError(t, err, "failed attempt %d", c.failAt)
		assert.Equal(t, c.keys, l.keys, "failed attempt %d", c.failAt)
		assert.Equal(t, 1, n, "the try again counted")
		assert.Equal(t, 2.0, got, "one acquire and one release")
		assert.Equal(t, "k#1", cycleKey("k", n), "the cycles after go on on the key they moved to")
	}
}
