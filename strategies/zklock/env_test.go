package zklock_test

import (
	"context"
	"net"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/stretchr/testify/require"

	"github.com/locklab/locklab"
)

// sessionTimeout is the session timeout the tests' clients ask for, long
// (the shared ensemble grants up to a minute, zktest.SharedConfig) so that
// a loaded machine neither expires a session nor drops a connection by
// accident: go-zookeeper gives up on a server silent for two thirds of
// it. A test that waits for an expiry dials with a short timeout of its
// own (dialTimeout).
const sessionTimeout = 30 * time.Second

// quiet is a zk.Logger that drops go-zookeeper's lines.
type quiet struct{}

func (quiet) Printf(string, ...any) {}

// wires are the wires of the tests' connections.
var wires sync.Map // *zk.Conn → *wire

// dial opens a connection to addrs through a wire of its own, with the
// tests' session timeout, closed when the test ends; it returns once the
// connection has its session.
func dial(t testing.TB, addrs []string) (*zk.Conn, *wire) {
	t.Helper()
	return dialTimeout(t, addrs, sessionTimeout)
}

func dialTimeout(t testing.TB, addrs []string, timeout time.Duration) (*zk.Conn, *wire) {
	t.Helper()
	w := newWire()
	conn, _, err := zk.Connect(addrs, timeout, zk.WithDialer(w.dial), zk.WithLogger(quiet{}), zk.WithLogInfo(false))
	require.NoError(t, err)
	t.Cleanup(conn.Close)
	wires.Store(conn, w)
	waitFor(t, "a session", func() bool { return conn.State() == zk.StateHasSession })
	return conn, w
}

// wireOf is the wire of a connection dial opened.
func wireOf(t testing.TB, conn *zk.Conn) *wire {
	t.Helper()
	w, ok := wires.Load(conn)
	require.True(t, ok, "a connection of dial's")
	return w.(*wire)
}

// expire ends conn's session as a second client can, from a connection
// of its own with the session's id and password (closeSession), while
// conn is cut off so that it cannot take its session back meanwhile; the
// server has deleted the session's ephemeral nodes once it returns. conn
// then finds its session expired at its next connect, and go-zookeeper
// opens a new one.
func expire(t testing.TB, addrs []string, conn *zk.Conn) {
	t.Helper()
	w := wireOf(t, conn)
	sid, passwd, _ := w.session()
	require.NotZero(t, sid)
	old := conn.SessionID()
	w.Cut()
	func() {
		defer w.Heal()
		closeSession(t, addrs[0], sid, passwd)
	}()
	// The connection reconnects by itself, finds its session gone and
	// opens a new one: a request before that finds no server (on a
	// loaded machine, well after the heal), where the tests ask what the
	// lock says of a session that ended.
	waitFor(t, "a new session", func() bool { return conn.State() == zk.StateHasSession && conn.SessionID() != old })
}

// partition cuts conn off the ensemble until the servers have expired its
// session, after its timeout, with no word from the client, as after a
// pause or a partition; conn is healed then, and reconnects to find its
// session expired. A marker, an ephemeral node of the session, tells a
// probe of the test's own when the session is gone.
func partition(t testing.TB, addrs []string, conn *zk.Conn) {
	t.Helper()
	w := wireOf(t, conn)
	marker := mark(t, conn)
	probe := probe(t, addrs)
	w.Cut()
	defer w.Heal()
	waitFor(t, "the session's expiry", func() bool {
		ok, _, err := probe.Exists(marker)
		require.NoError(t, err)
		return !ok
	})
}

// probe is a connection of the test's own that watches others from
// outside.
func probe(t testing.TB, addrs []string) *zk.Conn {
	t.Helper()
	conn, _, err := zk.Connect(addrs, sessionTimeout, zk.WithLogger(quiet{}), zk.WithLogInfo(false))
	require.NoError(t, err)
	t.Cleanup(conn.Close)
	return conn
}

// mark creates an ephemeral node of conn's session and returns its path.
func mark(t testing.TB, conn *zk.Conn) string {
	t.Helper()
	if _, err := conn.Create("/locklab-test-sessions", nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
		require.ErrorIs(t, err, zk.ErrNodeExists)
	}
	p := "/locklab-test-sessions/" + strconv.FormatInt(conn.SessionID(), 16)
	_, err := conn.Create(p, nil, zk.FlagEphemeral, zk.WorldACL(zk.PermAll))
	require.NoError(t, err)
	return p
}

// waitFor polls cond until it holds, failing the test after a minute.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(time.Minute); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("no %s after a minute", what)
		}
	}
}

// deadAddr is an address nothing listens on.
func deadAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}

// testCtx bounds a test's calls.
func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// keys counts the keys key made.
var keys atomic.Int64

// key is a key no other call uses, named after the running test.
func key(t testing.TB) string {
	return "locklab:test:" + t.Name() + ":" + strconv.FormatInt(keys.Add(1), 10)
}

// synced makes conn's server catch up with the leader, so that a read
// through conn that follows sees every write done before (ZooKeeper's
// reads are served by the client's own server, which may lag).
func synced(t testing.TB, conn *zk.Conn) *zk.Conn {
	t.Helper()
	_, err := conn.Sync("/")
	require.NoError(t, err)
	return conn
}

// children lists the nodes under p, sorted, as they are now; none when p
// does not exist.
func children(t testing.TB, conn *zk.Conn, p string) []string {
	t.Helper()
	cs, _, err := synced(t, conn).Children(p)
	if err == zk.ErrNoNode {
		return nil
	}
	require.NoError(t, err)
	slices.Sort(cs)
	return cs
}

// clock is a manual clock.
type clock struct{ ns atomic.Int64 }

func newClock() *clock {
	c := &clock{}
	c.ns.Store(time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	return c
}

func (c *clock) Now() time.Time { return time.Unix(0, c.ns.Load()) }

var _ locklab.Clock = (*clock)(nil)

// makePath takes the lock on k and releases it, so that its path exists.
func makePath(t testing.TB, ctx context.Context, l locklab.Locker, k string) {
	t.Helper()
	lease, err := l.Acquire(ctx, k, time.Minute)
	require.NoError(t, err)
	require.NoError(t, l.Release(ctx, lease))
}

// refusesLeases checks that Release and Extend refuse each of bad as no
// lease of l's.
func refusesLeases(t testing.TB, ctx context.Context, l locklab.Locker, bad ...locklab.Lease) {
	t.Helper()
	for _, lease := range bad {
		require.ErrorIs(t, l.Release(ctx, lease), locklab.ErrInvalid, "%+v", lease)
		_, err := locklab.Extend(ctx, l, lease, time.Minute)
		require.ErrorIs(t, err, locklab.ErrInvalid, "%+v", lease)
	}
}
