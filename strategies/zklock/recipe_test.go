package zklock_test

import (
	"context"
	"errors"
	"path"
	"regexp"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/stores/zookeeper/zkproc"
	"github.com/locklab/locklab/stores/zookeeper/zkproc/zktest"
	"github.com/locklab/locklab/strategies/reentrant"
	"github.com/locklab/locklab/strategies/zklock"
)

func newRecipe(t testing.TB, conn *zk.Conn, opts zklock.Options) *zklock.RecipeLock {
	t.Helper()
	l, err := zklock.NewRecipe(conn, opts)
	require.NoError(t, err)
	return l
}

// protected is the name of a zk-recipe node: Curator's protected prefix,
// a GUID, the lock name and the sequence number.
var protected = regexp.MustCompile(`^_c_[0-9a-f]{32}-lock-[0-9]{10}$`)

func TestRecipeAcquireRelease(t *testing.T) {
	t.Parallel()
	ctx, addrs := testCtx(t), servers(t)
	clk := newClock()
	connA, _ := dial(t, addrs)
	connB, _ := dial(t, addrs)
	a := newRecipe(t, connA, zklock.Options{Clock: clk})
	b := newRecipe(t, connB, zklock.Options{Clock: clk})
	k := key(t)
	dir := a.Path(k)
	assert.Equal(t, zklock.Path(zklock.RecipeName, k), dir)

	lease, err := a.Acquire(ctx, k, 30*time.Second)
	require.NoError(t, err)
	assert.Equal(t, k, lease.Key)
	assert.Equal(t, clk.Now().Add(30*time.Second), lease.Until)
	assert.Equal(t, dir, path.Dir(lease.Token))
	assert.Regexp(t, protected, path.Base(lease.Token))
	ok, stat, err := synced(t, connB).Exists(lease.Token)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, stat.Czxid, lease.Fence, "the fence is the node's czxid")
	assert.Equal(t, connA.SessionID(), stat.EphemeralOwner, "an ephemeral node of the holder's session")
	ok, stat, err = synced(t, connB).Exists(dir)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Zero(t, stat.EphemeralOwner, "the lock's path is no ephemeral node")

	_, err = b.Acquire(ctx, k, 30*time.Second)
	require.ErrorIs(t, err, locklab.ErrNotAcquired)
	assert.NotErrorIs(t, err, locklab.ErrUnavailable)
	assert.Contains(t, err.Error(), k)
	_, err = a.Acquire(ctx, k, 30*time.Second)
	require.ErrorIs(t, err, locklab.ErrNotAcquired, "no owner named: no re-entry")
	assert.Equal(t, []string{path.Base(lease.Token)}, children(t, connB, dir), "refused attempts delete their nodes")

	extended, err := a.Extend(ctx, lease, time.Minute)
	require.NoError(t, err)
	assert.Equal(t, clk.Now().Add(time.Minute), extended.Until)
	_, err = b.Extend(ctx, lease, time.Minute)
	require.ErrorIs(t, err, locklab.ErrNotHeld, "another session's node")

	require.NoError(t, a.Release(ctx, lease))
	assert.Empty(t, children(t, connB, dir))
	require.ErrorIs(t, a.Release(ctx, lease), locklab.ErrNotHeld, "a second release")
	_, err = a.Extend(ctx, lease, time.Minute)
	require.ErrorIs(t, err, locklab.ErrNotHeld, "released: nothing to extend")

	next, err := b.Acquire(ctx, k, time.Minute)
	require.NoError(t, err, "free after release")
	assert.Greater(t, next.Fence, lease.Fence)
	require.NoError(t, b.Release(ctx, next))

	refusesLeases(t, ctx, a,
		locklab.Lease{Key: k, Token: "/elsewhere/_c_x-lock-0000000001", Fence: 5},
		locklab.Lease{Key: k, Token: dir + "/lock-0000000001", Fence: 5},
		locklab.Lease{Key: k, Token: lease.Token},
	)
}

// TestRecipeReentry: acquires whose contexts name one owner re-enter, as
// InterProcessMutex's thread does, without a request; each release leaves
// once and the last deletes the node. Another owner, and a context that
// names none, are refused.
func TestRecipeReentry(t *testing.T) {
	t.Parallel()
	ctx, addrs := testCtx(t), servers(t)
	conn, w := dial(t, addrs)
	l := newRecipe(t, conn, zklock.Options{})
	k := key(t)
	main := reentrant.WithOwner(ctx, "main")

	first, err := l.Acquire(main, k, time.Minute)
	require.NoError(t, err)
	before, _ := w.counts()
	again, err := l.Lock(main, k, 2*time.Minute)
	require.NoError(t, err)
	after, _ := w.counts()
	assert.Equal(t, before, after, "a re-entry sends no request")
	assert.Equal(t, first.Token, again.Token)
	assert.Equal(t, first.Fence, again.Fence)
	assert.True(t, again.Until.After(first.Until), "a re-entry's own Until")

	_, err = l.Acquire(reentrant.WithOwner(ctx, "other"), k, time.Minute)
	require.ErrorIs(t, err, locklab.ErrNotAcquired, "another owner")
	_, err = l.Acquire(ctx, k, time.Minute)
	require.ErrorIs(t, err, locklab.ErrNotAcquired, "no owner")

	require.NoError(t, l.Release(ctx, again))
	assert.Len(t, children(t, conn, l.Path(k)), 1, "one entry left: still held")
	require.NoError(t, l.Release(ctx, first))
	assert.Empty(t, children(t, conn, l.Path(k)), "the last release deletes the node")
	require.ErrorIs(t, l.Release(ctx, first), locklab.ErrNotHeld)

	// A new hold of the owner after its last release is a new node.
	third, err := l.Acquire(main, k, time.Minute)
	require.NoError(t, err)
	assert.NotEqual(t, first.Token, third.Token)
	assert.Greater(t, third.Fence, first.Fence)
	require.NoError(t, l.Release(main, third))
}

// TestRecipeSessionLoss: a holder whose session ends (closed by a second
// client, or expired by the server while the holder is cut off past its
// timeout) loses its node; the next client takes the lock with a larger
// fence, and the holder's Extend and Release say the lock was lost, never
// that it is held, although go-zookeeper's connection has a new session
// and looks healthy. As in Curator, a re-entry asks nothing and still
// succeeds; the Extend that follows tells.
func TestRecipeSessionLoss(t *testing.T) {
	t.Parallel()
	addrs := servers(t)
	for how, end := range map[string]func(*zk.Conn){
		"closed":      func(c *zk.Conn) { expire(t, addrs, c) },
		"partitioned": func(c *zk.Conn) { partition(t, addrs, c) },
	} {
		t.Run(how, func(t *testing.T) {
			t.Parallel()
			ctx := testCtx(t)
			connA, _ := dialTimeout(t, addrs, time.Second)
			connB, _ := dial(t, addrs)
			a := newRecipe(t, connA, zklock.Options{})
			b := newRecipe(t, connB, zklock.Options{})
			k := key(t)
			main := reentrant.WithOwner(ctx, "main")

			held, err := a.Acquire(main, k, time.Hour)
			require.NoError(t, err)
			sid := connA.SessionID()
			end(connA)
			next, err := b.Acquire(ctx, k, time.Minute)
			require.NoError(t, err, "the node went with the session")
			assert.Greater(t, next.Fence, held.Fence, "a resource that checks fences refuses the old holder")
			assert.True(t, held.Valid(time.Now()), "the old holder's lease is still within its Until")

			again, err := a.Acquire(main, k, time.Hour)
			require.NoError(t, err, "as Curator: a re-entry asks nothing of the server")
			assert.Equal(t, held.Token, again.Token)
			// Once the connection has its new session and looks healthy
			// (a cut-off holder's reconnects after the heal, on a loaded
			// machine later than the acquire above: an Extend before it
			// would fail to reach any server), Extend and Release say the
			// lock was lost.
			waitFor(t, "a new session", func() bool { return connA.State() == zk.StateHasSession && connA.SessionID() != sid })
			_, err = a.Extend(ctx, held, time.Hour)
			require.ErrorIs(t, err, locklab.ErrNotHeld, "the lost lock, said by Extend")
			require.ErrorIs(t, a.Release(ctx, again), locklab.ErrNotHeld, "and by Release")
			require.ErrorIs(t, a.Release(ctx, held), locklab.ErrNotHeld)
			_, err = a.Acquire(main, k, time.Minute)
			require.ErrorIs(t, err, locklab.ErrNotAcquired, "forgotten once lost: a new attempt, behind the new holder")
			require.NoError(t, b.Release(ctx, next))
		})
	}
}

// TestRecipeLostCreate: the server creates the node and the answer is lost
// with the connection (ZOOKEEPER-1262). The attempt finds its node again by
// its GUID once reconnected, on the same session, and holds the lock with
// it: one node, no orphan.
func TestRecipeLostCreate(t *testing.T) {
	t.Parallel()
	ctx, addrs := testCtx(t), servers(t)
	conn, w := dial(t, addrs)
	other, _ := dial(t, addrs)
	l := newRecipe(t, conn, zklock.Options{})
	k := key(t)
	makePath(t, ctx, l, k)
	before, _ := w.counts()
	lost := w.loseAnswer(opCreate, 0)
	sid := conn.SessionID()
	lease, err := l.Acquire(ctx, k, time.Minute)
	require.NoError(t, err)
	<-lost
	assert.Equal(t, sid, conn.SessionID(), "the same session")
	after, _ := w.counts()
	assert.Equal(t, 1, after[opCreate]-before[opCreate], "the node was created once, and found again")
	assert.Equal(t, 2, after[opGetChildren2]-before[opGetChildren2], "the search for the GUID, then the queue")
	assert.Equal(t, []string{path.Base(lease.Token)}, children(t, other, l.Path(k)))
	require.NoError(t, l.Release(ctx, lease))
	assert.Empty(t, children(t, other, l.Path(k)))
}

// TestRecipeSweepsOrphans: a create whose answer is lost, then two
// searches for its GUID lost too, exhaust the attempt, which fails with
// its node made and never found; the next attempt finds the node first,
// deletes it, and takes the lock with a node of its own.
func TestRecipeSweepsOrphans(t *testing.T) {
	t.Parallel()
	ctx, addrs := testCtx(t), servers(t)
	conn, w := dial(t, addrs)
	l := newRecipe(t, conn, zklock.Options{})
	k := key(t)
	makePath(t, ctx, l, k)

	w.loseAnswer(opCreate, 0)
	w.loseAnswer(opGetChildren2, 0)
	w.loseAnswer(opGetChildren2, 0)
	_, err := l.Acquire(ctx, k, time.Minute)
	require.ErrorIs(t, err, locklab.ErrUnavailable)
	orphan := children(t, conn, l.Path(k))
	require.Len(t, orphan, 1, "the lost create's node")

	lease, err := l.Acquire(ctx, k, time.Minute)
	require.NoError(t, err)
	assert.Equal(t, []string{path.Base(lease.Token)}, children(t, conn, l.Path(k)), "the orphan is gone")
	assert.NotEqual(t, orphan[0], path.Base(lease.Token))
	require.NoError(t, l.Release(ctx, lease))
}

// TestRecipeLostChildren: the connection drops while the attempt reads the
// queue, its node made: the attempt fails as unavailable and deletes its
// node, so that nobody waits behind it (the deadlock of
// samuel/go-zookeeper#229 that zk-golib keeps).
func TestRecipeLostChildren(t *testing.T) {
	t.Parallel()
	ctx, addrs := testCtx(t), servers(t)
	conn, w := dial(t, addrs)
	otherConn, _ := dial(t, addrs)
	l := newRecipe(t, conn, zklock.Options{})
	other := newRecipe(t, otherConn, zklock.Options{})
	k := key(t)
	w.loseAnswer(opGetChildren2, 0)
	_, err := l.Acquire(ctx, k, time.Minute)
	require.ErrorIs(t, err, locklab.ErrUnavailable)
	assert.Empty(t, children(t, otherConn, l.Path(k)), "no node left behind")
	lease, err := other.Acquire(ctx, k, time.Minute)
	require.NoError(t, err)
	require.NoError(t, other.Release(ctx, lease))
}

// TestRecipeLockWaits: Lock queues behind the holder and the waiters
// before it, and gets the lock in their order; a waiter whose ctx ends
// deletes its node and steps out of the queue.
func TestRecipeLockWaits(t *testing.T) {
	t.Parallel()
	ctx, addrs := testCtx(t), servers(t)
	conn, _ := dial(t, addrs)
	holder := newRecipe(t, conn, zklock.Options{})
	k := key(t)
	held, err := holder.Acquire(ctx, k, time.Minute)
	require.NoError(t, err)

	// A waiter that gives up leaves no node.
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	_, err = newRecipe(t, conn, zklock.Options{}).Lock(short, k, time.Minute)
	require.ErrorIs(t, err, locklab.ErrNotAcquired)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.ErrorIs(t, err, locklab.ErrUnavailable)
	assert.Len(t, children(t, conn, holder.Path(k)), 1)

	const n = 3
	got := make(chan int, n)
	for i := range n {
		c, _ := dial(t, addrs)
		w := newRecipe(t, c, zklock.Options{})
		go func() {
			lease, err := w.Lock(ctx, k, time.Minute)
			if err != nil {
				got <- -1
				return
			}
			got <- i
			w.Release(ctx, lease)
		}()
		waitFor(t, "the waiter's node", func() bool { return len(children(t, conn, holder.Path(k))) == i+2 })
	}
	select {
	case i := <-got:
		t.Fatalf("waiter %d got the lock while it was held", i)
	case <-time.After(200 * time.Millisecond):
	}
	require.NoError(t, holder.Release(ctx, held))
	for want := range n {
		assert.Equal(t, want, <-got, "the queue's order")
	}
}

// TestRecipeSurvivesLeaderKill: the lock is the ensemble's: killing the
// leader elects another within the session's timeout, the holder's
// connection moves to a live server on the same session, and the holder
// still holds the lock, on every server, the restarted one included.
func TestRecipeSurvivesLeaderKill(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	e := zktest.Start(t, zkproc.Options{})
	connA, _ := dial(t, e.Addrs())
	connB, _ := dial(t, e.Addrs())
	a := newRecipe(t, connA, zklock.Options{})
	b := newRecipe(t, connB, zklock.Options{})
	k := key(t)
	held, err := a.Acquire(ctx, k, time.Minute)
	require.NoError(t, err)
	sid := connA.SessionID()

	old, err := e.KillLeader(ctx)
	require.NoError(t, err)
	leader, err := e.Leader(ctx)
	require.NoError(t, err)
	require.NotEqual(t, old.Name(), leader.Name(), "a new leader")
	for { // a refusal, once the ensemble answers again
		_, err = b.Acquire(ctx, k, time.Minute)
		if !errors.Is(err, locklab.ErrUnavailable) || ctx.Err() != nil {
			break
		}
	}
	require.ErrorIs(t, err, locklab.ErrNotAcquired, "the holder still holds")
	held, err = a.Extend(ctx, held, time.Minute)
	require.NoError(t, err, "and its node is still its session's")
	assert.Equal(t, sid, connA.SessionID(), "the same session")

	require.NoError(t, old.Restart(ctx))
	only, _, err := zk.Connect([]string{old.Addr()}, sessionTimeout, zk.WithLogger(quiet{}), zk.WithLogInfo(false))
	require.NoError(t, err)
	defer only.Close()
	ok, stat, err := synced(t, only).Exists(held.Token)
	require.NoError(t, err)
	require.True(t, ok, "the restarted server has the lock's node")
	assert.Equal(t, held.Fence, stat.Czxid)

	require.NoError(t, a.Release(ctx, held))
	next, err := b.Acquire(ctx, k, time.Minute)
	require.NoError(t, err)
	assert.Greater(t, next.Fence, held.Fence)
	require.NoError(t, b.Release(ctx, next))
}
