package setnxex_test

import (
	"context"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/internal/tooling/redistest"
	"github.com/locklab/locklab/strategies/setnxex"
)

// A fence counter or a floor cannot be a lock, and a counter or floor that
// is not an integer makes acquires and handoffs fail without writing
// anything.
func TestSetNXPXFenceKeyCollision(t *testing.T) {
	srv := redistest.StartOne(t)
	l, err := setnxex.NewSetNXPX(locklab.Config{Pool: srv.Pool})
	require.NoError(t, err)
	ctx := context.Background()
	exists := func(k string) int64 {
		n, err := redis.Int64(srv.Do(t, "EXISTS", k), nil)
		require.NoError(t, err)
		return n
	}
	const key = "fence:other"
	counter, floor := setnxex.FenceKey(key), setnxex.FloorKey(key)

	for _, k := range []string{counter, floor, setnxex.FenceKey("{x}"), setnxex.FenceKey("a}b"), "{locklab:floor:1}:y"} {
		_, err = l.Acquire(ctx, k, time.Minute)
		require.ErrorIs(t, err, locklab.ErrInvalid, k)
		assert.Zero(t, exists(k), "nothing written at %s", k)
		_, err = l.Handoff(ctx, locklab.Lease{Key: k, Token: "t"}, time.Minute)
		require.ErrorIs(t, err, locklab.ErrInvalid, k)
	}
	for _, k := range []string{"fence", "x:locklab:fence", "{}:locklab:fence", "locklab:fences", "{locklab:floor}"} {
		lease, err := l.Acquire(ctx, k, time.Minute)
		require.NoError(t, err, "%s names no counter: a lock like any other", k)
		require.NoError(t, l.Release(ctx, lease))
	}

	lease, err := l.Acquire(ctx, key, time.Minute)
	require.NoError(t, err, "other keys still work")
	assert.EqualValues(t, 1, lease.Fence)
	require.NoError(t, l.Release(ctx, lease))

	// Someone else overwrites the counter, then the floor.
	for _, bad := range [][]any{
		{"HSET", counter, "f", "1"},
		{"SET", counter, "x"},
		{"SET", counter, "1.5"},
		{"SET", counter, "01"},
		{"SET", counter, "99999999999999999999"},
		{"SET", floor, "x"},
		{"LPUSH", floor, "1"},
	} {
		srv.Do(t, "DEL", counter, floor)
		srv.Do(t, bad[0].(string), bad[1:]...)
		_, err = l.Acquire(ctx, key, time.Minute)
		require.ErrorIs(t, err, locklab.ErrUnavailable, "%v", bad)
		assert.Contains(t, err.Error(), "not an integer")
		assert.Zero(t, exists(key), "a failed acquire leaves no lock behind (%v)", bad)
	}

	srv.Do(t, "DEL", counter, floor)
	lease, err = l.Acquire(ctx, key, time.Minute)
	require.NoError(t, err)
	srv.Do(t, "SET", counter, "x")
	_, err = l.Handoff(ctx, lease, time.Minute)
	require.ErrorIs(t, err, locklab.ErrUnavailable)
	v, err := redis.String(srv.Do(t, "GET", key), nil)
	require.NoError(t, err)
	assert.Equal(t, lease.Token, v, "a failed handoff changes nothing")
	srv.Do(t, "DEL", counter)
	srv.Do(t, "SET", floor, "x")
	_, err = l.Handoff(ctx, lease, time.Minute)
	require.ErrorIs(t, err, locklab.ErrUnavailable, "a missing counter reads the floor")
	v, err = redis.String(srv.Do(t, "GET", key), nil)
	require.NoError(t, err)
	assert.Equal(t, lease.Token, v, "a failed handoff changes nothing")
	assert.Zero(t, exists(counter))
}

// With Config.Watchdog, set-nx-px's lock outlives several TTLs while its
// holder runs; the release stops the watchdog, and a holder gone without
// releasing (Close) leaves the lock to expire. A stale lease's release does
// not stop the watchdog of the key's new lease.
func TestSetNXPXWatchdog(t *testing.T) {
	t.Parallel()
	srv := redistest.StartOne(t)
	ctx := context.Background()
	l, err := setnxex.NewSetNXPX(locklab.Config{Pool: srv.Pool, Watchdog: true})
	require.NoError(t, err)
	other, err := setnxex.NewSetNXPX(locklab.Config{Pool: srv.Pool})
	require.NoError(t, err)
	// A TTL long enough that an extend (every TTL/3, within what is
	// left of the lease) is not late on a loaded machine under -race.
	const k, ttl = "watched", time.Second
	lease, err := l.Acquire(ctx, k, ttl)
	require.NoError(t, err)
	w := l.Watchdog(k)
	require.NotNil(t, w, "the acquire starts a watchdog")
	time.Sleep(3 * ttl)
	select {
	case <-w.Lost():
		t.Fatalf("watchdog lost the lock: %v", w.Err())
	default:
	}
	_, err = other.Acquire(ctx, k, ttl)
	require.ErrorIs(t, err, locklab.ErrNotAcquired, "the watchdog kept the lock past three TTLs")
	require.NoError(t, l.Release(ctx, w.Lease()))
	assert.Nil(t, l.Watchdog(k), "the release stops the watchdog")

	again, err := l.Acquire(ctx, k, ttl)
	require.NoError(t, err)
	require.ErrorIs(t, l.Release(ctx, lease), locklab.ErrNotHeld, "the first lease is stale")
	require.NotNil(t, l.Watchdog(k), "a stale release leaves the new lease's watchdog")
	assert.Equal(t, again.Token, l.Watchdog(k).Lease().Token)
	require.NoError(t, l.Close())
	assert.Nil(t, l.Watchdog(k))
	wctx, cancel := context.WithTimeout(ctx, 20*ttl)
	defer cancel()
	got, err := locklab.Wait(wctx, other, k, ttl, locklab.RetryPolicy{Initial: 10 * time.Millisecond})
	require.NoError(t, err, "the lock expires once its watchdog stopped")
	require.NoError(t, other.Release(ctx, got))
}
