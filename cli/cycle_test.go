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
