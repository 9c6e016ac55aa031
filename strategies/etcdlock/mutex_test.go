package etcdlock_test

import (
	"context"
	"errors"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/strategies"
	"github.com/locklab/locklab/strategies/etcdlock"
)

func newMutex(t *testing.T, cli *clientv3.Client, opts etcdlock.MutexOptions) *etcdlock.MutexLock {
	t.Helper()
	l, err := etcdlock.NewMutex(cli, opts)
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })
	return l
}

// other is the key of queue that is not mine.
func other(queue []string, mine string) string {
	for _, q := range queue {
		if q != mine {
			return q
		}
	}
	return ""
}

// queued waits until the lock on k has n keys under its prefix: the
// holder's and its waiters'.
func queued(t *testing.T, cli *clientv3.Client, k string, n int) []string {
	t.Helper()
	ctx := testCtx(t)
	for {
		if h := holders(t, cli, k); len(h) == n {
			return h
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the lock on %s never had %d keys: %v", k, n, holders(t, cli, k))
		case <-time.After(10 * time.Millisecond):
		}
	}
}

type lockResult struct {
	lease locklab.Lease
	err   error
}

// lockAsync runs l.Lock in a goroutine.
func lockAsync(ctx context.Context, l *etcdlock.MutexLock, k string, ttl time.Duration) <-chan lockResult {
	out := make(chan lockResult, 1)
	go func() {
		lease, err := l.Lock(ctx, k, ttl)
		out <- lockResult{lease, err}
	}()
	return out
}

func TestMutexRegistered(t *testing.T) {
	d, err := strategies.Info(etcdlock.MutexName)
	require.NoError(t, err)
	assert.Equal(t, etcdlock.Family, d.Family)
	assert.Equal(t, strategies.Properties{AtomicAcquire: true, ServerTTL: true, OwnerCheckedRelease: true, Fencing: true}, d.Properties)
	assert.Equal(t, []string{strategies.OptStore}, d.Options)
	assert.Contains(t, d.Source, "mutex.go")
	cli := sharedClient(t)
	l, err := strategies.New(etcdlock.MutexName, locklab.Config{Store: cli})
	require.NoError(t, err)
	assert.IsType(t, &etcdlock.MutexLock{}, l)
	_, closer := l.(io.Closer)
	assert.True(t, closer)
	for name, cfg := range map[string]locklab.Config{
		"no store":    {},
		"nil client":  {Store: (*clientv3.Client)(nil)},
		"a watchdog":  {Store: cli, Watchdog: true},
		"a pool too":  {Store: cli, Pool: locklab.NewPool("127.0.0.1:1")},
		"another one": {Store: struct{}{}},
	} {
		_, err := strategies.New(etcdlock.MutexName, cfg)
		require.ErrorIs(t, err, locklab.ErrInvalid, name)
	}
}

// TestMutexQueue: a waiter queues its key behind the holder's and holds
// the lock once the holder releases; one out of patience takes its key
// back; the holder's own session locks again at once (concurrency.Mutex
// reuses a session's key).
func TestMutexQueue(t *testing.T) {
	t.Parallel()
	ctx, cli := testCtx(t), sharedClient(t)
	a := newMutex(t, cli, etcdlock.MutexOptions{})
	b := newMutex(t, cli, etcdlock.MutexOptions{Patience: 50 * time.Millisecond})
	k := key(t)

	held, err := a.Acquire(ctx, k, 30*time.Second)
	require.NoError(t, err)
	resp, err := cli.Get(ctx, held.Token)
	require.NoError(t, err)
	require.Len(t, resp.Kvs, 1)
	assert.Equal(t, held.Fence, resp.Kvs[0].CreateRevision, "the fence is the key's create revision")
	ttl, err := cli.TimeToLive(ctx, clientv3.LeaseID(resp.Kvs[0].Lease))
	require.NoError(t, err)
	assert.EqualValues(t, 30, ttl.GrantedTTL)

	// Whether b's key stays depends on where its patience ended: in the
	// queue, Lock deletes it (TestMutexGivesUpInQueue); during the put,
	// it stays (TestMutexPutWithoutReply), and b's next Lock reuses it.
	_, err = b.Acquire(ctx, k, 30*time.Second)
	require.ErrorIs(t, err, locklab.ErrNotAcquired, "out of patience")
	assert.Equal(t, held.Token, first(t, cli, k), "the holder keeps the lock")

	again, err := a.Acquire(ctx, k, 30*time.Second)
	require.NoError(t, err, "the session's own key: Lock succeeds again")
	assert.Equal(t, held.Token, again.Token)

	waiter := lockAsync(ctx, b, k, 30*time.Second)
	queue := queued(t, cli, k, 2)
	require.NoError(t, a.Release(ctx, held))
	got := <-waiter
	require.NoError(t, got.err)
	assert.Equal(t, other(queue, held.Token), got.lease.Token)
	assert.Greater(t, got.lease.Fence, held.Fence)
	require.ErrorIs(t, a.Release(ctx, held), locklab.ErrNotHeld, "released already")
	require.NoError(t, b.Release(ctx, got.lease))
	assert.Empty(t, holders(t, cli, k))
}

// TestMutexGivesUpInQueue: a Lock whose context ends while it waits in
// the queue deletes its key on its way out, as etcd's Mutex.Lock does.
// The cancel comes once the put's reply has reached the waiter's client,
// so the waiter is past the put.
func TestMutexGivesUpInQueue(t *testing.T) {
	t.Parallel()
	ctx, cli := testCtx(t), sharedClient(t)
	replied := make(chan struct{}, 1)
	waiterCli := txnClient(t, func(ctx context.Context, txn func(context.Context) error) error {
		err := txn(ctx)
		if err == nil {
			select {
			case replied <- struct{}{}:
			default:
			}
		}
		return err
	})
	a := newMutex(t, cli, etcdlock.MutexOptions{})
	b := newMutex(t, waiterCli, etcdlock.MutexOptions{})
	k := key(t)

	held, err := a.Acquire(ctx, k, 30*time.Second)
	require.NoError(t, err)
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	waiter := lockAsync(wctx, b, k, 30*time.Second)
	select {
	case <-replied:
	case <-ctx.Done():
		t.Fatal("the waiter's put was never answered")
	}
	cancel()
	got := <-waiter
	require.ErrorIs(t, got.err, context.Canceled)
	assert.Equal(t, []string{held.Token}, holders(t, cli, k), "the waiter took its key back")
}

// TestMutexPutWithoutReply: a Lock whose context ends after etcd put its
// key, before the reply came, fails without deleting the key (the doc
// comment's third failure). The key stays on the session's lease, which
// the keepalive renews: after the holder releases, the lock is the
// session's, and another client waits behind a key no one will delete
// until the session's next Lock finds it (the Txn's else branch) and
// holds.
func TestMutexPutWithoutReply(t *testing.T) {
	t.Parallel()
	ctx, cli := testCtx(t), sharedClient(t)
	var withheld atomic.Bool
	waiterCli := txnClient(t, func(ctx context.Context, txn func(context.Context) error) error {
		if !withheld.CompareAndSwap(false, true) {
			return txn(ctx)
		}
		// The first put reaches etcd; its reply is held until the
		// caller gives up.
		if err := txn(context.WithoutCancel(ctx)); err != nil {
			return err
		}
		<-ctx.Done()
		return ctx.Err()
	})
	a := newMutex(t, cli, etcdlock.MutexOptions{})
	b := newMutex(t, waiterCli, etcdlock.MutexOptions{})
	c := newMutex(t, cli, etcdlock.MutexOptions{Patience: 50 * time.Millisecond})
	k := key(t)

	held, err := a.Acquire(ctx, k, 30*time.Second)
	require.NoError(t, err)
	wctx, cancel := context.WithCancel(ctx)
	waiter := lockAsync(wctx, b, k, 30*time.Second)
	queue := queued(t, cli, k, 2)
	cancel()
	got := <-waiter
	require.ErrorIs(t, got.err, context.Canceled)
	assert.Equal(t, queue, holders(t, cli, k), "the waiter's key stays")

	require.NoError(t, a.Release(ctx, held))
	_, err = c.Acquire(ctx, k, 30*time.Second)
	require.ErrorIs(t, err, locklab.ErrNotAcquired, "the lock is the waiter's key's")
	stale := other(queue, held.Token)
	assert.Equal(t, stale, first(t, cli, k))

	again, err := b.Acquire(ctx, k, 30*time.Second)
	require.NoError(t, err, "the session's next Lock finds its own key")
	assert.Equal(t, stale, again.Token)
	require.NoError(t, b.Release(ctx, again))
}

// TestMutexLostLock: a holder whose lease ends (as the leader ends it when
// the keepalive falls silent past the TTL) loses the lock to the waiter;
// its Release, a blind delete of its own key, returns nil and leaves the
// successor's key alone.
func TestMutexLostLock(t *testing.T) {
	t.Parallel()
	ctx, cli := testCtx(t), sharedClient(t)
	a := newMutex(t, cli, etcdlock.MutexOptions{})
	b := newMutex(t, cli, etcdlock.MutexOptions{})
	k := key(t)

	held, err := a.Acquire(ctx, k, 30*time.Second)
	require.NoError(t, err)
	waiter := lockAsync(ctx, b, k, 30*time.Second)
	queued(t, cli, k, 2)
	_, err = cli.Revoke(ctx, leaseOf(t, cli, held))
	require.NoError(t, err)
	got := <-waiter
	require.NoError(t, got.err)
	require.NoError(t, a.Release(ctx, held), "Unlock cannot tell the lock was lost")
	assert.Equal(t, []string{got.lease.Token}, holders(t, cli, k))
	require.NoError(t, b.Release(ctx, got.lease))
}

// TestMutexWaiterLeaseExpires: a waiter whose own lease ends while it
// waits waits on; when the holder releases, Lock reads its key back,
// finds it gone and fails (ErrSessionExpired), and the next Acquire opens
// a new session.
func TestMutexWaiterLeaseExpires(t *testing.T) {
	t.Parallel()
	ctx, cli := testCtx(t), sharedClient(t)
	a := newMutex(t, cli, etcdlock.MutexOptions{})
	b := newMutex(t, cli, etcdlock.MutexOptions{})
	k := key(t)

	held, err := a.Acquire(ctx, k, 30*time.Second)
	require.NoError(t, err)
	waiter := lockAsync(ctx, b, k, 30*time.Second)
	queue := queued(t, cli, k, 2)
	mine := other(queue, held.Token)
	resp, err := cli.Get(ctx, mine)
	require.NoError(t, err)
	require.Len(t, resp.Kvs, 1)
	_, err = cli.Revoke(ctx, clientv3.LeaseID(resp.Kvs[0].Lease))
	require.NoError(t, err)
	queued(t, cli, k, 1)
	select {
	case got := <-waiter:
		t.Fatalf("the waiter returned before its predecessor went: %+v", got)
	default:
	}
	require.NoError(t, a.Release(ctx, held))
	got := <-waiter
	require.ErrorIs(t, got.err, locklab.ErrNotAcquired)
	require.ErrorIs(t, got.err, concurrency.ErrSessionExpired)
	assert.Empty(t, holders(t, cli, k))

	next, err := b.Acquire(ctx, k, 30*time.Second)
	require.NoError(t, err, "a new session")
	assert.NotEqual(t, mine, next.Token)
	require.NoError(t, b.Release(ctx, next))
}

// TestMutexKeepAlive: the session's keepalive keeps a 1s lock (a 2s lease
// on the server) past its TTL while the holder's process runs; once it
// stops (Close, as the process ending) the lock expires.
func TestMutexKeepAlive(t *testing.T) {
	t.Parallel()
	ctx, cli := testCtx(t), sharedClient(t)
	a, err := etcdlock.NewMutex(cli, etcdlock.MutexOptions{})
	require.NoError(t, err)
	b := newMutex(t, cli, etcdlock.MutexOptions{Patience: 50 * time.Millisecond})
	k := key(t)

	held, err := a.Acquire(ctx, k, time.Second)
	require.NoError(t, err)
	id := leaseOf(t, cli, held)
	// b is refused until the lease would have run out three times over
	// without its keepalive, and once more after that. A probe the
	// cluster fails (a request timed out on a loaded machine) says
	// nothing about the lock either way, and is tried again.
	refusedAfter := false
	for end := time.Now().Add(3 * time.Second); !refusedAfter; time.Sleep(100 * time.Millisecond) {
		late := time.Now().After(end)
		_, err := b.Acquire(ctx, k, time.Minute)
		if errors.Is(err, locklab.ErrUnavailable) {
			continue
		}
		require.ErrorIs(t, err, locklab.ErrNotAcquired, "kept alive past its TTL")
		refusedAfter = late
	}
	require.NoError(t, a.Close())
	next, err := b.Lock(ctx, k, time.Minute)
	require.NoError(t, err, "expires once nobody renews it")
	ttl, err := cli.TimeToLive(ctx, id)
	require.NoError(t, err)
	assert.EqualValues(t, -1, ttl.TTL, "the lease ran out")
	require.NoError(t, b.Release(ctx, next))
}

// TestMutexUntil: a lock taken on a session the call opened lasts the TTL
// from the start of the call; one taken on the open session two thirds of
// it from its end, which the keepalive (every third) guarantees.
func TestMutexUntil(t *testing.T) {
	t.Parallel()
	ctx, cli := testCtx(t), sharedClient(t)
	clk := newClock()
	a := newMutex(t, cli, etcdlock.MutexOptions{Clock: clk})
	k := key(t)
	first, err := a.Acquire(ctx, k, 30*time.Second)
	require.NoError(t, err)
	assert.Equal(t, clk.Now().Add(30*time.Second), first.Until, "a fresh session")
	require.NoError(t, a.Release(ctx, first))
	second, err := a.Acquire(ctx, k, 30*time.Second)
	require.NoError(t, err)
	assert.Equal(t, clk.Now().Add(20*time.Second), second.Until, "the open session")
	assert.Equal(t, first.Token, second.Token, "one session: the key named after its lease")
	require.NoError(t, a.Release(ctx, second))
}
