package locklab_test

import (
	"context"
	"errors"
	"sync"
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

func notifyLock(t *testing.T) (locklab.Locker, *locklab.Notifier) {
	pool := locklab.NewPool(addr)
	t.Cleanup(func() { pool.Close() })
	l, err := strategies.New("set-nx-px", locklab.Config{Pool: pool, Notify: true})
	require.NoError(t, err)
	n := locklab.NewNotifier(pool)
	t.Cleanup(func() { n.Close() })
	return l, n
}

// slow is a policy whose only fallback is far away: a waiter that returns
// soon was woken by a notification or by the holder's TTL.
var slow = locklab.RetryPolicy{Initial: 10 * time.Second, Max: 10 * time.Second}

func TestNotifierWakesOnRelease(t *testing.T) {
	l, n := notifyLock(t)
	ctx := context.Background()
	held, err := l.Acquire(ctx, "notify:wake", time.Minute)
	require.NoError(t, err)
	time.AfterFunc(50*time.Millisecond, func() { l.Release(ctx, held) })

	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	lease, err := n.Wait(wctx, l, "notify:wake", time.Minute, slow)
	require.NoError(t, err, "the release must wake the waiter long before the 10s fallback")
	require.NoError(t, l.Release(ctx, lease))
}

func TestNotifierServesWaitersInOrder(t *testing.T) {
	l, n := notifyLock(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	const key = "notify:fifo"
	held, err := l.Acquire(ctx, key, time.Minute)
	require.NoError(t, err)

	var (
		mu    sync.Mutex
		order []int
		wg    sync.WaitGroup
	)
	for i := 1; i <= 3; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lease, err := n.Wait(ctx, l, key, time.Minute, slow)
			if !assert.NoError(t, err) {
				return
			}
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
			assert.NoError(t, n.Release(ctx, l, lease))
		}()
		time.Sleep(30 * time.Millisecond) // queue them in turn
	}
	require.NoError(t, n.Release(ctx, l, held))
	wg.Wait()
	assert.Equal(t, []int{1, 2, 3}, order, "waiters are served first come, first served")
}

func TestNotifierFallsBackOnTTL(t *testing.T) {
	l, n := notifyLock(t)
	ctx := context.Background()
	_, err := l.Acquire(ctx, "notify:crashed", 200*time.Millisecond) // never released
	require.NoError(t, err)
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	lease, err := n.Wait(wctx, l, "notify:crashed", time.Minute, slow)
	require.NoError(t, err, "a crashed holder publishes nothing: the waiter must retry when its TTL runs out")
	l.Release(ctx, lease)
}

func TestNotifierStopsWithContext(t *testing.T) {
	l, n := notifyLock(t)
	ctx := context.Background()
	held, err := l.Acquire(ctx, "notify:ctx", time.Minute)
	require.NoError(t, err)
	defer l.Release(ctx, held)
	wctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	_, err = n.Wait(wctx, l, "notify:ctx", time.Minute, slow)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.ErrorIs(t, err, locklab.ErrNotAcquired)
	var he *locklab.HeldError
	require.True(t, errors.As(err, &he), "set-nx-px refusals say how long the holder has left")
	assert.Greater(t, he.Remaining, 50*time.Second)
}

func TestNotifierHandsOver(t *testing.T) {
	l, n := notifyLock(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	const key = "notify:handoff"
	held, err := l.Acquire(ctx, key, time.Minute)
	require.NoError(t, err)

	got := make(chan locklab.Lease, 1)
	go func() {
		lease, err := n.Wait(ctx, l, key, 30*time.Second, slow)
		assert.NoError(t, err)
		got <- lease
	}()
	time.Sleep(50 * time.Millisecond) // let it queue
	require.NoError(t, n.Release(ctx, l, held))
	lease := <-got
	assert.Equal(t, held.Fence+1, lease.Fence, "the successor's fence is the next one")
	assert.NotEqual(t, held.Token, lease.Token)

	// The key now holds the successor's token: the old lease is gone and
	// the new one releases.
	require.ErrorIs(t, l.Release(ctx, held), locklab.ErrNotHeld)
	require.NoError(t, n.Release(ctx, l, lease), "no waiter: a plain release")
	again, err := l.Acquire(ctx, key, time.Second)
	require.NoError(t, err, "the key is free")
	l.Release(ctx, again)
}

func TestNotifierHandoffOfALostLease(t *testing.T) {
	l, n := notifyLock(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const key = "notify:lost"
	stale, err := l.Acquire(ctx, key, 100*time.Millisecond)
	require.NoError(t, err)
	time.Sleep(150 * time.Millisecond)
	// Long enough that the other client still holds when the test tries
	// the key below, on a loaded machine too.
	other, err := l.Acquire(ctx, key, time.Second)
	require.NoError(t, err)

	got := make(chan error, 1)
	go func() {
		lease, err := n.Wait(ctx, l, key, time.Second, slow)
		if err == nil {
			l.Release(ctx, lease)
		}
		got <- err
	}()
	time.Sleep(50 * time.Millisecond)
	require.ErrorIs(t, n.Release(ctx, l, stale), locklab.ErrNotHeld, "a lost lease cannot be handed over")
	_, err = l.Acquire(ctx, key, time.Second)
	require.ErrorIs(t, err, locklab.ErrNotAcquired, "the other client's lock is untouched")
	require.NoError(t, <-got, "the waiter gets the lock when the other client's TTL runs out")
	_ = other
}

// ownNotifier is a set-nx-px lock with notifications and a Notifier, on a
// redis-server of the test's own, which the test may pause or restart.
func ownNotifier(t *testing.T) (*redistest.Server, locklab.Locker, *locklab.Notifier) {
	srv := redistest.StartOne(t)
	l, err := strategies.New("set-nx-px", locklab.Config{Pool: srv.Pool, Notify: true})
	require.NoError(t, err)
	n := locklab.NewNotifier(srv.Pool)
	t.Cleanup(func() { n.Close() })
	return srv, l, n
}

// subscribed waits until the server counts one pattern subscription: the
// Notifier's.
func subscribed(t *testing.T, srv *redistest.Server, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		c := srv.Pool.Get()
		n, err := redis.Int(c.Do("PUBSUB", "NUMPAT"))
		c.Close()
		if err == nil && n == 1 {
			return
		}
		require.True(t, time.Now().Before(deadline), "the Notifier did not subscribe again within %v (NUMPAT %d, %v)", within, n, err)
		time.Sleep(10 * time.Millisecond)
	}
}

// wakeLatency measures how long a waiter takes to get key after its holder
// releases it: a notification takes about a millisecond, the fallback
// (policy slow) ten seconds.
func wakeLatency(t *testing.T, l locklab.Locker, n *locklab.Notifier, key string) time.Duration {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	held, err := l.Acquire(ctx, key, time.Minute)
	require.NoError(t, err)
	got := make(chan time.Time, 1)
	go func() {
		lease, err := n.Wait(ctx, l, key, time.Minute, slow)
		woken := time.Now()
		if assert.NoError(t, err) {
			assert.NoError(t, l.Release(ctx, lease)) // free for the next measure
		}
		got <- woken
	}()
	time.Sleep(50 * time.Millisecond) // let it queue
	released := time.Now()
	require.NoError(t, l.Release(ctx, held))
	return (<-got).Sub(released)
}

func TestNotifierCloseWhileServerPaused(t *testing.T) {
	srv, l, n := ownNotifier(t)
	wakeLatency(t, l, n, "notify:paused") // subscribed and used
	require.NoError(t, srv.Signal(syscall.SIGSTOP))
	defer srv.Signal(syscall.SIGCONT)
	closed := make(chan struct{})
	began := time.Now()
	go func() { n.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("Close hangs while the server is paused")
	}
	assert.Less(t, time.Since(began), 2*time.Second, "Close returns promptly")
}

func TestNotifierResubscribes(t *testing.T) {
	srv, l, n := ownNotifier(t)
	before := wakeLatency(t, l, n, "notify:resub")
	t.Logf("wake-up before: %v", before)

	// The pub/sub client is killed...
	subscribed(t, srv, time.Second)
	srv.Do(t, "CLIENT", "KILL", "TYPE", "pubsub")
	subscribed(t, srv, 10*time.Second)
	afterKill := wakeLatency(t, l, n, "notify:resub")

	// ... and the server restarts.
	require.NoError(t, srv.Restart())
	subscribed(t, srv, 10*time.Second)
	afterRestart := wakeLatency(t, l, n, "notify:resub")
	t.Logf("wake-up after CLIENT KILL: %v, after a restart: %v", afterKill, afterRestart)
	// The fallback would take 10s (slow); a notification takes about a
	// millisecond, plus whatever the machine's load adds: the bound leaves
	// a loaded machine room, and still tells a notification from the
	// fallback.
	assert.Less(t, afterKill, 5*time.Second, "woken by a notification after CLIENT KILL")
	assert.Less(t, afterRestart, 5*time.Second, "woken by a notification after a restart")
}
