package locklab_test

import (
	"context"
	"errors"
	"syscall"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/internal/tooling/redistest"
	"github.com/locklab/locklab/strategies"
)

func TestWatchdogKeepsTheLockAndReportsLoss(t *testing.T) {
	pool := locklab.NewPool(addr)
	defer pool.Close()
	l, err := strategies.New("set-nx-px", locklab.Config{Pool: pool})
	require.NoError(t, err)
	ctx := context.Background()
	const ttl = 600 * time.Millisecond
	lease, err := l.Acquire(ctx, "watchdog", ttl)
	require.NoError(t, err)
	w, err := locklab.Watch(ctx, l, lease, ttl, 100*time.Millisecond)
	require.NoError(t, err)

	time.Sleep(4 * ttl) // far past the first TTL
	_, err = l.Acquire(ctx, "watchdog", ttl)
	require.ErrorIs(t, err, locklab.ErrNotAcquired, "the watchdog must have kept the lock")
	assert.True(t, w.Lease().Until.After(lease.Until), "the lease was extended")
	assert.NoError(t, w.Err())

	// Someone deletes the key: the next extend finds it gone.
	c := pool.Get()
	_, err = c.Do("DEL", "watchdog")
	c.Close()
	require.NoError(t, err)
	select {
	case <-w.Lost():
	case <-time.After(2 * time.Second):
		t.Fatal("the loss was not reported")
	}
	require.ErrorIs(t, w.Err(), locklab.ErrNotHeld)
	last := w.Stop()
	require.ErrorIs(t, l.Release(ctx, last), locklab.ErrNotHeld)
}

func TestWatchdogStop(t *testing.T) {
	pool := locklab.NewPool(addr)
	defer pool.Close()
	l, _ := strategies.New("set-nx-px", locklab.Config{Pool: pool})
	ctx := context.Background()
	lease, err := l.Acquire(ctx, "watchdog:stop", time.Second)
	require.NoError(t, err)
	w, err := locklab.Watch(ctx, l, lease, time.Second, 0)
	require.NoError(t, err)
	require.NoError(t, l.Release(ctx, w.Stop()))
	w.Stop() // twice is fine

	_, err = locklab.Watch(ctx, l, lease, time.Second, 2*time.Second)
	require.True(t, errors.Is(err, locklab.ErrInvalid), "interval longer than the TTL")
	_, err = locklab.Watch(ctx, nil, lease, time.Second, 0)
	require.ErrorIs(t, err, locklab.ErrInvalid)
	// A lock with no safe extend has no watchdog either.
	blind, err := strategies.New("set-nx-px-del", locklab.Config{Pool: pool})
	require.NoError(t, err)
	_, err = locklab.Watch(ctx, blind, lease, time.Second, 0)
	require.ErrorIs(t, err, locklab.ErrInvalid)
	assert.Contains(t, err.Error(), "cannot extend")
}

// TestWatchdogReportsLossOnTimeWhileServerPaused stops the server past the
// lease's TTL: no extend can get through, and Lost must fire by the lease's
// expiry plus one interval, with NewPool's 2s timeouts and with a pool that
// has none.
func TestWatchdogReportsLossOnTimeWhileServerPaused(t *testing.T) {
	for _, name := range []string{"NewPool", "plain redis.Pool"} {
		t.Run(name, func(t *testing.T) {
			srv := redistest.StartOne(t)
			var pool *redis.Pool
			if name == "NewPool" {
				pool = locklab.NewPool(srv.Addr)
			} else {
				pool = &redis.Pool{Dial: func() (redis.Conn, error) { return redis.Dial("tcp", srv.Addr) }}
			}
			defer pool.Close()
			l, err := strategies.New("set-nx-px", locklab.Config{Pool: pool})
			require.NoError(t, err)
			ctx := context.Background()
			const ttl, every = 800 * time.Millisecond, 200 * time.Millisecond
			lease, err := l.Acquire(ctx, "watchdog:paused", ttl)
			require.NoError(t, err)
			w, err := locklab.Watch(ctx, l, lease, ttl, every)
			require.NoError(t, err)
			defer w.Stop()

			require.NoError(t, srv.Signal(syscall.SIGSTOP))
			resumed := false
			resume := func() {
				if !resumed {
					srv.Signal(syscall.SIGCONT)
					resumed = true
				}
			}
			defer resume()
			var lostAt time.Time
			select {
			case <-w.Lost():
				lostAt = time.Now()
			case <-time.After(5 * time.Second):
				resume()
				t.Fatal("the loss was not reported while the server was stopped")
			}
			until := w.Lease().Until
			late := lostAt.Sub(until)
			t.Logf("Lost fired %v after the lease's expiry", late)
			assert.GreaterOrEqual(t, late, time.Duration(0), "not before the lease ran out")
			// One interval, and up to a second more for a loaded
			// machine's scheduling: below the pool's 2s read timeout,
			// which a watchdog that waited on its extend would wait out.
			assert.LessOrEqual(t, late, every+time.Second, "Lost fires by the expiry plus one interval")
			require.ErrorIs(t, w.Err(), locklab.ErrNotHeld)
		})
	}
}

func TestWatchRefusesTinyTTL(t *testing.T) {
	pool := locklab.NewPool(addr)
	defer pool.Close()
	l, _ := strategies.New("set-nx-px", locklab.Config{Pool: pool})
	lease := locklab.Lease{Key: "watchdog:tiny", Token: "t", Until: time.Now().Add(time.Second)}
	for _, ttl := range []time.Duration{1, 2, 3, time.Millisecond - 1} {
		w, err := locklab.Watch(context.Background(), l, lease, ttl, 0)
		require.ErrorIs(t, err, locklab.ErrInvalid, "ttl %v", ttl)
		require.Nil(t, w)
	}
	_, err := l.Acquire(context.Background(), "watchdog:tiny", time.Millisecond-1)
	require.ErrorIs(t, err, locklab.ErrInvalid, "the same minimum as Acquire")
}

// A Locker whose Clock is skewed from the system's (an hour either way)
// still has its lease renewed: the watchdog judges Lease.Until on the
// clock Until was read from, not on time.Now.
func TestWatchdogSkewedClock(t *testing.T) {
	pool := locklab.NewPool(addr)
	defer pool.Close()
	for _, skew := range []time.Duration{-time.Hour, time.Hour} {
		t.Run(skew.String(), func(t *testing.T) {
			clock := locklab.ClockFunc(func() time.Time { return time.Now().Add(skew) })
			l, err := strategies.New("set-nx-px", locklab.Config{Pool: pool, Clock: clock})
			require.NoError(t, err)
			ctx := context.Background()
			const ttl = 600 * time.Millisecond
			k := "watchdog:skew:" + skew.String()
			lease, err := l.Acquire(ctx, k, ttl)
			require.NoError(t, err)
			w, err := locklab.Watch(ctx, l, lease, ttl, 100*time.Millisecond)
			require.NoError(t, err)
			time.Sleep(3 * ttl)
			require.NoError(t, w.Err(), "the lock is held and renewed")
			_, err = l.Acquire(ctx, k, ttl)
			require.ErrorIs(t, err, locklab.ErrNotAcquired, "the watchdog must have kept the lock")

			// Lost with the server's key: told within an interval or so,
			// not an hour late.
			c := pool.Get()
			_, err = c.Do("DEL", k)
			c.Close()
			require.NoError(t, err)
			select {
			case <-w.Lost():
			case <-time.After(2 * time.Second):
				t.Fatal("the loss was not reported")
			}
			require.ErrorIs(t, w.Err(), locklab.ErrNotHeld)
			w.Stop()
		})
	}
}
