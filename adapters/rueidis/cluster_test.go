package rueidis_test

import (
	"context"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	redigo "github.com/gomodule/redigo/redis"
	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/locklab/locklab"
	locklabrueidis "github.com/locklab/locklab/adapters/rueidis"
	"github.com/locklab/locklab/internal/tooling/redisproc"
	"github.com/locklab/locklab/internal/tooling/redistest"
	"github.com/locklab/locklab/strategies"
	"github.com/locklab/locklab/strategies/strategytest"
)

// shared is the Redis Cluster of the package's tests, started by the first
// that needs it; TestMain closes it.
var shared struct {
	once sync.Once
	c    *redisproc.Cluster
	err  error
}

// cluster returns the shared cluster once it is ready (a test that stopped
// a node has resumed it), with no keys.
func cluster(t *testing.T) *redisproc.Cluster {
	t.Helper()
	shared.once.Do(func() { shared.c, shared.err = redisproc.StartCluster(redisproc.ClusterOptions{}) })
	require.NoError(t, shared.err)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(t, shared.c.WaitReady(ctx))
	require.NoError(t, shared.c.FlushAll(ctx))
	return shared.c
}

// Every strategy that can run on a Redis Cluster passes the conformance
// suite through rueidis's cluster client on three masters with a replica
// each; the others are refused.
func TestClusterConformance(t *testing.T) {
	cl := cluster(t)
	src := locklabrueidis.New(newClient(t, cl.Addrs()...))
	assert.True(t, src.RedisCluster())
	one := redistest.StartOne(t)
	assert.False(t, locklabrueidis.New(newClient(t, one.Addr)).RedisCluster())
	strategytest.RunCluster(t, func() locklab.ConnSource { return src })
}

func newClient(tb testing.TB, addrs ...string) rueidis.Client {
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: addrs, DisableCache: true})
	require.NoError(tb, err)
	tb.Cleanup(c.Close)
	return c
}

// set-nx-px-wait's WAIT waits for the acquire's own write on the key's
// master: with the replica of one master stopped, every acquire of a key
// that master serves fails, eight clients at once, while the keys of the
// other masters are acknowledged; on one server with its replica stopped,
// every acquire fails too. (Sent through the client as any command, WAIT
// went to a random node, or waited for another connection's writes, and
// acknowledged locks no replica had.)
func TestWaitFollowsTheWrite(t *testing.T) {
	ctx := context.Background()
	cl := cluster(t)
	cc := newClient(t, cl.Addrs()...)
	master := redistest.StartOne(t)
	replica := redistest.StartReplica(t, master)
	one := newClient(t, master.Addr)

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
		{"cluster", locklabrueidis.New(cc), func() error { return stopped.Signal(syscall.SIGSTOP) }, func() error { return stopped.Signal(syscall.SIGCONT) },
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
		{"one server", locklabrueidis.New(one), func() error { return replica.Signal(syscall.SIGSTOP) }, func() error { return replica.Signal(syscall.SIGCONT) },
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

// On a cluster a transaction runs on the master of its first key, a MULTI
// sent before it included; a key of another slot fails the transaction
// instead of running elsewhere, and the source goes on working.
func TestClusterTransaction(t *testing.T) {
	ctx := context.Background()
	cl := cluster(t)
	src := locklabrueidis.New(newClient(t, cl.Addrs()...))
	do := func(c redigo.Conn, cmd string, args ...any) (any, error) {
		return redigo.DoContext(c, ctx, cmd, args...)
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
