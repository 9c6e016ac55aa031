package locklab_test

import (
	"context"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/internal/tooling/redistest"
	"github.com/locklab/locklab/strategies"
)

func TestNewSentinelPoolInvalid(t *testing.T) {
	for _, o := range []locklab.SentinelOptions{
		{Sentinels: []string{"h:1"}},
		{MasterName: "m"},
		{MasterName: "m", Sentinels: []string{"no-port"}},
		{MasterName: "m", Sentinels: []string{"h:1"}, Master: locklab.PoolOptions{Addr: "h:2"}},
		{MasterName: "m", Sentinels: []string{"h:1"}, SentinelUsername: "u"},
		{MasterName: "m", Sentinels: []string{"h:1"}, Refresh: -time.Second},
		{MasterName: "m", Sentinels: []string{"h:1"}, Master: locklab.PoolOptions{DB: -1}},
	} {
		_, err := locklab.NewSentinelPool(o)
		assert.ErrorIs(t, err, locklab.ErrInvalid, "%+v", o)
	}
}

// TestSentinelPoolFollowsFailover: a lock through a SentinelPool lands on
// the master the Sentinels name; after a failover it lands on the promoted
// replica, with no other help.
func TestSentinelPoolFollowsFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("a real Sentinel failover takes seconds of Sentinel's own timing; make test-long runs it")
	}
	g := redistest.StartSentinelGroup(t, "locks")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	// A dead Sentinel first in the list: the next ones answer.
	sentinels := append([]string{deadAddr(t)}, g.SentinelAddrs()...)
	// No periodic refresh within the test: the pool follows the failover
	// because its connections to the old master fail or answer READONLY.
	src, err := locklab.NewSentinelPool(locklab.SentinelOptions{MasterName: "locks", Sentinels: sentinels, Refresh: time.Hour})
	require.NoError(t, err)
	defer src.Close()
	l, err := strategies.New("set-nx-px", locklab.Config{Pool: src})
	require.NoError(t, err)

	lease, err := l.Acquire(ctx, "orders:1", time.Minute)
	require.NoError(t, err)
	assert.Equal(t, g.Master.Addr, src.MasterAddr())
	assert.Equal(t, int64(1), g.Master.Do(t, "EXISTS", "orders:1"))
	require.NoError(t, l.Release(ctx, lease))

	// A forced failover: a replica becomes the master.
	old := g.MasterAddr(t)
	g.Sentinels[0].Do(t, "SENTINEL", "FAILOVER", "locks")
	var promoted string
	for promoted = g.MasterAddr(t); promoted == old; promoted = g.MasterAddr(t) {
		require.NoError(t, ctx.Err(), "no failover within a minute")
		time.Sleep(50 * time.Millisecond)
	}
	newMaster := g.Server(promoted)
	require.NotNil(t, newMaster, "the promoted server %s is one of the replicas", promoted)
	// Until Sentinel reconfigures it, the old master still takes writes
	// (the window a lock can be lost in): wait for its demotion.
	for role(t, g.Master.Addr) != "slave" {
		require.NoError(t, ctx.Err(), "old master not demoted within a minute")
		time.Sleep(50 * time.Millisecond)
	}

	lease, err = locklab.Wait(ctx, l, "orders:2", time.Minute, locklab.RetryPolicy{Initial: 10 * time.Millisecond, Max: 200 * time.Millisecond})
	require.NoError(t, err, "the lock is taken on the new master")
	assert.Equal(t, promoted, src.MasterAddr())
	// A fresh connection: Sentinel killed the clients of the promoted
	// replica, the test pool's idle one among them.
	c, err := redis.Dial("tcp", newMaster.Addr)
	require.NoError(t, err)
	n, err := redis.Int(c.Do("EXISTS", "orders:2"))
	c.Close()
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	require.NoError(t, l.Release(ctx, lease))

	// A master name the Sentinels do not know.
	unknown, err := locklab.NewSentinelPool(locklab.SentinelOptions{MasterName: "nope", Sentinels: g.SentinelAddrs()})
	require.NoError(t, err)
	defer unknown.Close()
	_, err = unknown.GetContext(ctx)
	assert.ErrorIs(t, err, locklab.ErrUnavailable)
	assert.ErrorContains(t, err, `knows no master named "nope"`)
}

// deadAddr is a loopback address nothing listens on.
func deadAddr(t *testing.T) string {
	t.Helper()
	s := redistest.StartOne(t)
	addr := s.Addr
	s.Stop()
	return addr
}

// role is ROLE's first field on the server at addr, over a fresh connection,
// or "" when it does not answer (Sentinel kills the clients of a server it
// reconfigures).
func role(t *testing.T, addr string) string {
	t.Helper()
	c, err := redis.Dial("tcp", addr)
	if err != nil {
		return ""
	}
	defer c.Close()
	v, err := redis.Values(c.Do("ROLE"))
	if err != nil || len(v) == 0 {
		return ""
	}
	r, _ := redis.String(v[0], nil)
	return r
}
