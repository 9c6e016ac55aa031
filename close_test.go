package locklab_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/strategies"
)

// TestCloseEndsWhatTheLockOpened: locklab.Close stops set-nx-px's
// watchdogs, so a lock they kept alive expires at its TTL, releases
// nothing, and leaves the caller's pool open.
func TestCloseEndsWhatTheLockOpened(t *testing.T) {
	pool := locklab.NewPool(addr)
	defer pool.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	kept, err := strategies.New("set-nx-px", locklab.Config{Pool: pool, Watchdog: true})
	require.NoError(t, err)
	plain, err := strategies.New("set-nx-px", locklab.Config{Pool: pool})
	require.NoError(t, err)

	held, err := kept.Acquire(ctx, "close:watched", 300*time.Millisecond)
	require.NoError(t, err)
	time.Sleep(600 * time.Millisecond)
	_, err = plain.Acquire(ctx, "close:watched", time.Minute)
	require.ErrorIs(t, err, locklab.ErrNotAcquired, "the watchdog keeps the lock past its TTL")

	require.NoError(t, locklab.Close(kept))
	began := time.Now()
	next, err := locklab.Wait(ctx, plain, "close:watched", time.Minute, locklab.RetryPolicy{Initial: 10 * time.Millisecond, Max: 50 * time.Millisecond})
	require.NoError(t, err, "once closed, nothing renews the lock: it expires")
	// About its 300ms TTL; the bound leaves a loaded machine room, and a
	// watchdog that Close left running would keep the lock until ctx ends
	// (30s), past it.
	assert.Less(t, time.Since(began), 10*time.Second, "within about its TTL")
	require.ErrorIs(t, kept.Release(ctx, held), locklab.ErrNotHeld, "Close released nothing: the lock expired")

	// The pool is the caller's: still open.
	require.NoError(t, plain.Release(ctx, next))
	require.NoError(t, locklab.Close(plain), "a Locker that opens nothing")
}
