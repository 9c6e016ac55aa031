package redisnode

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"
	dc "github.com/ory/dockertest/v3/docker"

	"github.com/locklab/locklab/internal/tooling/backends"
	"github.com/locklab/locklab/internal/tooling/redisproc"
)

func TestPauseResume(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, be string) {
		n := start(t, Options{Backend: be, N: 1}).Nodes()[0]
		ctx := ctxT(t)
		do(t, n, "SET", "k", "v")
		conn, err := n.Dial(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		if err := n.Pause(ctx); err != nil {
			t.Fatal(err)
		}
		_, err = redis.DoWithTimeout(conn, 300*time.Millisecond, "GET", "k")
		if !isTimeout(err) {
			t.Fatalf("GET on a paused node: %v, want a timeout", err)
		}
		if err := reach(n, 300*time.Millisecond); !isTimeout(err) {
			t.Fatalf("new connection to a paused node: %v, want a timeout", err)
		}
		if err := n.Resume(ctx); err != nil {
			t.Fatal(err)
		}
		if v, _ := get(t, n, "k"); v != "v" {
			t.Fatalf("after Resume GET k = %q", v)
		}
	})
}

func TestPartitionHeal(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, be string) {
		n := start(t, Options{Backend: be, N: 1}).Nodes()[0]
		ctx := ctxT(t)
		do(t, n, "SET", "k", "v")
		conn, err := n.Dial(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		if _, err := conn.Do("PING"); err != nil {
			t.Fatal(err)
		}
		if err := n.Partition(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := redis.DoWithTimeout(conn, 300*time.Millisecond, "GET", "k"); err == nil {
			t.Fatal("an open connection still reaches a partitioned node")
		}
		if err := reach(n, 300*time.Millisecond); err == nil {
			t.Fatal("a new connection reaches a partitioned node")
		} else {
			t.Logf("partitioned: %v", err)
		}
		if err := n.Heal(ctx); err != nil {
			t.Fatal(err)
		}
		if err := reach(n, 2*time.Second); err != nil {
			t.Fatalf("after Heal: %v", err)
		}
		if v, _ := get(t, n, "k"); v != "v" {
			t.Fatalf("after Heal GET k = %q", v)
		}
	})
}

func TestKillRestart(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, be string) {
		n := start(t, Options{Backend: be, N: 1}).Nodes()[0]
		ctx := ctxT(t)
		addr := n.Addr()
		do(t, n, "SET", "k", "v")
		first := serverID(t, n)
		if err := n.Kill(ctx); err != nil {
			t.Fatal(err)
		}
		if err := reach(n, 300*time.Millisecond); err == nil {
			t.Fatal("a killed node answers")
		}
		if err := n.Restart(ctx, true); err != nil {
			t.Fatal(err)
		}
		second := serverID(t, n)
		if second == first {
			t.Errorf("the server after kill and restart is the one before (%s)", first)
		}
		if _, ok := get(t, n, "k"); ok {
			t.Error("without persistence the key survived kill and restart")
		}
		do(t, n, "SET", "k", "v")
		if err := n.Restart(ctx, false); err != nil { // restart of a running node
			t.Fatal(err)
		}
		if id := serverID(t, n); id == second || id == first {
			t.Errorf("the server after a restart is an earlier one (%s)", id)
		}
		if _, ok := get(t, n, "k"); ok {
			t.Error("the key survived a restart without data")
		}
		if n.Addr() != addr {
			t.Errorf("address changed from %s to %s", addr, n.Addr())
		}
	})
}

// A connection the pool kept from before a restart is dropped on borrow:
// the first command after the fault does not fail with the dead
// connection's EOF.
func TestPoolAfterRestart(t *testing.T) {
	t.Parallel()
	n := start(t, Options{Backend: backends.Process, N: 1}).Nodes()[0]
	ctx := ctxT(t)
	c := n.Pool().Get()
	if _, err := c.Do("PING"); err != nil {
		t.Fatal(err)
	}
	c.Close() // idle in the pool
	if err := n.Restart(ctx, false); err != nil {
		t.Fatal(err)
	}
	c = n.Pool().Get()
	defer c.Close()
	if _, err := c.Do("PING"); err != nil {
		t.Fatalf("first command after the restart: %v", err)
	}
	if _, err := redis.DoContext(c, ctx, "PING"); err != nil {
		t.Fatalf("a pooled connection keeps DoContext: %v", err)
	}
}

func TestRestartWithPersistence(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, be string) {
		n := start(t, Options{Backend: be, N: 1, AppendOnly: true, AppendFsync: "always"}).Nodes()[0]
		ctx := ctxT(t)
		do(t, n, "SET", "k", "v")
		first := serverID(t, n)
		if err := n.Kill(ctx); err != nil {
			t.Fatal(err)
		}
		if err := n.Restart(ctx, true); err != nil {
			t.Fatal(err)
		}
		if id := serverID(t, n); id == first {
			t.Errorf("the server after kill and restart is the one before (%s)", first)
		}
		if v, _ := get(t, n, "k"); v != "v" {
			t.Fatalf("with appendonly/always the key is lost after kill and restart (GET = %q)", v)
		}
		if err := n.Restart(ctx, false); err != nil {
			t.Fatal(err)
		}
		if _, ok := get(t, n, "k"); ok {
			t.Error("the key survived a restart that drops the data")
		}
		// The node comes back with append-only on.
		do(t, n, "SET", "k2", "v")
		if err := n.Restart(ctx, true); err != nil {
			t.Fatal(err)
		}
		if _, ok := get(t, n, "k2"); !ok {
			t.Error("persistence lost after a restart without data")
		}
	})
}

func TestSetAppendOnlyPerNode(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, be string) {
		c := start(t, Options{Backend: be, N: 2})
		n1, n2 := c.Nodes()[0], c.Nodes()[1]
		ctx := ctxT(t)
		if err := n2.SetAppendOnly(ctx, true, "always"); err != nil {
			t.Fatal(err)
		}
		if err := n2.SetAppendOnly(ctx, true, "sometimes"); err == nil {
			t.Error("SetAppendOnly accepted fsync \"sometimes\"")
		}
		for _, n := range c.Nodes() {
			do(t, n, "SET", "k", "v")
			if err := n.Restart(ctx, true); err != nil {
				t.Fatal(err)
			}
		}
		if _, ok := get(t, n1, "k"); ok {
			t.Error("n1 without append-only kept its key")
		}
		if _, ok := get(t, n2, "k"); !ok {
			t.Error("n2 with append-only lost its key")
		}
	})
}

func TestExpireAll(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, be string) {
		n := start(t, Options{Backend: be, N: 1}).Nodes()[0]
		ctx := ctxT(t)
		conn := n.Pool().Get()
		defer conn.Close()
		const many = 1500 // more than one SCAN batch
		for i := 0; i < many; i++ {
			conn.Send("SET", "ttl:"+strconv.Itoa(i), "x", "PX", 600000)
			conn.Send("SET", "keep:"+strconv.Itoa(i), "x")
		}
		conn.Send("SET", "lock", "tok", "EX", 30)
		conn.Send("HSET", "h", "f", "v")
		conn.Send("EXPIRE", "h", 100)
		if _, err := conn.Do(""); err != nil {
			t.Fatal(err)
		}
		if err := n.ExpireAll(ctx); err != nil {
			t.Fatal(err)
		}
		size, _ := redis.Int(do(t, n, "DBSIZE"), nil)
		if size != many {
			t.Errorf("DBSIZE after ExpireAll = %d, want %d", size, many)
		}
		for _, k := range []string{"lock", "ttl:0", "ttl:1499", "h"} {
			if e, _ := redis.Int(do(t, n, "EXISTS", k), nil); e != 0 {
				t.Errorf("%s survived ExpireAll", k)
			}
		}
		if e, _ := redis.Int(do(t, n, "EXISTS", "keep:0", "keep:1499"), nil); e != 2 {
			t.Errorf("keys without TTL removed: %d of 2 left", e)
		}
	})
}

func TestFailoverLosesLastWrite(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, be string) {
		c := start(t, Options{Backend: be, N: 1})
		m := c.Nodes()[0]
		ctx := ctxT(t)
		r, err := c.AddReplica(ctx, m)
		if err != nil {
			t.Fatal(err)
		}
		if r.Name() != "n1r1" || len(c.Replicas()) != 1 || len(c.Nodes()) != 1 {
			t.Errorf("replica %q, %d replicas, %d nodes", r.Name(), len(c.Replicas()), len(c.Nodes()))
		}
		if n := setAcked(t, ctx, m, "before", "1", 1); n != 1 {
			t.Fatalf("WAIT: %d replicas acknowledged", n)
		}
		if v, _ := get(t, r, "before"); v != "1" {
			t.Fatalf("replica lacks a replicated write")
		}
		err = c.Failover(ctx, m, r, func(ctx context.Context) error {
			_, err := m.Do(ctx, "SET", "last", "1")
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		if role, err := r.Role(ctx); err != nil || role != "master" {
			t.Fatalf("after promotion role = %q, %v", role, err)
		}
		if _, ok := get(t, r, "before"); !ok {
			t.Error("promoted replica lost the replicated write")
		}
		if _, ok := get(t, r, "last"); ok {
			t.Error("promoted replica has the write made after its link was cut")
		}
		do(t, r, "SET", "after", "1") // it takes writes now
		if err := reach(m, 300*time.Millisecond); err == nil {
			t.Error("the old master still answers")
		}
	})
}

func TestCloseAfterFaults(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, be string) {
		ctx := ctxT(t)
		c, err := Start(ctx, Options{Backend: be, N: 3, Label: t.Name()})
		if err != nil {
			t.Fatal(err)
		}
		n := c.Nodes()
		if _, err := c.AddReplica(ctx, n[0]); err != nil {
			t.Fatal(err)
		}
		if err := n[0].Pause(ctx); err != nil {
			t.Fatal(err)
		}
		if err := n[1].Partition(ctx); err != nil {
			t.Fatal(err)
		}
		if err := n[2].Kill(ctx); err != nil {
			t.Fatal(err)
		}
		addrs := []string{n[0].Addr(), n[1].Addr()}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		if err := c.Close(); err != nil {
			t.Fatalf("second Close: %v", err)
		}
		for _, a := range addrs {
			if err := redisproc.Ping(a, 200*time.Millisecond); err == nil {
				t.Errorf("%s still answers after Close", a)
			}
		}
		if be == backends.Docker {
			pool, _ := dockerClient(ctx)
			mine := LabelPid + "=" + strconv.Itoa(os.Getpid())
			cs, _ := pool.Client.ListContainers(dc.ListContainersOptions{All: true,
				Filters: map[string][]string{"label": {LabelName + "=" + t.Name(), mine}}})
			ns, _ := pool.Client.FilteredListNetworks(dc.NetworkFilterOpts{"label": {LabelName + "=" + t.Name(): true, mine: true}})
			if len(cs)+len(ns) != 0 {
				t.Errorf("after Close: %d containers, %d networks left", len(cs), len(ns))
			}
		}
	})
}
