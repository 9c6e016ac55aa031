package setnxex_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/internal/tooling/redisproc"
	"github.com/locklab/locklab/internal/tooling/redistest"
	"github.com/locklab/locklab/strategies/setnxex"
)

// The keys of the issue, keys with their own hash tag, and the shapes of
// key whose slot no "{key}" tag keeps: an empty tag, a '}' with no tag.
var slotKeys = []string{
	"orders:42", "users:7", "{tag}:x", "{user:7}:lock", "a{b", "{a}", "x{y}z{w}",
	"a}b", "{}x", "x}{", "}", "{", "{}", "}{x}", "{}{x}", "a{}b{c}", "ключ:1", "{ключ}",
	"lock:stale-recovery", "{locklab:3f9a0c1d2e4b5a60}:lock:stale-recovery",
}

func TestFenceKeyNames(t *testing.T) {
	for key, want := range map[string]string{
		"orders:42":           "{orders:42}:locklab:fence",
		"lock:pause-past-ttl": "{lock:pause-past-ttl}:locklab:fence",
		"{user:7}:lock":       "{user:7}:lock:locklab:fence",
		"{locklab:3f9a0c1d2e4b5a60}:lock:stale-recovery": "{locklab:3f9a0c1d2e4b5a60}:lock:stale-recovery:locklab:fence",
		"a{b":  "{a{b}:locklab:fence",
		"{}x":  setnxex.FloorKey("{}x") + ":{}x:locklab:fence",
		"a}b":  setnxex.FloorKey("a}b") + ":a}b:locklab:fence",
		"{a}":  "{a}:locklab:fence",
		"a":    "{a}:locklab:fence", // the same counter as "{a}"'s
		"}{x}": "}{x}:locklab:fence",
	} {
		assert.Equal(t, want, setnxex.FenceKey(key), key)
	}
	// Slot is Redis Cluster's (the values are CLUSTER KEYSLOT's).
	assert.Equal(t, 11414, setnxex.Slot("orders:42"))
	assert.Equal(t, setnxex.Slot("tag"), setnxex.Slot("{tag}:x"))
	assert.Equal(t, 12739, setnxex.Slot("123456789")%16384) // CRC16-XMODEM check value 0x31C3
	assert.Regexp(t, `^\{locklab:floor:\d+\}$`, setnxex.FloorKey("orders:42"))
}

// On a cluster of three masters, each key's counter and floor hash to the
// key's slot (CLUSTER KEYSLOT says so), so set-nx-px's scripts run on the
// key's master, where the old global hash made them fail with CROSSSLOT.
// Fences grow per key across acquires, handoffs and a reclaim.
func TestFenceKeysShareTheSlotOnACluster(t *testing.T) {
	cl := redistest.StartCluster(t)
	ctx := context.Background()
	for _, key := range slotKeys {
		slot := redistest.KeySlot(t, cl, key)
		assert.Equal(t, slot, setnxex.Slot(key), "Slot(%q)", key)
		assert.Equal(t, slot, redistest.KeySlot(t, cl, setnxex.FenceKey(key)), "the counter %q of %q", setnxex.FenceKey(key), key)
		assert.Equal(t, slot, redistest.KeySlot(t, cl, setnxex.FloorKey(key)), "the floor %q of %q", setnxex.FloorKey(key), key)

		master, err := cl.MasterOf(ctx, slot)
		require.NoError(t, err)
		pool := locklab.NewPool(master.Addr)
		defer pool.Close()
		l, err := setnxex.NewSetNXPX(locklab.Config{Pool: pool})
		require.NoError(t, err)

		c := pool.Get()
		_, err = c.Do("EVAL", "return redis.call('hincrby', KEYS[2], KEYS[1], 1)", 2, key, setnxex.FenceHash)
		c.Close()
		if setnxex.Slot(key) != setnxex.Slot(setnxex.FenceHash) {
			require.ErrorContains(t, err, "CROSSSLOT", "the old global hash and %q", key)
		}

		var last int64
		lease, err := l.Acquire(ctx, key, time.Minute)
		require.NoError(t, err, key)
		assert.Greater(t, lease.Fence, last)
		last = lease.Fence
		lease, err = l.Handoff(ctx, lease, time.Minute)
		require.NoError(t, err, key)
		assert.Greater(t, lease.Fence, last)
		last = lease.Fence
		_, err = l.Acquire(ctx, key, time.Minute)
		require.ErrorIs(t, err, locklab.ErrNotAcquired)
		_, err = l.Extend(ctx, lease, time.Minute)
		require.NoError(t, err)
		require.NoError(t, l.Release(ctx, lease))
		n, err := setnxex.ReclaimFence(ctx, pool, key)
		require.NoError(t, err)
		assert.Equal(t, last, n)
		lease, err = l.Acquire(ctx, key, time.Minute)
		require.NoError(t, err, key)
		assert.Greater(t, lease.Fence, last, "after a reclaim")
		require.NoError(t, l.Release(ctx, lease))
	}
}

// A reclaimed counter is gone, its number kept in the slot's floor: the
// key's next fence, and the first of any new key of that slot, is above
// it; a key of another slot starts at 1; counters not reclaimed go on.
func TestReclaimFenceKeepsFencesGrowing(t *testing.T) {
	srv := redistest.StartOne(t)
	l, err := setnxex.NewSetNXPX(locklab.Config{Pool: srv.Pool})
	require.NoError(t, err)
	ctx := context.Background()
	cycle := func(key string) int64 {
		t.Helper()
		lease, err := l.Acquire(ctx, key, time.Minute)
		require.NoError(t, err)
		require.NoError(t, l.Release(ctx, lease))
		return lease.Fence
	}
	exists := func(k string) bool {
		n, err := redis.Int(srv.Do(t, "EXISTS", k), nil)
		require.NoError(t, err)
		return n == 1
	}
	const a, b, c, other = "{t}a", "{t}b", "{t}c", "{u}a"
	require.Equal(t, setnxex.FloorKey(a), setnxex.FloorKey(b))
	require.NotEqual(t, setnxex.FloorKey(a), setnxex.FloorKey(other))
	for want := int64(1); want <= 3; want++ {
		assert.Equal(t, want, cycle(a))
	}
	assert.Equal(t, int64(1), cycle(b))

	n, err := setnxex.ReclaimFence(ctx, srv.Pool, a)
	require.NoError(t, err)
	assert.Equal(t, int64(3), n)
	assert.False(t, exists(setnxex.FenceKey(a)), "the counter is deleted")
	floor, err := redis.Int64(srv.Do(t, "GET", setnxex.FloorKey(a)), nil)
	require.NoError(t, err)
	assert.Equal(t, int64(3), floor)
	n, err = setnxex.ReclaimFence(ctx, srv.Pool, a)
	require.NoError(t, err)
	assert.Zero(t, n, "no counter left")

	assert.Equal(t, int64(4), cycle(a), "above its last number")
	assert.Equal(t, int64(2), cycle(b), "a counter not reclaimed goes on")
	assert.Equal(t, int64(4), cycle(c), "a new key of the slot starts above the floor")
	assert.Equal(t, int64(1), cycle(other), "another slot's floor is its own")

	// A smaller counter reclaimed leaves the floor where it is.
	n, err = setnxex.ReclaimFence(ctx, srv.Pool, b)
	require.NoError(t, err)
	assert.Equal(t, int64(2), n)
	floor, err = redis.Int64(srv.Do(t, "GET", setnxex.FloorKey(a)), nil)
	require.NoError(t, err)
	assert.Equal(t, int64(3), floor)
	assert.Equal(t, int64(4), cycle(b))

	// Reclaiming while the lock is held: the holder's fence stays below
	// the next one, and a handoff draws above the floor.
	held, err := l.Acquire(ctx, a, time.Minute)
	require.NoError(t, err)
	assert.Equal(t, int64(5), held.Fence)
	_, err = setnxex.ReclaimFence(ctx, srv.Pool, a)
	require.NoError(t, err)
	next, err := l.Handoff(ctx, held, time.Minute)
	require.NoError(t, err)
	assert.Equal(t, int64(6), next.Fence)
	require.NoError(t, l.Release(ctx, next))

	_, err = setnxex.ReclaimFence(ctx, srv.Pool, "")
	require.ErrorIs(t, err, locklab.ErrInvalid)
}

// ReclaimFences reclaims every counter, and nothing else; fences go on
// growing, each key's from its slot's floor.
func TestReclaimFences(t *testing.T) {
	srv := redistest.StartOne(t)
	l, err := setnxex.NewSetNXPX(locklab.Config{Pool: srv.Pool})
	require.NoError(t, err)
	ctx := context.Background()
	keys := []string{"orders:42", "users:7", "{tag}:x", "a}b"}
	for i, k := range keys {
		for range 2 + i {
			lease, err := l.Acquire(ctx, k, time.Minute)
			require.NoError(t, err)
			require.NoError(t, l.Release(ctx, lease))
		}
	}
	held, err := l.Acquire(ctx, "users:7", time.Minute)
	require.NoError(t, err)
	assert.Equal(t, int64(4), held.Fence)
	srv.Do(t, "SET", "user:data:locklab:fence", "7") // a key of someone else's
	srv.Do(t, "SET", "other", "x")

	n, err := setnxex.ReclaimFences(ctx, srv.Pool)
	require.NoError(t, err)
	assert.Equal(t, 4, n)
	all, err := redis.Strings(srv.Do(t, "KEYS", "*"), nil)
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{"user:data:locklab:fence", "other", "users:7",
		setnxex.FloorKey("orders:42"), setnxex.FloorKey("users:7"), setnxex.FloorKey("{tag}:x"), setnxex.FloorKey("a}b")}, all)
	next, err := l.Handoff(ctx, held, time.Minute)
	require.NoError(t, err)
	assert.Equal(t, int64(5), next.Fence, "the holder's successor")
	require.NoError(t, l.Release(ctx, next))
	for i, k := range keys {
		if k == "users:7" {
			continue
		}
		lease, err := l.Acquire(ctx, k, time.Minute)
		require.NoError(t, err)
		assert.Equal(t, int64(3+i), lease.Fence, k)
		require.NoError(t, l.Release(ctx, lease))
	}
	n, err = setnxex.ReclaimFences(ctx, srv.Pool)
	require.NoError(t, err)
	assert.Equal(t, 4, n)
}

// MigrateFenceHash moves the counters of the old global hash so that no
// key's fence goes back: each counter becomes the larger number.
func TestMigrateFenceHash(t *testing.T) {
	srv := redistest.StartOne(t)
	l, err := setnxex.NewSetNXPX(locklab.Config{Pool: srv.Pool})
	require.NoError(t, err)
	ctx := context.Background()
	want := map[string]int64{}
	for i := range 2500 { // more than one HSCAN page
		k := "old:" + strconv.Itoa(i)
		srv.Do(t, "HSET", setnxex.FenceHash, k, 1000+i)
		want[k] = int64(1000 + i + 1)
	}
	srv.Do(t, "HSET", setnxex.FenceHash, "orders:42", 1556)
	want["orders:42"] = 1557
	srv.Do(t, "HSET", setnxex.FenceHash, "users:7", 3)
	srv.Do(t, "SET", setnxex.FenceKey("users:7"), 10) // drawn by the new version already
	want["users:7"] = 11

	n, err := setnxex.MigrateFenceHash(ctx, srv.Pool)
	require.NoError(t, err)
	assert.Equal(t, 2502, n)
	exists, err := redis.Int(srv.Do(t, "EXISTS", setnxex.FenceHash), nil)
	require.NoError(t, err)
	assert.Zero(t, exists, "the hash is empty")
	for k, fence := range want {
		lease, err := l.Acquire(ctx, k, time.Minute)
		require.NoError(t, err)
		require.Equal(t, fence, lease.Fence, k)
	}
	n, err = setnxex.MigrateFenceHash(ctx, srv.Pool)
	require.NoError(t, err)
	assert.Zero(t, n, "nothing left to move")
}

// What a counter costs: MEMORY USAGE of one counter, on a server alone and
// on a cluster node (which also indexes keys by slot), for a short key and
// a namespaced one. docs/fencing-and-watchdogs.md states these numbers.
func TestFenceCounterMemory(t *testing.T) {
	srv := redistest.StartOne(t)
	cl := redistest.StartClusterOptions(t, redisproc.ClusterOptions{Masters: 1, Replicas: -1})
	node := locklab.NewPool(cl.Nodes[0].Addr)
	defer node.Close()
	ctx := context.Background()
	for _, key := range []string{"orders:42", "{locklab:3f9a0c1d2e4b5a60}:lock:stale-recovery"} {
		for _, where := range []struct {
			name string
			pool *redis.Pool
		}{
			{"standalone", srv.Pool},
			{"cluster", node},
		} {
			l, err := setnxex.NewSetNXPX(locklab.Config{Pool: where.pool})
			require.NoError(t, err)
			for range 3 {
				lease, err := l.Acquire(ctx, key, time.Minute)
				require.NoError(t, err)
				require.NoError(t, l.Release(ctx, lease))
			}
			c := where.pool.Get()
			bytes, err := redis.Int(c.Do("MEMORY", "USAGE", setnxex.FenceKey(key), "SAMPLES", 0))
			c.Close()
			require.NoError(t, err)
			t.Logf("%s: counter %q (%d bytes of name): MEMORY USAGE %d bytes", where.name, setnxex.FenceKey(key), len(setnxex.FenceKey(key)), bytes)
			assert.Greater(t, bytes, len(setnxex.FenceKey(key)), "the name alone")
			assert.LessOrEqual(t, bytes, len(setnxex.FenceKey(key))+64, "a counter costs its name and some 50 bytes")
		}
	}

	// In bulk: 10,000 keys locked once each, as a service locks one key
	// per order.
	if testing.Short() {
		return
	}
	used := func() int {
		info, err := redis.String(srv.Do(t, "INFO", "memory"), nil)
		require.NoError(t, err)
		for _, line := range strings.Split(info, "\n") {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), "used_memory:"); ok {
				n, err := strconv.Atoi(v)
				require.NoError(t, err)
				return n
			}
		}
		t.Fatal("INFO memory has no used_memory")
		return 0
	}
	l, err := setnxex.NewSetNXPX(locklab.Config{Pool: srv.Pool})
	require.NoError(t, err)
	const n = 10000
	before := used()
	for i := range n {
		lease, err := l.Acquire(ctx, "order:"+strconv.Itoa(100000+i), time.Minute)
		require.NoError(t, err)
		require.NoError(t, l.Release(ctx, lease))
	}
	per := float64(used()-before) / n
	t.Logf("%d counters (names of %d bytes): used_memory grew by %.0f bytes each", n, len(setnxex.FenceKey("order:100000")), per)
	assert.Greater(t, per, float64(len(setnxex.FenceKey("order:100000"))))
	assert.Less(t, per, 120.0)
	withCounters := used()
	reclaimed, err := setnxex.ReclaimFences(ctx, srv.Pool)
	require.NoError(t, err)
	assert.Equal(t, n+2, reclaimed)
	slots := map[int]bool{}
	for i := range n {
		slots[setnxex.Slot("order:"+strconv.Itoa(100000+i))] = true
	}
	slots[setnxex.Slot("orders:42")] = true
	slots[setnxex.Slot("{locklab:3f9a0c1d2e4b5a60}:lock:stale-recovery")] = true
	assert.Equal(t, len(slots), dbsize(t, srv), "one floor per slot of a reclaimed counter, nothing else")
	t.Logf("after ReclaimFences: %d floors, used_memory %d bytes above the start (%d with the counters)",
		dbsize(t, srv), used()-before, withCounters-before)
	assert.Less(t, used(), withCounters)
}

func dbsize(t *testing.T, srv *redistest.Server) int {
	n, err := redis.Int(srv.Do(t, "DBSIZE"), nil)
	require.NoError(t, err)
	return n
}
