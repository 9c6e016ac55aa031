package locklab_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/locklab/locklab"
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
	w, err := locklab.Watch(ctx, l.(locklab.Extender), lease, ttl, 100*time.Millisecond)
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
	w, err := locklab.Watch(ctx, l.(locklab.Extender), lease, time.Second, 0)
	require.NoError(t, err)
	require.NoError(t, l.Release(ctx, w.Stop()))
	w.Stop() // twice is fine

	_, err = locklab.Watch(ctx, l.(locklab.Extender), lease, time.Second, 2*time.Second)
	require.True(t, errors.Is(err, locklab.ErrInvalid), "interval longer than the TTL")
	_, err = locklab.Watch(ctx, nil, lease, time.Second, 0)
	require.ErrorIs(t, err, locklab.ErrInvalid)
}
