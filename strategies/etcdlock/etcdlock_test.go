package etcdlock_test

import (
	"context"
	"errors"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"google.golang.org/grpc"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/stores/etcd/etcdproc"
	"github.com/locklab/locklab/strategies"
	"github.com/locklab/locklab/strategies/etcdlock"
)

// The shared cluster of the tests that need no faults, started on first
// use.
var shared struct {
	once sync.Once
	c    *etcdproc.Cluster
	cli  *clientv3.Client
	err  error
}

// endpoints are the shared cluster's members, for the examples, which
// cannot start it themselves.
var endpoints []string

// startShared starts the shared cluster once.
func startShared() error {
	shared.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if shared.c, shared.err = etcdproc.Start(ctx, etcdproc.Options{}); shared.err != nil {
			return
		}
		endpoints = shared.c.Endpoints()
		shared.cli, shared.err = shared.c.Client()
	})
	return shared.err
}

func TestMain(m *testing.M) {
	// Started before the tests, for the examples: a failure fails every
	// test that needs it, with the reason.
	startShared()
	code := m.Run()
	if shared.cli != nil {
		shared.cli.Close()
	}
	if shared.c != nil {
		shared.c.Close()
	}
	os.Exit(code)
}

// sharedClient returns a client on the shared three-member cluster.
func sharedClient(t *testing.T) *clientv3.Client {
	t.Helper()
	if err := startShared(); err != nil {
		t.Fatalf("starting etcd: %v", err)
	}
	return shared.cli
}

// testCtx bounds a test's calls: long enough for an election on a loaded
// machine, short enough to fail a test that hangs.
func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// clock is a manual clock.
type clock struct{ ns atomic.Int64 }

func newClock() *clock {
	c := &clock{}
	c.ns.Store(time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	return c
}

func (c *clock) Now() time.Time { return time.Unix(0, c.ns.Load()) }

func newLock(t *testing.T, cli *clientv3.Client, opts etcdlock.Options) *etcdlock.LeaseLock {
	t.Helper()
	l, err := etcdlock.New(cli, opts)
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })
	return l
}

// keys counts the keys key made.
var keys atomic.Int64

// key is a key no other call uses, named after the running test.
func key(t *testing.T) string {
	return "locklab:test:" + t.Name() + ":" + strconv.FormatInt(keys.Add(1), 10)
}

// leaseOf is the etcd lease id a lock lease holds, read from etcd.
func leaseOf(t *testing.T, cli *clientv3.Client, lease locklab.Lease) clientv3.LeaseID {
	t.Helper()
	resp, err := cli.Get(testCtx(t), lease.Token)
	require.NoError(t, err)
	require.Len(t, resp.Kvs, 1, "the lock key %q is there", lease.Token)
	return clientv3.LeaseID(resp.Kvs[0].Lease)
}

// holders lists the keys under the lock's prefix.
func holders(t *testing.T, cli *clientv3.Client, k string) []string {
	t.Helper()
	resp, err := cli.Get(testCtx(t), etcdlock.Prefix(k)+"/", clientv3.WithPrefix())
	require.NoError(t, err)
	var out []string
	for _, kv := range resp.Kvs {
		out = append(out, string(kv.Key))
	}
	return out
}

// first is the key that holds the lock on k: the one with the lowest
// create revision under its prefix.
func first(t *testing.T, cli *clientv3.Client, k string) string {
	t.Helper()
	resp, err := cli.Get(testCtx(t), etcdlock.Prefix(k)+"/", clientv3.WithFirstCreate()...)
	require.NoError(t, err)
	require.NotEmpty(t, resp.Kvs, "the lock on %s has a key", k)
	return string(resp.Kvs[0].Key)
}

// txnClient is a client on the shared cluster whose Txn requests go
// through f, which calls txn to send the request on a context of its
// choosing and returns what the caller gets back.
func txnClient(t *testing.T, f func(ctx context.Context, txn func(context.Context) error) error) *clientv3.Client {
	t.Helper()
	sharedClient(t)
	intercept := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if method != "/etcdserverpb.KV/Txn" {
			return invoker(ctx, method, req, reply, cc, opts...)
		}
		return f(ctx, func(ctx context.Context) error { return invoker(ctx, method, req, reply, cc, opts...) })
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 10 * time.Second,
		DialOptions: []grpc.DialOption{grpc.WithChainUnaryInterceptor(intercept)}})
	require.NoError(t, err)
	t.Cleanup(func() { cli.Close() })
	return cli
}

// acquireEventually retries Acquire while it is refused, until ctx ends.
func acquireEventually(ctx context.Context, l locklab.Locker, k string, ttl time.Duration) (locklab.Lease, error) {
	for {
		lease, err := l.Acquire(ctx, k, ttl)
		if !errors.Is(err, locklab.ErrNotAcquired) && !errors.Is(err, locklab.ErrUnavailable) {
			return lease, err
		}
		select {
		case <-ctx.Done():
			return lease, err
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func TestRegistered(t *testing.T) {
	d, err := strategies.Info("etcd-lease")
	require.NoError(t, err)
	assert.Equal(t, etcdlock.Family, d.Family)
	assert.Equal(t, strategies.Properties{AtomicAcquire: true, ServerTTL: true, OwnerCheckedRelease: true, Fencing: true, Extend: true}, d.Properties)
	assert.ElementsMatch(t, []string{strategies.OptStore, strategies.OptWatchdog}, d.Options)
	assert.Contains(t, d.Source, "Jepsen")
	assert.Contains(t, d.Source, "concurrency")
	require.NotEmpty(t, d.Weaknesses)
	assert.Contains(t, d.Weaknesses[0], "fence")
}

// TestKnownToTheRegistry: the registry knows the names this package
// registers without importing it, so that a program that forgot the
// import is told it; and it lists etcd-lease among the strategies that
// open something for locklab.Close to end.
func TestKnownToTheRegistry(t *testing.T) {
	var mine []string
	for _, d := range strategies.All() {
		if d.Family == etcdlock.Family {
			mine = append(mine, d.Name)
		}
	}
	assert.Equal(t, strategies.PackageNames(strategies.EtcdPackage), mine)
	for _, n := range mine {
		pkg, ok := strategies.Package(n)
		assert.True(t, ok, n)
		assert.Equal(t, strategies.EtcdPackage, pkg, n)
	}
	src, err := os.ReadFile("../registry.go")
	require.NoError(t, err)
	assert.Contains(t, string(src), "\n//   - etcd-lease: ", "the strategies package's Closing section")
	var l locklab.Locker = newLock(t, sharedClient(t), etcdlock.Options{})
	_, closer := l.(io.Closer)
	assert.True(t, closer)
}

func TestConfig(t *testing.T) {
	cli := sharedClient(t)
	l, err := strategies.New("etcd-lease", locklab.Config{Store: cli})
	require.NoError(t, err)
	assert.IsType(t, &etcdlock.LeaseLock{}, l)
	l, err = strategies.New("etcd-lease", locklab.Config{Store: cli, Watchdog: true})
	require.NoError(t, err)
	l.(*etcdlock.LeaseLock).Close()

	for name, cfg := range map[string]locklab.Config{
		"no store":      {},
		"another store": {Store: struct{}{}},
		"nil client":    {Store: (*clientv3.Client)(nil)},
		"a pool too":    {Store: cli, Pool: locklab.NewPool("127.0.0.1:1")},
		"notify":        {Store: cli, Notify: true},
	} {
		_, err := strategies.New("etcd-lease", cfg)
		require.ErrorIs(t, err, locklab.ErrInvalid, name)
	}
	_, err = etcdlock.New(nil, etcdlock.Options{})
	require.ErrorIs(t, err, locklab.ErrInvalid)
	_, err = etcdlock.New(cli, etcdlock.Options{Timeout: -time.Second})
	require.ErrorIs(t, err, locklab.ErrInvalid)
}

func TestAcquireRelease(t *testing.T) {
	t.Parallel()
	ctx, cli := testCtx(t), sharedClient(t)
	clk := newClock()
	a := newLock(t, cli, etcdlock.Options{Clock: clk})
	b := newLock(t, cli, etcdlock.Options{Clock: clk})
	k := key(t)

	lease, err := a.Acquire(ctx, k, 30*time.Second)
	require.NoError(t, err)
	assert.Equal(t, k, lease.Key)
	assert.True(t, strings.HasPrefix(lease.Token, etcdlock.Prefix(k)+"/"), lease.Token)
	assert.Positive(t, lease.Fence)
	assert.Equal(t, clk.Now().Add(30*time.Second), lease.Until)
	resp, err := cli.Get(ctx, lease.Token)
	require.NoError(t, err)
	require.Len(t, resp.Kvs, 1)
	assert.Equal(t, lease.Fence, resp.Kvs[0].CreateRevision, "the fence is the key's create revision")
	id := clientv3.LeaseID(resp.Kvs[0].Lease)
	ttl, err := cli.TimeToLive(ctx, id)
	require.NoError(t, err)
	assert.EqualValues(t, 30, ttl.GrantedTTL, "the key carries a lease of the TTL")

	_, err = b.Acquire(ctx, k, 30*time.Second)
	require.ErrorIs(t, err, locklab.ErrNotAcquired)
	assert.NotErrorIs(t, err, locklab.ErrUnavailable)
	assert.Contains(t, err.Error(), k, "the refusal names the key")
	_, err = a.Acquire(ctx, k, 30*time.Second)
	require.ErrorIs(t, err, locklab.ErrNotAcquired, "no re-entry")
	assert.Equal(t, []string{lease.Token}, holders(t, cli, k), "refused attempts leave no key")

	require.NoError(t, a.Release(ctx, lease))
	assert.Empty(t, holders(t, cli, k))
	ttl, err = cli.TimeToLive(ctx, id)
	require.NoError(t, err)
	assert.EqualValues(t, -1, ttl.TTL, "the lease is revoked")
	require.ErrorIs(t, a.Release(ctx, lease), locklab.ErrNotHeld, "a second release")

	again, err := b.Acquire(ctx, k, 30*time.Second)
	require.NoError(t, err, "free after release")
	assert.Greater(t, again.Fence, lease.Fence)
	require.NoError(t, a.Release(ctx, again), "any LeaseLock on the cluster releases a lease")
}

func TestBadInput(t *testing.T) {
	t.Parallel()
	ctx, cli := testCtx(t), sharedClient(t)
	clk := newClock()
	l := newLock(t, cli, etcdlock.Options{Clock: clk})
	k := key(t)
	for _, ttl := range []time.Duration{0, -time.Second, time.Millisecond, 999 * time.Millisecond} {
		_, err := l.Acquire(ctx, k, ttl)
		require.ErrorIs(t, err, locklab.ErrInvalid, "ttl %v", ttl)
	}
	_, err := l.Acquire(ctx, "", time.Minute)
	require.ErrorIs(t, err, locklab.ErrInvalid)
	assert.Empty(t, holders(t, cli, k), "nothing written")

	require.ErrorIs(t, l.Release(ctx, locklab.Lease{}), locklab.ErrInvalid)
	for _, bad := range []locklab.Lease{
		{Key: k, Token: "elsewhere/1", Fence: 5},
		{Key: k, Token: etcdlock.Prefix(k) + "/zz", Fence: 5},
		{Key: k, Token: etcdlock.Prefix(k) + "/1"},
	} {
		require.ErrorIs(t, l.Release(ctx, bad), locklab.ErrInvalid, "%+v", bad)
		_, err := l.Extend(ctx, bad, time.Minute)
		require.ErrorIs(t, err, locklab.ErrInvalid, "%+v", bad)
	}

	// 1.5s is a 2s lease; Until keeps the 1.5s asked for.
	lease, err := l.Acquire(ctx, k, 1500*time.Millisecond)
	require.NoError(t, err)
	assert.Equal(t, clk.Now().Add(1500*time.Millisecond), lease.Until)
	ttl, err := cli.TimeToLive(ctx, leaseOf(t, cli, lease))
	require.NoError(t, err)
	assert.EqualValues(t, 2, ttl.GrantedTTL)
	_, err = l.Extend(ctx, lease, 500*time.Millisecond)
	require.ErrorIs(t, err, locklab.ErrInvalid)
	require.NoError(t, l.Release(ctx, lease))

	secs, err := etcdlock.LeaseSeconds(time.Second)
	require.NoError(t, err)
	assert.EqualValues(t, 1, secs)
	secs, err = etcdlock.LeaseSeconds(time.Second + time.Nanosecond)
	require.NoError(t, err)
	assert.EqualValues(t, 2, secs)
	_, err = etcdlock.LeaseSeconds(1<<63 - 1)
	require.ErrorIs(t, err, locklab.ErrInvalid)
}

// TestPrefixEscaped: locks "a" and "a/b" are independent, where etcd's
// recipe, taking the key as its prefix, makes "a" wait for "a/b".
func TestPrefixEscaped(t *testing.T) {
	t.Parallel()
	ctx, cli := testCtx(t), sharedClient(t)
	l := newLock(t, cli, etcdlock.Options{})
	parent := key(t) + "/a"
	child := parent + "/b"
	assert.Equal(t, strings.ReplaceAll(child, "/", "%2F"), etcdlock.Prefix(child))
	assert.Equal(t, "100%25", etcdlock.Prefix("100%"))

	held, err := l.Acquire(ctx, child, time.Minute)
	require.NoError(t, err)
	other, err := l.Acquire(ctx, parent, time.Minute)
	require.NoError(t, err, "the parent's lock is another lock")
	require.NoError(t, l.Release(ctx, other))

	// The same keys unescaped: the child's holder blocks the parent.
	sess, err := concurrency.NewSession(cli, concurrency.WithTTL(60))
	require.NoError(t, err)
	defer sess.Close()
	m := concurrency.NewMutex(sess, parent)
	put, err := cli.Grant(ctx, 60)
	require.NoError(t, err)
	defer cli.Revoke(ctx, put.ID)
	_, err = cli.Put(ctx, child+"/1", "", clientv3.WithLease(put.ID))
	require.NoError(t, err)
	require.ErrorIs(t, m.TryLock(ctx), concurrency.ErrLocked, "the unescaped recipe counts the child's key as a holder")
	require.NoError(t, l.Release(ctx, held))
}

func TestFencesGrow(t *testing.T) {
	t.Parallel()
	ctx, cli := testCtx(t), sharedClient(t)
	ls := []*etcdlock.LeaseLock{newLock(t, cli, etcdlock.Options{}), newLock(t, cli, etcdlock.Options{})}
	k, other := key(t), key(t)+":other"
	var last int64
	for i := range 6 {
		l := ls[i%2]
		lease, err := l.Acquire(ctx, k, time.Minute)
		require.NoError(t, err)
		assert.Greater(t, lease.Fence, last, "holder %d", i)
		last = lease.Fence
		o, err := l.Acquire(ctx, other, time.Minute) // another lock's writes in between
		require.NoError(t, err)
		require.NoError(t, l.Release(ctx, lease))
		require.NoError(t, l.Release(ctx, o))
	}
}

// TestClientAgainstServer: the parts of the client the concurrency
// package uses work against the etcd the tests run (Debian's 3.4, older
// than the client): a watch delivers a deletion, and a Mutex.Lock waiting
// behind this strategy's holder (a watch on its predecessor) returns once
// the holder releases.
func TestClientAgainstServer(t *testing.T) {
	t.Parallel()
	ctx, cli := testCtx(t), sharedClient(t)
	l := newLock(t, cli, etcdlock.Options{})
	k := key(t)
	held, err := l.Acquire(ctx, k, time.Minute)
	require.NoError(t, err)

	wctx, stop := context.WithCancel(ctx)
	defer stop()
	watch := cli.Watch(wctx, held.Token, clientv3.WithRev(held.Fence))
	sess, err := concurrency.NewSession(cli, concurrency.WithTTL(60))
	require.NoError(t, err)
	defer sess.Close()
	waiter := concurrency.NewMutex(sess, etcdlock.Prefix(k))
	locked := make(chan error, 1)
	go func() { locked <- waiter.Lock(ctx) }()
	for len(holders(t, cli, k)) < 2 {
		select {
		case err := <-locked:
			t.Fatalf("Lock returned while the lock was held: %v", err)
		case <-time.After(10 * time.Millisecond):
		}
	}
	select {
	case err := <-locked:
		t.Fatalf("Lock returned while the lock was held: %v", err)
	default:
	}

	require.NoError(t, l.Release(ctx, held))
	require.NoError(t, <-locked, "the waiter's watch saw its predecessor go")
	assert.Equal(t, []string{waiter.Key()}, holders(t, cli, k))
	var events []string
	for len(events) < 2 {
		resp := <-watch
		require.NoError(t, resp.Err())
		for _, ev := range resp.Events {
			events = append(events, ev.Type.String())
		}
	}
	assert.Equal(t, []string{"PUT", "DELETE"}, events, "the lock key's history, from its create revision")
	require.NoError(t, waiter.Unlock(ctx))
}
