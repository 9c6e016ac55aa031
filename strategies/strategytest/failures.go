package strategytest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/strategies"
)

func (s *suite) badInput(t *testing.T) {
	ctx := context.Background()
	l, _ := s.locker(t)
	_, err := l.Acquire(ctx, "", time.Second)
	require.ErrorIs(t, err, locklab.ErrInvalid, "empty key")
	for _, ttl := range []time.Duration{0, -time.Second, time.Microsecond} {
		_, err = l.Acquire(ctx, key(t), ttl)
		require.ErrorIs(t, err, locklab.ErrInvalid, "ttl %v", ttl)
	}
	_, err = strategies.New(s.name, locklab.Config{})
	require.ErrorIs(t, err, locklab.ErrInvalid, "a Config without connection source")
	assert.Contains(t, err.Error(), s.name)
	_, err = strategies.New(s.name, s.store.NilClient(t))
	require.ErrorIs(t, err, locklab.ErrInvalid, "a typed nil client")
}

func (s *suite) ctxCancelled(t *testing.T) {
	l, cfg := s.locker(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	k := key(t)
	_, err := l.Acquire(ctx, k, longTTL)
	require.ErrorIs(t, err, context.Canceled)
	require.ErrorIs(t, err, locklab.ErrUnavailable, "a done context wraps a sentinel, like one that ends mid-call")
	assert.False(t, s.store.Holds(t, cfg, k), "a cancelled acquire must not take the lock")
	expired, cancelExpired := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancelExpired()
	_, err = l.Acquire(expired, k, longTTL)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.ErrorIs(t, err, locklab.ErrUnavailable)

	// Wait gives up when its context ends, and says why.
	holder, _ := s.locker(t)
	lease, err := holder.Acquire(context.Background(), k, longTTL)
	require.NoError(t, err)
	defer holder.Release(context.Background(), lease)
	err = holder.Release(ctx, lease)
	require.ErrorIs(t, err, context.Canceled)
	require.ErrorIs(t, err, locklab.ErrUnavailable, "a release with a done context")
	if ext, ok := holder.(locklab.Extender); ok {
		_, err = ext.Extend(expired, lease, longTTL)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.ErrorIs(t, err, locklab.ErrUnavailable, "an extend with an expired context")
	}
	wctx, wcancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
	defer wcancel()
	_, err = locklab.Wait(wctx, l, k, longTTL, locklab.RetryPolicy{Initial: time.Millisecond})
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.ErrorIs(t, err, locklab.ErrNotAcquired)
}

func (s *suite) unreachable(t *testing.T) {
	l, err := strategies.New(s.name, s.store.Unreachable(t))
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err = l.Acquire(ctx, key(t), time.Second)
	require.ErrorIs(t, err, locklab.ErrUnavailable)
	assert.NotErrorIs(t, err, locklab.ErrNotAcquired)
	require.NoError(t, ctx.Err(), "an unreachable store must fail fast, not hang")
}
