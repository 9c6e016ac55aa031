package adaptertest

import (
	"context"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/internal/tooling/redisproc"
	"github.com/locklab/locklab/internal/tooling/redistest"
	"github.com/locklab/locklab/strategies"
	"github.com/locklab/locklab/strategies/strategytest"
)

// NewClusterSource returns a ConnSource of the adapter over a new cluster
// client of its library on the Redis Cluster whose nodes are at addrs
// ("host:port"). It closes the client when tb ends.
type NewClusterSource func(tb testing.TB, addrs []string) locklab.ConnSource

// Cluster is the Redis Cluster an adapter's cluster tests share, started
// by the first that needs it. The package's TestMain closes it.
type Cluster struct {
	once sync.Once
	c    *redisproc.Cluster
	err  error
}

// get returns the cluster once it is ready (a test that stopped a node has
// resumed it), with no keys.
func (s *Cluster) get(t *testing.T) *redisproc.Cluster {
	t.Helper()
	s.once.Do(func() { s.c, s.err = redisproc.StartCluster(redisproc.ClusterOptions{}) })
	require.NoError(t, s.err)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(t, s.c.WaitReady(ctx))
	require.NoError(t, s.c.FlushAll(ctx))
	return s.c
}

// Close stops the cluster's servers, if it was started.
func (s *Cluster) Close() {
	if s.c != nil {
		s.c.Close()
	}
}

// RunCluster runs the suite of an adapter on a Redis Cluster, shared: the
// conformance suite through its cluster client, WAIT on the write's own
// master, and transactions on the master of their key.
func RunCluster(t *testing.T, shared *Cluster, newSource NewSource, newCluster NewClusterSource) {
	t.Run("Conformance", func(t *testing.T) { ClusterConformance(t, shared, newSource, newCluster) })
	t.Run("WaitFollowsTheWrite", func(t *testing.T) { WaitFollowsTheWrite(t, shared, newSource, newCluster) })
	t.Run("Transaction", func(t *testing.T) { ClusterTransaction(t, shared, newCluster) })
}

// clusterAware is an adapter's source that tells whether its client is a
// cluster client.
type clusterAware interface{ RedisCluster() bool }

// ClusterConformance: every strategy that can run on a Redis Cluster passes
// the conformance suite through the adapter's cluster client on three
// masters with a replica each; the others are refused. The source says it
// is on a cluster, and one on a single server says it is not.
func ClusterConformance(t *testing.T, shared *Cluster, newSource NewSource, newCluster NewClusterSource) {
	cl := shared.get(t)
	onCluster := func(src locklab.ConnSource) bool {
		ca, ok := src.(clusterAware)
		require.True(t, ok, "%T has no RedisCluster method", src)
		return ca.RedisCluster()
	}
	src := newCluster(t, cl.Addrs())
	assert.True(t, onCluster(src))
	one := redistest.StartOne(t)
	assert.False(t, onCluster(newSource(t, one.Addr)))
	strategytest.RunCluster(t, func() locklab.ConnSource { return src })
}

// WaitFollowsTheWrite: set-nx-px-wait's WAIT waits for the acquire's own
// write on the key's master. With the replica of one master stopped, every
// acquire of a key that master serves fails, eight clients at once, while
// the keys of the other masters are acknowledged; on one server with its
// replica stopped, every acquire fails too. (Sent through the client as
// any command, WAIT went to a random node, or waited for another
// connection's writes, and acknowledged locks no replica had.)
func WaitFollowsTheWrite(t *testing.T, shared *Cluster, newSource NewSource, newCluster NewClusterSource) {
	ctx := context.Background()
	cl := shared.get(t)
	master := redistest.StartOne(t)
	replica := redistest.StartReplica(t, master)

	slot := redistest.KeySlot(t, cl, "orders:42")
	m, err := cl.MasterOf(ctx, slot)
	require.NoError(t, err)
	_, replicas, err := cl.Roles(ctx)
	require.NoError(t, err)
	stopped := replicas[m][0]

	for _, tc := range []struct {
		name      string
		src       locklab.ConnSource
		stop      func() error
		resume    func() error
		stuck     func(i int) string
		unstopped func(i int) string
	}{
		{"cluster", newCluster(t, cl.Addrs()), func() error { return stopped.Signal(syscall.SIGSTOP) }, func() error { return stopped.Signal(syscall.SIGCONT) },
			func(i int) string { return "{orders:42}:" + strconv.Itoa(i) },
			func(i int) string {
				for j := i * 1000; ; j++ {
					if k := "k" + strconv.Itoa(j); redistest.KeySlot(t, cl, k) != slot {
						mk, err := cl.MasterOf(ctx, redistest.KeySlot(t, cl, k))
						require.NoError(t, err)
						if mk != m {
							return k
						}
					}
				}
			}},
		{"one server", newSource(t, master.Addr), func() error { return replica.Signal(syscall.SIGSTOP) }, func() error { return replica.Signal(syscall.SIGCONT) },
			func(i int) string { return "w:" + strconv.Itoa(i) }, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, err := strategies.New("set-nx-px-wait", locklab.Config{Pool: tc.src})
			require.NoError(t, err)
			lease, err := l.Acquire(ctx, tc.stuck(-1), 2*time.Second)
			require.NoError(t, err, "acknowledged while the replica runs")
			require.NoError(t, l.Release(ctx, lease))

			require.NoError(t, tc.stop())
			defer tc.resume()
			var wg sync.WaitGroup
			for i := range 8 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for j := range 3 {
						k := tc.stuck(i*10 + j)
						_, err := l.Acquire(ctx, k, time.Second)
						assert.ErrorIs(t, err, locklab.ErrUnavailable, "%s: acknowledged with its replica stopped", k)
						if tc.unstopped != nil {
							k := tc.unstopped(i*10 + j)
							lease, err := l.Acquire(ctx, k, 2*time.Second)
							if assert.NoError(t, err, "%s: its master's replica runs", k) {
								assert.NoError(t, l.Release(ctx, lease))
							}
						}
					}
				}()
			}
			wg.Wait()
		})
	}
}

// ClusterTransaction: on a cluster a transaction runs on the master of its
// first key, a MULTI sent before it included; a key of another slot fails
// the transaction instead of running elsewhere, and the source goes on
// working.
func ClusterTransaction(t *testing.T, shared *Cluster, newCluster NewClusterSource) {
	ctx := context.Background()
	cl := shared.get(t)
	src := newCluster(t, cl.Addrs())
	do := func(c redis.Conn, cmd string, args ...any) (any, error) {
		return redis.DoContext(c, ctx, cmd, args...)
	}
	for range 3 {
		c, err := src.GetContext(ctx)
		require.NoError(t, err)
		v, err := do(c, "MULTI")
		require.NoError(t, err)
		assert.Equal(t, "OK", v)
		for _, k := range []string{"{orders:42}:a", "{orders:42}:b"} {
			v, err = do(c, "INCR", k)
			require.NoError(t, err)
			assert.Equal(t, "QUEUED", v)
		}
		v, err = do(c, "EXEC")
		require.NoError(t, err)
		assert.Len(t, v, 2)
		require.NoError(t, c.Close())
	}
	c, err := src.GetContext(ctx)
	require.NoError(t, err)
	v, err := do(c, "GET", "{orders:42}:b")
	require.NoError(t, err)
	assert.Equal(t, []byte("3"), v)

	require.NotEqual(t, redistest.KeySlot(t, cl, "users:7"), redistest.KeySlot(t, cl, "orders:42"))
	_, err = do(c, "MULTI")
	require.NoError(t, err)
	_, err = do(c, "INCR", "orders:42")
	require.NoError(t, err)
	_, err1 := do(c, "INCR", "users:7")
	_, err2 := do(c, "EXEC")
	assert.True(t, err1 != nil || err2 != nil, "a transaction across slots fails")
	require.NoError(t, c.Close())
	c, err = src.GetContext(ctx)
	require.NoError(t, err)
	defer c.Close()
	_, err = do(c, "MULTI")
	require.NoError(t, err)
	v, err = do(c, "EXEC")
	require.NoError(t, err)
	assert.Equal(t, []any{}, v, "a transaction without keys runs on a master")
	n, err := do(c, "EXISTS", "orders:42", "{orders:42}:a")
	require.NoError(t, err)
	assert.Equal(t, int64(1), n, "the failed transaction wrote nothing")
}
