package zklock_test

import (
	"context"
	"slices"
	"strings"
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

// TestNodeGoneBeforeChildren shows a flaw of zk.Lock (go-zookeeper v1.0.4,
// lock.go) that a vanished node opens: Lock searches the children for the
// lowest sequence number starting from its own node's (lowestSeq := seq)
// and never checks that its node is among them. A's connection dies
// between its create's answer and its getChildren, which go-zookeeper
// then queues for the next connection, and nothing is heard from A until
// its session expires, with its node. B takes the lock. A's connection
// comes back on a new session, opened on its own, and sends the
// getChildren there: every node in the queue is later than A's vanished
// one, and zk.Lock returns to A as the holder while B holds the lock.
// zk-recipe, on the same sequence, finds its node missing from the queue
// (Curator's NoNodeException) and queues again, behind B.
//
// The wire stalls A's connection after the create, so that the
// getChildren waits unsent, and freezes A as a stopped process is frozen:
// when a process stops past its session timeout between the two requests,
// its connection may find the socket dead before the lock sends the
// getChildren, which then goes out on the next session. A partition does
// not give this order: a client that fails to reach every server fails
// its queued requests (ErrNoServer) long before its session expires.
func TestNodeGoneBeforeChildren(t *testing.T) {
	t.Parallel()
	t.Run("golib", func(t *testing.T) {
		t.Parallel()
		ctx, addrs := testCtx(t), servers(t)
		connA, w := dial(t, addrs)
		connB, _ := dial(t, addrs)
		a, b := newGolib(t, connA, 0), newGolib(t, connB, time.Minute)
		k := key(t)
		sid, ours, theirs, held, locked := goneBeforeChildren(t, ctx, addrs, w, a, b, k)

		res := <-locked
		require.NoError(t, res.err, "expected weakness: zk.Lock takes A for the holder")
		assert.NotEqual(t, sid, connA.SessionID(), "on a session of its own making")
		assert.Equal(t, []string{theirs}, children(t, connB, a.Path(k)), "no node of A's in line: B's is first")
		t.Logf("expected weakness confirmed: A's node %s went with session %x before zk.Lock read the queue; A and B both hold %q", ours, sid, k)

		require.ErrorIs(t, a.Release(ctx, res.lease), locklab.ErrNotHeld, "A's release finds its node gone")
		require.NoError(t, b.Release(ctx, held))
	})
	t.Run("recipe", func(t *testing.T) {
		t.Parallel()
		ctx, addrs := testCtx(t), servers(t)
		connA, w := dial(t, addrs)
		connB, _ := dial(t, addrs)
		a, b := newRecipe(t, connA, zklock.Options{}), newRecipe(t, connB, zklock.Options{})
		k := key(t)
		sid, _, theirs, held, locked := goneBeforeChildren(t, ctx, addrs, w, a, b, k)

		// A queues a new node behind B's, and waits.
		waitFor(t, "A's new node", func() bool { return len(children(t, connB, a.Path(k))) == 2 })
		queue := children(t, connB, a.Path(k))
		slices.SortFunc(queue, func(x, y string) int { return strings.Compare(x[len(x)-10:], y[len(y)-10:]) })
		assert.Equal(t, theirs, queue[0], "B's node first, by its sequence number")
		_, stat, err := synced(t, connB).Exists(a.Path(k) + "/" + queue[1])
		require.NoError(t, err)
		assert.Equal(t, connA.SessionID(), stat.EphemeralOwner, "A's, on its new session")
		assert.NotEqual(t, sid, stat.EphemeralOwner)
		select {
		case res := <-locked:
			t.Fatalf("A's Lock returned while B holds the lock: %+v, %v", res.lease, res.err)
		default:
		}
		require.NoError(t, b.Release(ctx, held))
		res := <-locked
		require.NoError(t, res.err, "A's turn")
		assert.Equal(t, a.Path(k)+"/"+queue[1], res.lease.Token)
		require.NoError(t, a.Release(ctx, res.lease))
	})
}

// queueLock is a lock that queues a node under its path, and waits its
// turn in Lock.
type queueLock interface {
	locklab.Locker
	Lock(ctx context.Context, key string, ttl time.Duration) (locklab.Lease, error)
	Path(key string) string
}

// locked is the outcome of a Lock.
type locked struct {
	lease locklab.Lease
	err   error
}

// goneBeforeChildren runs TestNodeGoneBeforeChildren's sequence: a's Lock
// on k creates its node on the connection whose wire is w, and the
// connection dies with the lock's next request unsent; a's session
// expires, b takes the lock, and w heals. It returns a's old session, the
// names of a's vanished node and of b's node, b's lease, and where a's Lock
// returns.
func goneBeforeChildren(t *testing.T, ctx context.Context, addrs []string, w *wire, a, b queueLock, k string) (
	sid int64, ours, theirs string, held locklab.Lease, out <-chan locked) {
	t.Helper()
	dir := a.Path(k)
	makePath(t, ctx, b, k) // the lock's first create makes its node, not its parents
	sid, passwd, _ := w.session()

	answered := w.stallAfter(opCreate)
	got := make(chan locked, 1)
	go func() {
		lease, err := a.Lock(ctx, k, time.Minute)
		got <- locked{lease, err}
	}()
	select {
	case <-answered:
	case <-ctx.Done():
		t.Fatal("A's create was never answered")
	}
	queue := children(t, probe(t, addrs), dir)
	require.Len(t, queue, 1, "A's node, first in line")
	w.Freeze()
	closeSession(t, addrs[0], sid, passwd) // A's session times out, and its node goes
	held, err := b.Acquire(ctx, k, time.Minute)
	require.NoError(t, err, "B takes the lock")
	after := children(t, probe(t, addrs), dir)
	require.Len(t, after, 1)
	require.NotEqual(t, queue[0], after[0], "B's node alone")
	w.Heal()
	return sid, queue[0], after[0], held, got
}
