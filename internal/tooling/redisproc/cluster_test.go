package redisproc

import (
	"context"
	"net"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A cluster of three masters and three replicas serves every slot, each
// master with one replica in sync; a write on a key's master reaches its
// replica; killing that master promotes the replica, which has the key;
// Close removes every process and directory.
func TestCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts six servers and waits for a failover")
	}
	c, err := StartCluster(ClusterOptions{})
	require.NoError(t, err)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	require.Len(t, c.Nodes, 6)
	require.Len(t, c.Addrs(), 6)
	masters, replicas, err := c.Roles(ctx)
	require.NoError(t, err)
	require.Len(t, masters, 3)
	for _, m := range masters {
		require.Len(t, replicas[m], 1, "master %s", m.Addr)
		assert.NotContains(t, masters, replicas[m][0])
	}
	for _, nd := range c.Nodes {
		ci, err := c.info(ctx, nd, "cluster-info")
		require.NoError(t, err)
		assert.Equal(t, "ok", ci["cluster_state"], nd.Addr)
		assert.Equal(t, "16384", ci["cluster_slots_assigned"], nd.Addr)
		assert.Equal(t, "6", ci["cluster_known_nodes"], nd.Addr)
	}

	// orders:42's master takes the write; the others redirect it.
	slot, err := c.KeySlot(ctx, "orders:42")
	require.NoError(t, err)
	assert.Equal(t, 11414, slot, "CRC16 of orders:42 mod 16384")
	master, err := c.MasterOf(ctx, slot)
	require.NoError(t, err)
	for _, m := range masters {
		_, err := c.do(ctx, m, "SET", "orders:42", "x")
		if m == master {
			require.NoError(t, err)
		} else {
			require.ErrorContains(t, err, "MOVED 11414 "+master.Addr)
		}
	}
	conn, err := redis.Dial("tcp", master.Addr)
	require.NoError(t, err)
	defer conn.Close()
	_, err = conn.Do("SET", "orders:42", "held")
	require.NoError(t, err)
	acked, err := redis.Int(conn.Do("WAIT", 1, 5000))
	require.NoError(t, err)
	require.Equal(t, 1, acked, "the replica acknowledges")

	replica := replicas[master][0]
	promoted, err := c.KillMaster(ctx, master)
	require.NoError(t, err)
	assert.Equal(t, replica, promoted)
	assert.NotContains(t, c.Addrs(), master.Addr)
	now, err := c.MasterOf(ctx, slot)
	require.NoError(t, err)
	assert.Equal(t, promoted, now)
	v, err := redis.String(c.do(ctx, promoted, "GET", "orders:42"))
	require.NoError(t, err)
	assert.Equal(t, "held", v, "the promoted replica has the acknowledged write")

	require.NoError(t, c.FlushAll(ctx))
	n, err := redis.Int(c.do(ctx, promoted, "DBSIZE"))
	require.NoError(t, err)
	assert.Zero(t, n, "FLUSHALL reached the promoted master")

	// The old master comes back as a replica of the one that took over.
	require.NoError(t, c.Restart(master))
	require.NoError(t, c.WaitReady(ctx))
	_, replicas, err = c.Roles(ctx)
	require.NoError(t, err)
	assert.Equal(t, []*ClusterNode{master}, replicas[promoted])

	dirs := []string{}
	pids := []int{}
	for _, nd := range c.Nodes {
		dirs = append(dirs, nd.Dir)
		pids = append(pids, nd.Pid())
	}
	c.Close()
	for i, d := range dirs {
		assert.NoDirExists(t, d)
		assert.ErrorIs(t, syscall.Kill(pids[i], 0), syscall.ESRCH, "process %d still runs", pids[i])
	}
}

// A cluster node whose bus port is taken between its choice and the
// server's bind (by any socket of the machine) starts on another: each try
// chooses the bus port again, and Restart keeps the one that worked.
func TestClusterBusTakenIsChosenAgain(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer taken.Close()
	busy := taken.Addr().(*net.TCPAddr).Port
	calls := 0
	freePort = func() (int, error) {
		calls++
		if calls == 1 {
			return busy, nil
		}
		return FreePort()
	}
	t.Cleanup(func() { freePort = FreePort })

	s, err := Start(Options{Args: []string{"--cluster-enabled", "yes"}, ClusterBus: true})
	require.NoError(t, err)
	defer s.Stop()
	assert.Equal(t, 2, calls, "a second bus port after the first try failed")
	assert.NotEqual(t, busy, s.BusPort)
	clusterPort := func() string {
		conn, err := redis.Dial("tcp", s.Addr)
		require.NoError(t, err)
		defer conn.Close()
		kv, err := redis.StringMap(conn.Do("CONFIG", "GET", "cluster-port"))
		require.NoError(t, err)
		return kv["cluster-port"]
	}
	assert.Equal(t, strconv.Itoa(s.BusPort), clusterPort())

	require.NoError(t, s.Restart())
	assert.Equal(t, strconv.Itoa(s.BusPort), clusterPort(), "Restart keeps the bus port")
}
