package reentrant_test

import (
	"context"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/internal/tooling/redistest"
	"github.com/locklab/locklab/strategies"
	"github.com/locklab/locklab/strategies/reentrant"
)

// The same owner enters twice and leaves twice: the key holds its field
// with count 2, then 1, and is gone (with the release published) only after
// the second Release. Another holder is refused all along.
func TestReentry(t *testing.T) {
	srv := redistest.StartOne(t)
	ctx := reentrant.WithOwner(context.Background(), "worker-1")
	l, err := reentrant.New(locklab.Config{Pool: srv.Pool, NoWatchdog: true})
	require.NoError(t, err)
	other, err := l.Holder()
	require.NoError(t, err)
	require.NotEqual(t, l.ID(), other.ID())
	const k = "reentry"
	count := func() int64 {
		n, err := redis.Int64(srv.Do(t, "HGET", k, l.ID()+":worker-1"), nil)
		if err == redis.ErrNil {
			return 0
		}
		require.NoError(t, err)
		return n
	}

	sub := srv.Pool.Get()
	defer sub.Close()
	psc := redis.PubSubConn{Conn: sub}
	require.NoError(t, psc.Subscribe(locklab.ReleaseChannelPrefix+k))
	_, ok := psc.Receive().(redis.Subscription)
	require.True(t, ok)

	first, err := l.Acquire(ctx, k, time.Minute)
	require.NoError(t, err)
	assert.Equal(t, l.ID()+":worker-1", first.Token, "the field is the holder's id and the owner")
	second, err := l.Acquire(ctx, k, time.Minute)
	require.NoError(t, err, "the holder enters again")
	assert.EqualValues(t, 2, count())
	_, err = other.Acquire(ctx, k, time.Minute)
	var held *locklab.HeldError
	require.ErrorAs(t, err, &held)
	assert.Greater(t, held.Remaining, time.Duration(0), "the refusal tells the remaining TTL")

	require.NoError(t, l.Release(ctx, second))
	assert.EqualValues(t, 1, count(), "one exit leaves one entry")
	_, err = other.Acquire(ctx, k, time.Minute)
	require.ErrorIs(t, err, locklab.ErrNotAcquired, "still held after the first release")

	require.NoError(t, l.Release(ctx, first))
	n, err := redis.Int64(srv.Do(t, "EXISTS", k), nil)
	require.NoError(t, err)
	assert.Zero(t, n, "the key is gone after the last release")
	m, ok := psc.ReceiveWithTimeout(5 * time.Second).(redis.Message)
	require.True(t, ok, "the last release is published")
	assert.Equal(t, locklab.ReleaseChannelPrefix+k, m.Channel)

	require.ErrorIs(t, l.Release(ctx, first), locklab.ErrNotHeld, "a third release finds nothing")
	lease, err := other.Acquire(ctx, k, time.Minute)
	require.NoError(t, err, "free for another holder")
	require.ErrorIs(t, l.Release(ctx, first), locklab.ErrNotHeld, "another holder's lock is not ours to release")
	require.NoError(t, other.Release(ctx, lease))
}

// By default, as Redisson's, the lock outlives several TTLs while the
// holder runs, and expires once the holder is gone (Close).
func TestWatchdogKeepsLockWhileHolderLives(t *testing.T) {
	t.Parallel()
	srv := redistest.StartOne(t)
	ctx := reentrant.WithOwner(context.Background(), "main")
	lk, err := strategies.New("hash-reentrant", locklab.Config{Pool: srv.Pool})
	require.NoError(t, err)
	l := lk.(*reentrant.HashReentrant)
	other, err := l.Holder()
	require.NoError(t, err)
	// A TTL long enough that an extend (every TTL/3, within what is
	// left of the lease) is not late on a loaded machine under -race.
	const k, ttl = "watched", time.Second
	lease, err := l.Acquire(ctx, k, ttl)
	require.NoError(t, err)
	w := l.Watchdog(k)
	require.NotNil(t, w, "the first acquire starts a watchdog")
	_, err = l.Acquire(ctx, k, ttl)
	require.NoError(t, err)
	assert.Same(t, w, l.Watchdog(k), "a re-entry keeps the running watchdog")

	time.Sleep(3 * ttl)
	select {
	case <-w.Lost():
		t.Fatalf("watchdog lost the lock: %v", w.Err())
	default:
	}
	_, err = other.Acquire(ctx, k, ttl)
	require.ErrorIs(t, err, locklab.ErrNotAcquired, "the watchdog kept the lock past three TTLs")

	require.NoError(t, l.Release(ctx, lease))
	assert.Same(t, w, l.Watchdog(k), "one entry left: the watchdog goes on")
	require.NoError(t, l.Close())
	assert.Nil(t, l.Watchdog(k))
	// The holder is gone without its last release: the TTL frees the lock.
	wctx, cancel := context.WithTimeout(ctx, 20*ttl)
	defer cancel()
	got, err := locklab.Wait(wctx, other, k, ttl, locklab.RetryPolicy{Initial: 10 * time.Millisecond})
	require.NoError(t, err, "the lock expires once its watchdog stopped")
	require.NoError(t, other.Release(ctx, got))

	_, err = strategies.New("hash-reentrant", locklab.Config{Pool: srv.Pool, Watchdog: true})
	require.NoError(t, err, "Watchdog, the default, is accepted")
	_, err = strategies.New("hash-reentrant", locklab.Config{Pool: srv.Pool, Watchdog: true, NoWatchdog: true})
	require.ErrorIs(t, err, locklab.ErrInvalid, "both Watchdog and NoWatchdog")
}

// With Config.NoWatchdog (Redisson's lock(leaseTime)) no watchdog runs and
// the lock expires at its TTL under a holder that never releases.
func TestNoWatchdogExpiresAtTTL(t *testing.T) {
	srv := redistest.StartOne(t)
	ctx := context.Background()
	l, err := reentrant.New(locklab.Config{Pool: srv.Pool, NoWatchdog: true})
	require.NoError(t, err)
	other, err := l.Holder()
	require.NoError(t, err)
	const k, ttl = "leased", 200 * time.Millisecond
	_, err = l.Acquire(ctx, k, ttl)
	require.NoError(t, err)
	assert.Nil(t, l.Watchdog(k))
	wctx, cancel := context.WithTimeout(ctx, 20*ttl)
	defer cancel()
	got, err := locklab.Wait(wctx, other, k, ttl, locklab.RetryPolicy{Initial: 10 * time.Millisecond})
	require.NoError(t, err, "the lock expires at its TTL")
	require.NoError(t, other.Release(ctx, got))
}

// Re-entry is tied to the owner the context names, not to the Locker:
// two acquires on one Locker whose contexts name no owner exclude each
// other, as two Redisson threads do; the same owner re-enters; another
// owner is refused.
func TestReentryIsTheOwners(t *testing.T) {
	srv := redistest.StartOne(t)
	ctx := context.Background()
	l, err := reentrant.New(locklab.Config{Pool: srv.Pool, NoWatchdog: true})
	require.NoError(t, err)
	const k = "owned"
	first, err := l.Acquire(ctx, k, time.Minute)
	require.NoError(t, err)
	_, err = l.Acquire(ctx, k, time.Minute)
	require.ErrorIs(t, err, locklab.ErrNotAcquired, "no owner named: a second acquire on the same Locker is another owner")
	require.NoError(t, l.Release(ctx, first))

	a, b := reentrant.WithOwner(ctx, "a"), reentrant.WithOwner(ctx, "b")
	la, err := l.Acquire(a, k, time.Minute)
	require.NoError(t, err)
	_, err = l.Acquire(b, k, time.Minute)
	require.ErrorIs(t, err, locklab.ErrNotAcquired, "owner b is refused owner a's lock")
	la2, err := l.Acquire(a, k, time.Minute)
	require.NoError(t, err, "owner a re-enters")
	assert.Equal(t, la.Token, la2.Token)
	require.NoError(t, l.Release(ctx, la2))
	require.NoError(t, l.Release(ctx, la))
	n, err := redis.Int64(srv.Do(t, "EXISTS", k), nil)
	require.NoError(t, err)
	assert.Zero(t, n)
}

// A partial release (entries remain) resets the TTL to the holder's lease,
// as Redisson's unlock does; the last release deletes the key.
func TestPartialReleaseRenewsTTL(t *testing.T) {
	srv := redistest.StartOne(t)
	ctx := reentrant.WithOwner(context.Background(), "renew")
	l, err := reentrant.New(locklab.Config{Pool: srv.Pool, NoWatchdog: true})
	require.NoError(t, err)
	const k = "renewed"
	outer, err := l.Acquire(ctx, k, time.Minute)
	require.NoError(t, err)
	inner, err := l.Acquire(ctx, k, time.Minute)
	require.NoError(t, err)
	srv.Do(t, "PEXPIRE", k, 1000) // as if most of the lease had passed
	require.NoError(t, l.Release(ctx, inner))
	pttl, err := redis.Int64(srv.Do(t, "PTTL", k), nil)
	require.NoError(t, err)
	assert.Greater(t, pttl, int64(50_000), "the partial release renewed the TTL to the one-minute lease")
	require.NoError(t, l.Release(ctx, outer))
}

// A Notifier's waiter wakes at the last release.
func TestNotifierWakesOnLastRelease(t *testing.T) {
	srv := redistest.StartOne(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l, err := reentrant.New(locklab.Config{Pool: srv.Pool})
	require.NoError(t, err)
	other, err := l.Holder()
	require.NoError(t, err)
	n := locklab.NewNotifier(srv.Pool)
	defer n.Close()
	const k = "notified"
	lease, err := l.Acquire(ctx, k, time.Minute)
	require.NoError(t, err)
	got := make(chan error, 1)
	go func() {
		lease, err := n.Wait(ctx, other, k, time.Minute, locklab.RetryPolicy{Initial: time.Minute, Max: time.Minute})
		if err == nil {
			err = other.Release(ctx, lease)
		}
		got <- err
	}()
	time.Sleep(50 * time.Millisecond) // let the waiter try once and block
	require.NoError(t, l.Release(ctx, lease))
	require.NoError(t, <-got, "the waiter got the lock well before its one-minute poll")
}
