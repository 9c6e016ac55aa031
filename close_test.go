package locklab_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/strategies"
)

// watched is set-nx-px's way to its watchdogs.
type watched interface {
	Watchdog(key string) *locklab.Watchdog
}

// TestCloseEndsWhatTheLockOpened: locklab.Close stops set-nx-px's
// watchdogs, so a lock they kept alive expires at its TTL, releases
// nothing, and leaves the caller's pool open.
//
// The test waits for what it checks (a renewal, an expiry), never for a
// fixed time to be enough: a machine that stalls past the TTL makes the
// watchdog lose the lock, which it must then say.
func TestCloseEndsWhatTheLockOpened(t *testing.T) {
	pool := locklab.NewPool(addr)
	defer pool.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	kept, err := strategies.New("set-nx-px", locklab.Config{Pool: pool, Watchdog: true})
	require.NoError(t, err)
	plain, err := strategies.New("set-nx-px", locklab.Config{Pool: pool})
	require.NoError(t, err)

	const ttl = time.Second
	held, err := kept.Acquire(ctx, "close:watched", ttl)
	require.NoError(t, err)
	dog := kept.(watched).Watchdog("close:watched")
	require.NotNil(t, dog, "Config.Watchdog starts a watchdog with each Acquire")

	// Wait until the first lease has run out and the watchdog has carried
	// the lock past it.
	for !time.Now().After(held.Until) || !dog.Lease().Until.After(held.Until) {
		select {
		case <-dog.Lost():
			t.Fatalf("the watchdog lost the lock before its first expiry: %v", dog.Err())
		case <-ctx.Done():
			t.Fatal("the watchdog never extended the lease")
		case <-time.After(20 * time.Millisecond):
		}
	}
	_, err = plain.Acquire(ctx, "close:watched", time.Minute)
	if err == nil {
		// Only a stall longer than the TTL between two renewals lets the
		// lock go; the watchdog must then tell the loss.
		select {
		case <-dog.Lost():
			t.Logf("the machine stalled past the TTL; the watchdog told the loss: %v", dog.Err())
		case <-ctx.Done():
			t.Fatal("the lock was taken while its watchdog ran, and the watchdog never told the loss")
		}
		return
	}
	require.ErrorIs(t, err, locklab.ErrNotAcquired, "the watchdog keeps the lock past its TTL")

	require.NoError(t, locklab.Close(kept))
	// A watchdog that Close left running would keep the lock until ctx
	// ends, and the Wait would fail.
	next, err := locklab.Wait(ctx, plain, "close:watched", time.Minute, locklab.RetryPolicy{Initial: 10 * time.Millisecond, Max: 50 * time.Millisecond})
	require.NoError(t, err, "once closed, nothing renews the lock: it expires")
	require.ErrorIs(t, kept.Release(ctx, held), locklab.ErrNotHeld, "Close released nothing: the lock expired")

	// The pool is the caller's: still open.
	require.NoError(t, plain.Release(ctx, next))
	require.NoError(t, locklab.Close(plain), "a Locker that opens nothing")
}
