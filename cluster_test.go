package locklab_test

import (
	"context"
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

func TestNewClusterPoolInvalid(t *testing.T) {
	for _, o := range []locklab.ClusterOptions{
		{},
		{Addrs: []string{"nohost"}},
		{Addrs: []string{"127.0.0.1:1"}, Node: locklab.PoolOptions{DB: 1}},
		{Addrs: []string{"127.0.0.1:1"}, Node: locklab.PoolOptions{Username: "u"}},
	} {
		_, err := locklab.NewClusterPool(o)
		assert.ErrorIs(t, err, locklab.ErrInvalid, "%+v", o)
	}
	// Nothing listens on port 1: no slot map.
	_, err := locklab.NewClusterPool(locklab.ClusterOptions{Addrs: []string{"127.0.0.1:1"}})
	assert.ErrorIs(t, err, locklab.ErrUnavailable)
}

// Every strategy that can run on a Redis Cluster passes the conformance
// suite through a ClusterPool; the others are refused.
func TestClusterPoolConformance(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Redis Cluster")
	}
	cl := redistest.StartCluster(t)
	p, err := locklab.NewClusterPool(locklab.ClusterOptions{Addrs: cl.Addrs()})
	require.NoError(t, err)
	t.Cleanup(func() { p.Close() })
	strategytest.RunCluster(t, func() locklab.ConnSource { return p })
}

// After the master of a key's slot is killed and its replica promoted,
// the pool's clients find the new master by themselves: the dead node
// sends no MOVED, the pool reads the slot map again.
func TestClusterPoolFollowsFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Redis Cluster and waits for a failover")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl := redistest.StartClusterOptions(t, redisproc.ClusterOptions{NodeTimeout: 500 * time.Millisecond})
	p, err := locklab.NewClusterPool(locklab.ClusterOptions{Addrs: cl.Addrs()})
	require.NoError(t, err)
	t.Cleanup(func() { p.Close() })
	l, err := strategies.New("set-nx-px", locklab.Config{Pool: p})
	require.NoError(t, err)
	lease, err := l.Acquire(ctx, "orders:42", time.Minute)
	require.NoError(t, err)
	require.NoError(t, l.Release(ctx, lease))

	// A MULTI before any key runs on the key's master.
	c, err := p.GetContext(ctx)
	require.NoError(t, err)
	_, err = c.Do("MULTI")
	require.NoError(t, err)
	_, err = c.Do("SET", "{orders:42}:multi", "x")
	require.NoError(t, err)
	v, err := redis.Values(c.Do("EXEC"))
	require.NoError(t, err)
	assert.Equal(t, []any{"OK"}, v)
	c.Close()

	master, err := cl.MasterOf(ctx, redistest.KeySlot(t, cl, "orders:42"))
	require.NoError(t, err)
	promoted, err := cl.KillMaster(ctx, master)
	require.NoError(t, err)
	t0 := time.Now()
	for {
		lease, err = l.Acquire(ctx, "orders:42", time.Minute)
		if err == nil {
			break
		}
		require.NoError(t, ctx.Err(), "no acquire after the failover: %v", err)
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("acquired through %s %v after the failover", promoted.Addr, time.Since(t0).Round(time.Millisecond))
	assert.Greater(t, lease.Fence, int64(0))
	conn, err := redis.Dial("tcp", promoted.Addr)
	require.NoError(t, err)
	defer conn.Close()
	n, err := redis.Int(conn.Do("EXISTS", "orders:42"))
	require.NoError(t, err)
	assert.Equal(t, 1, n, "the lock is on the promoted replica")
}
