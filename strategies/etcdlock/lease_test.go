package etcdlock_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/strategies/etcdlock"
)

// TestLeaseExpires: without keepalive the lock frees itself at its TTL,
// not before; the holder's late release is refused and leaves the new
// holder's lock in place; fences grow.
func TestLeaseExpires(t *testing.T) {
	t.Parallel()
	ctx, cli := testCtx(t), sharedClient(t)
	a := newLock(t, cli, etcdlock.Options{})
	b := newLock(t, cli, etcdlock.Options{})
	k := key(t)

	began := time.Now()
	first, err := a.Acquire(ctx, k, time.Second)
	require.NoError(t, err)
	second, err := acquireEventually(ctx, b, k, time.Minute)
	require.NoError(t, err, "the lock frees itself")
	assert.GreaterOrEqual(t, time.Since(began), time.Second, "not before the TTL")
	assert.Greater(t, second.Fence, first.Fence)

	require.ErrorIs(t, a.Release(ctx, first), locklab.ErrNotHeld, "the lost lease")
	_, err = a.Extend(ctx, first, time.Second)
	require.ErrorIs(t, err, locklab.ErrNotHeld, "a lost lease is not extended")
	assert.Equal(t, []string{second.Token}, holders(t, cli, k), "the successor's key stays")
	_, err = a.Acquire(ctx, k, time.Minute)
	require.ErrorIs(t, err, locklab.ErrNotAcquired, "the successor still holds")
	require.NoError(t, b.Release(ctx, second))
}

// TestKeepAlive: with keepalive the lock outlives its TTL while the
// holder's process runs; once the keepalive stops (Close, as the process
// dying) it expires, and the holder's release is refused.
func TestKeepAlive(t *testing.T) {
	t.Parallel()
	ctx, cli := testCtx(t), sharedClient(t)
	a, err := etcdlock.New(cli, etcdlock.Options{KeepAlive: true})
	require.NoError(t, err)
	b := newLock(t, cli, etcdlock.Options{})
	k := key(t)

	held, err := a.Acquire(ctx, k, time.Second)
	require.NoError(t, err)
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		_, err := b.Acquire(ctx, k, time.Minute)
		require.ErrorIs(t, err, locklab.ErrNotAcquired, "kept alive past its 1s TTL")
	}
	require.NoError(t, a.Close())
	next, err := acquireEventually(ctx, b, k, time.Minute)
	require.NoError(t, err, "expires once nobody renews it")
	require.ErrorIs(t, a.Release(ctx, held), locklab.ErrNotHeld)
	require.NoError(t, b.Release(ctx, next))

	// Release stops the keepalive and revokes the lease.
	held, err = a.Acquire(ctx, k, time.Second)
	require.NoError(t, err)
	id := leaseOf(t, cli, held)
	require.NoError(t, a.Release(ctx, held))
	ttl, err := cli.TimeToLive(ctx, id)
	require.NoError(t, err)
	assert.EqualValues(t, -1, ttl.TTL)
}

// TestExtend: Extend keeps a lock past its TTL, and its Until never passes
// the TTL the lease was granted with.
func TestExtend(t *testing.T) {
	t.Parallel()
	ctx, cli := testCtx(t), sharedClient(t)
	clk := newClock()
	a := newLock(t, cli, etcdlock.Options{Clock: clk})
	b := newLock(t, cli, etcdlock.Options{})
	k := key(t)

	lease, err := a.Acquire(ctx, k, 2*time.Second)
	require.NoError(t, err)
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); time.Sleep(250 * time.Millisecond) {
		lease, err = a.Extend(ctx, lease, 2*time.Second)
		require.NoError(t, err)
		_, err = b.Acquire(ctx, k, time.Minute)
		require.ErrorIs(t, err, locklab.ErrNotAcquired, "extended past its 2s TTL")
	}
	assert.Equal(t, clk.Now().Add(2*time.Second), lease.Until)
	longer, err := a.Extend(ctx, lease, time.Hour)
	require.NoError(t, err)
	assert.Equal(t, clk.Now().Add(2*time.Second), longer.Until, "etcd renews to the granted TTL")
	assert.Equal(t, lease.Fence, longer.Fence)
	require.NoError(t, a.Release(ctx, longer))
	_, err = a.Extend(ctx, longer, 2*time.Second)
	require.ErrorIs(t, err, locklab.ErrNotHeld, "released: nothing to extend")
}

// TestExtendUntilIsTheRealDeadline: locklab.Extend asking more than the
// lease's TTL gives that TTL, without an error, and the returned Until is
// the lease's expiry as the server keeps it, not the time of the call plus
// the ttl asked for.
func TestExtendUntilIsTheRealDeadline(t *testing.T) {
	t.Parallel()
	ctx, cli := testCtx(t), sharedClient(t)
	l := newLock(t, cli, etcdlock.Options{})
	k := key(t)

	lease, err := l.Acquire(ctx, k, 3*time.Second)
	require.NoError(t, err)
	called := time.Now()
	lease, err = locklab.Extend(ctx, l, lease, 10*time.Second)
	require.NoError(t, err, "capped, not refused")
	returned := time.Now()
	assert.WithinRange(t, lease.Until, called.Add(3*time.Second), returned.Add(3*time.Second), "the lease's 3s, not the 10s asked")

	// The server's own deadline: TimeToLive gives the remaining whole
	// seconds, rounded down, so the expiry lies within a second after
	// asked + TTL.
	asked := time.Now()
	ttl, err := cli.TimeToLive(ctx, leaseOf(t, cli, lease))
	require.NoError(t, err)
	answered := time.Now()
	require.EqualValues(t, 3, ttl.GrantedTTL)
	latest := answered.Add(time.Duration(ttl.TTL+1) * time.Second)
	earliest := asked.Add(time.Duration(ttl.TTL) * time.Second)
	assert.False(t, lease.Until.After(latest), "Until %v is past the server's deadline (by %v at the latest)", lease.Until, latest)
	assert.False(t, lease.Until.Before(earliest.Add(-time.Second)), "Until %v is a second or more before the server's deadline (%v at the earliest)", lease.Until, earliest)
	require.NoError(t, l.Release(ctx, lease))
}
