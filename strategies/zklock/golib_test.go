package zklock_test

import (
	"context"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/strategies/zklock"
)

func newGolib(t testing.TB, conn *zk.Conn, patience time.Duration) *zklock.GolibLock {
	t.Helper()
	l, err := zklock.NewGolib(conn, zklock.Options{Patience: patience})
	require.NoError(t, err)
	return l
}

// TestGolibAcquireRelease: zk.Lock's node, no fence and no extend; an
// Acquire refused after its patience leaves its node queued, and its
// goroutine unlocks it when its turn comes.
func TestGolibAcquireRelease(t *testing.T) {
	t.Parallel()
	ctx, addrs := testCtx(t), servers(t)
	clk := newClock()
	connA, _ := dial(t, addrs)
	connB, _ := dial(t, addrs)
	a, err := zklock.NewGolib(connA, zklock.Options{Clock: clk})
	require.NoError(t, err)
	b := newGolib(t, connB, 300*time.Millisecond)
	k := key(t)
	dir := a.Path(k)
	assert.Equal(t, zklock.Path(zklock.GolibName, k), dir)

	lease, err := a.Acquire(ctx, k, time.Minute)
	require.NoError(t, err)
	assert.Zero(t, lease.Fence, "zk.Lock tells no zxid")
	assert.Len(t, lease.Token, 32)
	assert.Equal(t, clk.Now().Add(time.Minute), lease.Until)
	queue := children(t, connB, dir)
	require.Len(t, queue, 1)
	assert.Regexp(t, protected, queue[0], "go-zookeeper's protected name")
	_, stat, err := synced(t, connB).Exists(dir + "/" + queue[0])
	require.NoError(t, err)
	assert.Equal(t, connA.SessionID(), stat.EphemeralOwner)
	_, err = locklab.Extend(ctx, a, lease, time.Minute)
	require.ErrorIs(t, err, locklab.ErrInvalid, "no extend")

	began := time.Now()
	_, err = b.Acquire(ctx, k, time.Minute)
	require.ErrorIs(t, err, locklab.ErrNotAcquired)
	assert.NotErrorIs(t, err, locklab.ErrUnavailable)
	assert.Contains(t, err.Error(), k)
	assert.GreaterOrEqual(t, time.Since(began), 300*time.Millisecond, "refused after its patience")
	assert.Len(t, children(t, connB, dir), 2, "expected weakness: the Lock given up on stays queued")

	require.ErrorIs(t, b.Release(ctx, lease), locklab.ErrNotHeld, "another GolibLock's lease: zk.ErrNotLocked")
	require.NoError(t, a.Release(ctx, lease))
	waitFor(t, "the queue to empty", func() bool { return len(children(t, connB, dir)) == 0 })
	require.ErrorIs(t, a.Release(ctx, lease), locklab.ErrNotHeld, "a second release")
	next, err := b.Acquire(ctx, k, time.Minute)
	require.NoError(t, err)
	require.NoError(t, b.Release(ctx, next))
}

// TestGolibLockGivesUp: Lock waits while ctx lasts, and says why it gave
// up.
func TestGolibLockGivesUp(t *testing.T) {
	t.Parallel()
	ctx, addrs := testCtx(t), servers(t)
	connA, _ := dial(t, addrs)
	connB, _ := dial(t, addrs)
	a, b := newGolib(t, connA, 0), newGolib(t, connB, 0)
	k := key(t)
	held, err := a.Acquire(ctx, k, time.Minute)
	require.NoError(t, err)
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	_, err = b.Lock(short, k, time.Minute)
	require.ErrorIs(t, err, locklab.ErrNotAcquired)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.ErrorIs(t, err, locklab.ErrUnavailable)
	got := make(chan error, 1)
	go func() {
		lease, err := b.Lock(ctx, k, time.Minute)
		if err == nil {
			err = b.Release(ctx, lease)
		}
		got <- err
	}()
	require.NoError(t, a.Release(ctx, held))
	require.NoError(t, <-got, "the waiting Lock gets the lock after the abandoned one unlocked it")
}

// TestGolibSilentLoss shows samuel/go-zookeeper#20: the holder is cut off
// past its session timeout; the server expires its session and deletes
// its node, the next client takes the lock, and go-zookeeper's connection,
// healed, opens a new session on its own. Nothing tells the holder: its
// connection looks healthy, zk.Lock has no way to ask, the GolibLock has
// no Extend, and zk.Lock itself still believes it holds the lock. Only the
// release, when the work is done, finds the node gone.
func TestGolibSilentLoss(t *testing.T) {
	t.Parallel()
	ctx, addrs := testCtx(t), servers(t)
	connA, _ := dialTimeout(t, addrs, time.Second)
	connB, _ := dial(t, addrs)
	a, b := newGolib(t, connA, 0), newGolib(t, connB, 0)
	k := key(t)
	held, err := a.Acquire(ctx, k, time.Hour)
	require.NoError(t, err)
	// zk.Lock as a program holds it, beside the GolibLock.
	raw := zk.NewLock(connA, zklock.Path(zklock.GolibName, k)+"-raw", zk.WorldACL(zk.PermAll))
	require.NoError(t, raw.Lock())
	sid := connA.SessionID()

	partition(t, addrs, connA)
	waitFor(t, "A's new session", func() bool { return connA.State() == zk.StateHasSession && connA.SessionID() != sid })
	next, err := b.Lock(ctx, k, time.Minute)
	require.NoError(t, err, "B takes the lock")
	rawB := zk.NewLock(connB, zklock.Path(zklock.GolibName, k)+"-raw", zk.WorldACL(zk.PermAll))
	require.NoError(t, rawB.Lock(), "B takes the raw lock")

	// The flaw: A was told nothing, and can find out nothing.
	assert.True(t, held.Valid(time.Now()), "A's lease is within its Until")
	_, err = locklab.Extend(ctx, a, held, time.Hour)
	require.ErrorIs(t, err, locklab.ErrInvalid, "no way to ask")
	require.ErrorIs(t, raw.Lock(), zk.ErrDeadlock, "expected weakness: zk.Lock believes it still holds the lock B holds")
	t.Logf("expected weakness confirmed: session %x expired, connection now on session %x, both clients hold %q", sid, connA.SessionID(), k)

	require.ErrorIs(t, raw.Unlock(), zk.ErrNoNode, "its node is long gone")
	require.ErrorIs(t, a.Release(ctx, held), locklab.ErrNotHeld, "the first word A gets, after its work")
	require.NoError(t, b.Release(ctx, next))
	require.NoError(t, rawB.Unlock())
}

// TestGolibLostChildrenDeadlock shows samuel/go-zookeeper#229: the
// connection drops while zk.Lock reads the queue, after its node was made;
// Lock returns the error and forgets its node, which stays in the queue
// with the session the connection keeps alive. Every later attempt, the
// same client's and another's, waits behind it, until the client's
// connection closes.
func TestGolibLostChildrenDeadlock(t *testing.T) {
	t.Parallel()
	ctx, addrs := testCtx(t), servers(t)
	connA, w := dial(t, addrs)
	connB, _ := dial(t, addrs)
	a, b := newGolib(t, connA, 300*time.Millisecond), newGolib(t, connB, 300*time.Millisecond)
	k := key(t)
	makePath(t, ctx, a, k)

	w.loseAnswer(opGetChildren2, 0)
	sid := connA.SessionID()
	// A patience of a minute: on a loaded machine the dropped
	// connection may reach zk.Lock after 300ms.
	_, err := newGolib(t, connA, time.Minute).Acquire(ctx, k, time.Minute)
	require.ErrorIs(t, err, locklab.ErrUnavailable)
	waitFor(t, "the reconnect", func() bool { return connA.State() == zk.StateHasSession })
	require.Equal(t, sid, connA.SessionID(), "the same session, alive")
	queue := children(t, connB, a.Path(k))
	require.Len(t, queue, 1, "expected weakness: the node stays")
	_, stat, err := synced(t, connB).Exists(a.Path(k) + "/" + queue[0])
	require.NoError(t, err)
	assert.Equal(t, sid, stat.EphemeralOwner)
	for range 2 {
		_, err = b.Acquire(ctx, k, time.Minute)
		require.ErrorIs(t, err, locklab.ErrNotAcquired, "expected weakness: nobody holds the lock, and nobody gets it")
		_, err = a.Acquire(ctx, k, time.Minute)
		require.ErrorIs(t, err, locklab.ErrNotAcquired, "the client's own attempts too")
	}
	t.Logf("expected weakness confirmed: an orphan node of a live session blocks %q", k)

	connA.Close() // only the session's end frees the queue
	lease, err := b.Lock(ctx, k, time.Minute)
	require.NoError(t, err)
	require.NoError(t, b.Release(ctx, lease))
}
