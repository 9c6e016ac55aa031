package locklab_test

import (
	"bytes"
	"context"
	"errors"
	"math"
	"math/rand"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/internal/tooling/redistest"
	"github.com/locklab/locklab/lockkit"
	"github.com/locklab/locklab/strategies"
)

// scripted is a Locker whose attempts fail with the given errors, in order,
// and then succeed. It tests Wait's control flow; it stands for no Redis.
type scripted struct {
	errs  []error
	calls atomic.Int32
}

func (s *scripted) Acquire(ctx context.Context, key string, ttl time.Duration) (locklab.Lease, error) {
	n := int(s.calls.Add(1)) - 1
	if n < len(s.errs) {
		return locklab.Lease{}, s.errs[n]
	}
	return locklab.Lease{Key: key, Token: "t"}, nil
}

func (s *scripted) Release(context.Context, locklab.Lease) error { return nil }

func TestWaitRetriesOnlyRefusals(t *testing.T) {
	ctx := context.Background()
	fast := locklab.RetryPolicy{Initial: time.Microsecond, Max: time.Microsecond}

	l := &scripted{errs: []error{locklab.ErrNotAcquired, locklab.ErrNotAcquired}}
	lease, err := locklab.Wait(ctx, l, "k", time.Second, fast)
	require.NoError(t, err)
	assert.Equal(t, "k", lease.Key)
	assert.EqualValues(t, 3, l.calls.Load())

	down := lockkit.Unavailable(errors.New("connection refused"))
	l = &scripted{errs: []error{locklab.ErrNotAcquired, down}}
	_, err = locklab.Wait(ctx, l, "k", time.Second, fast)
	require.ErrorIs(t, err, locklab.ErrUnavailable, "an unreachable Redis is not retried")
	assert.EqualValues(t, 2, l.calls.Load())

	l = &scripted{errs: []error{locklab.ErrNotAcquired, locklab.ErrNotAcquired, locklab.ErrNotAcquired}}
	fast.Attempts = 2
	_, err = locklab.Wait(ctx, l, "k", time.Second, fast)
	require.ErrorIs(t, err, locklab.ErrNotAcquired)
	assert.Contains(t, err.Error(), "after 2 attempts")
	assert.EqualValues(t, 2, l.calls.Load())
}

func TestWaitStopsWithContext(t *testing.T) {
	refusals := make([]error, 1<<20)
	for i := range refusals {
		refusals[i] = locklab.ErrNotAcquired
	}
	ctx, cancel := context.WithCancel(context.Background())
	l := &scripted{errs: refusals}
	// Cancelled once an attempt was refused, whenever that is on a loaded
	// machine: the error carries the context's end and the last refusal.
	go func() {
		for l.calls.Load() < 1 {
			time.Sleep(time.Millisecond)
		}
		cancel()
	}()
	_, err := locklab.Wait(ctx, l, "k", time.Second, locklab.RetryPolicy{})
	require.ErrorIs(t, err, context.Canceled)
	require.ErrorIs(t, err, locklab.ErrNotAcquired)
}

func TestWaitBadInput(t *testing.T) {
	ctx := context.Background()
	_, err := locklab.Wait(ctx, nil, "k", time.Second, locklab.RetryPolicy{})
	require.ErrorIs(t, err, locklab.ErrInvalid)
	_, err = locklab.Wait(ctx, &scripted{}, "", time.Second, locklab.RetryPolicy{})
	require.ErrorIs(t, err, locklab.ErrInvalid)
	_, err = locklab.Wait(ctx, &scripted{}, "k", 0, locklab.RetryPolicy{})
	require.ErrorIs(t, err, locklab.ErrInvalid)
}

func TestRetryPolicyDelay(t *testing.T) {
	p := locklab.RetryPolicy{Initial: 10 * time.Millisecond, Max: 80 * time.Millisecond, Multiplier: 2, Jitter: 0.5}
	for n, max := range map[int]time.Duration{1: 10, 2: 20, 3: 40, 4: 80, 10: 80} {
		for i := 0; i < 100; i++ {
			d := p.Delay(n)
			assert.LessOrEqual(t, d, max*time.Millisecond, "attempt %d", n)
			assert.GreaterOrEqual(t, d, max*time.Millisecond/2, "attempt %d", n)
		}
	}
}

func TestTokensReplayFromSeed(t *testing.T) {
	a := locklab.Config{Rand: rand.New(rand.NewSource(7))}.Tokens()
	b := locklab.Config{Rand: rand.New(rand.NewSource(7))}.Tokens()
	for i := 0; i < 3; i++ {
		ta, err := a.Token()
		require.NoError(t, err)
		tb, _ := b.Token()
		assert.Equal(t, ta, tb)
		assert.Len(t, ta, 32)
	}
	c1, _ := locklab.Config{}.Tokens().Token()
	c2, _ := locklab.Config{}.Tokens().Token()
	assert.NotEqual(t, c1, c2)

	_, err := locklab.Config{Rand: bytes.NewReader(nil)}.Tokens().Token()
	require.Error(t, err, "an exhausted random source is an error, not a weak token")
}

func TestErrorsKeepTheirCause(t *testing.T) {
	err := lockkit.Unavailable(context.DeadlineExceeded)
	assert.ErrorIs(t, err, locklab.ErrUnavailable)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Same(t, err, lockkit.Unavailable(err), "wrapping twice adds nothing")
	assert.NoError(t, lockkit.Unavailable(nil))

	assert.ErrorIs(t, lockkit.CheckAcquire(context.Background(), "", time.Second), locklab.ErrInvalid)
	assert.ErrorIs(t, lockkit.CheckAcquire(context.Background(), "k", -1), locklab.ErrInvalid)
	assert.NoError(t, lockkit.CheckAcquire(context.Background(), "k", time.Second))
	assert.ErrorIs(t, lockkit.CheckLease(context.Background(), locklab.Lease{}), locklab.ErrInvalid)
}

// A NaN in the policy made every delay zero: Wait hammered a held lock
// thousands of times a second. It is refused before the first attempt.
func TestWaitRefusesNaNPolicy(t *testing.T) {
	pool := locklab.NewPool(addr)
	defer pool.Close()
	l, err := strategies.New("set-nx-px", locklab.Config{Pool: pool})
	require.NoError(t, err)
	ctx := context.Background()
	held, err := l.Acquire(ctx, "wait:nan", time.Minute)
	require.NoError(t, err)
	defer l.Release(ctx, held)
	for _, p := range []locklab.RetryPolicy{
		{Multiplier: math.NaN()},
		{Jitter: math.NaN()},
		{Initial: -time.Second},
	} {
		wctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		_, err := locklab.Wait(wctx, l, "wait:nan", time.Second, p)
		cancel()
		require.ErrorIs(t, err, locklab.ErrInvalid, "%+v", p)
		require.NotErrorIs(t, err, context.DeadlineExceeded, "refused before any attempt")
		n := locklab.NewNotifier(pool)
		_, err = n.Wait(ctx, l, "wait:nan", time.Second, p)
		n.Close()
		require.ErrorIs(t, err, locklab.ErrInvalid, "Notifier.Wait, %+v", p)
	}
}

// A pooled connection that the server closed while it sat idle is replaced
// on borrow, not handed to the caller to fail with.
func TestNewPoolChecksIdleConnections(t *testing.T) {
	srv := redistest.StartOne(t)
	pool := locklab.NewPool(srv.Addr)
	defer pool.Close()
	l, err := strategies.New("set-nx-px", locklab.Config{Pool: pool})
	require.NoError(t, err)
	ctx := context.Background()
	lease, err := l.Acquire(ctx, "pool:idle", time.Minute)
	require.NoError(t, err)
	require.Equal(t, 1, pool.Stats().IdleCount, "one connection waits in the pool")

	// The server drops every client but the one asking.
	c, err := redis.Dial("tcp", srv.Addr)
	require.NoError(t, err)
	_, err = c.Do("CLIENT", "KILL", "TYPE", "normal")
	c.Close()
	require.NoError(t, err)
	time.Sleep(locklab.PoolIdleCheck + 100*time.Millisecond)

	require.NoError(t, l.Release(ctx, lease), "the dead connection is replaced, not used")
}
