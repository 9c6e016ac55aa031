package strategytest

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"
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
	// A typed nil pool is no connection source either: refused at New, not
	// a panic at the first Acquire.
	var nilPool *redis.Pool
	cfg := locklab.Config{Pool: nilPool}
	if s.props.MultiNode {
		cfg = s.newConfig()
		cfg.Nodes = append([]locklab.ConnSource{nilPool}, cfg.Nodes[1:]...)
	}
	_, err = strategies.New(s.name, cfg)
	require.ErrorIs(t, err, locklab.ErrInvalid, "a typed nil pool")
}

func (s *suite) ctxCancelled(t *testing.T) {
	l, cfg := s.locker(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	k := key(t)
	_, err := l.Acquire(ctx, k, longTTL)
	require.ErrorIs(t, err, context.Canceled)
	require.ErrorIs(t, err, locklab.ErrUnavailable, "a done context wraps a sentinel, like one that ends mid-call")
	n, _ := redis.Int64(do(t, firstNode(cfg), "EXISTS", k), nil)
	assert.Zero(t, n, "a cancelled acquire must not take the lock")
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

// deadPool is a pool whose server does not exist: a port nothing listens on.
func deadPool(t *testing.T) *redis.Pool {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	p := locklab.NewPool(addr)
	t.Cleanup(func() { p.Close() })
	return p
}

func (s *suite) unreachable(t *testing.T) {
	cfg := s.newConfig()
	if s.props.MultiNode {
		nodes := make([]locklab.ConnSource, len(cfg.Nodes))
		for i := range nodes {
			nodes[i] = deadPool(t)
		}
		cfg.Nodes = nodes
	} else {
		cfg.Pool = deadPool(t)
	}
	l, err := strategies.New(s.name, cfg)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err = l.Acquire(ctx, key(t), time.Second)
	require.ErrorIs(t, err, locklab.ErrUnavailable)
	assert.NotErrorIs(t, err, locklab.ErrNotAcquired)
	require.NoError(t, ctx.Err(), "an unreachable Redis must fail fast, not hang")
}
