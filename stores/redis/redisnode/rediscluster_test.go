package redisnode

import (
	"context"
	"errors"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/internal/tooling/backends"
)

// rclusterBackends runs f on the process and docker backends, unless
// -short: a Redis Cluster is six servers and a failover takes seconds.
// Docker is skipped only where no engine answers.
func rclusterBackends(t *testing.T, f func(t *testing.T, backend string)) {
	if testing.Short() {
		t.Skip("a Redis Cluster is six servers; make test-long runs it")
	}
	for _, be := range []string{backends.Process, backends.Docker} {
		t.Run(be, func(t *testing.T) {
			if be == backends.Docker {
				requireDocker(t)
			}
			t.Parallel()
			f(t, be)
		})
	}
}

func TestRedisClusterOptionsInvalid(t *testing.T) {
	t.Parallel()
	for _, o := range []RedisClusterOptions{{Masters: -1}, {Replicas: -1}, {NodeTimeout: time.Millisecond}} {
		if err := o.defaults(); !errors.Is(err, locklab.ErrInvalid) {
			t.Errorf("%+v: error %v, want ErrInvalid", o, err)
		}
	}
	o := RedisClusterOptions{}
	if err := o.defaults(); err != nil || o.Masters != 3 || o.Replicas != 1 || o.NodeTimeout != time.Second {
		t.Errorf("defaults %+v (%v)", o, err)
	}
}

// A Redis Cluster of three masters and three replicas serves every slot
// at the addresses the host's clients dial: a master takes a key of its
// slot and the others redirect to its address. Killing the master of a
// key's slot makes its replica take over with the replicated key; the old
// master, started again, rejoins as a replica. Close leaves nothing
// behind.
func TestRedisCluster(t *testing.T) {
	t.Parallel()
	rclusterBackends(t, func(t *testing.T, be string) {
		ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
		defer cancel()
		c := start(t, Options{Backend: be, N: 1})
		t0 := time.Now()
		g, err := c.StartRedisCluster(ctx, RedisClusterOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer g.Close()
		t.Logf("%s: Redis Cluster ready in %v", be, time.Since(t0).Round(time.Millisecond))
		nodes := g.Nodes()
		if len(nodes) != 6 || len(g.Addrs()) != 6 || len(c.Nodes()) != 1 {
			t.Fatalf("%d nodes, %d addresses, %d cluster nodes", len(nodes), len(g.Addrs()), len(c.Nodes()))
		}
		masters, replicas, err := g.Masters(ctx)
		if err != nil || len(masters) != 3 {
			t.Fatalf("masters %v (%v)", masters, err)
		}
		for i, m := range masters {
			if m != nodes[i] || len(replicas[m]) != 1 || replicas[m][0] != nodes[3+i] {
				t.Errorf("master %s with replicas %v, want %s with %s", m.Name(), replicas[m], nodes[i].Name(), nodes[3+i].Name())
			}
		}
		for _, n := range nodes {
			info, err := redis.String(n.Do(ctx, "CLUSTER", "INFO"))
			if err != nil {
				t.Fatal(err)
			}
			f := infoFields(info)
			if f["cluster_state"] != "ok" || f["cluster_slots_assigned"] != "16384" || f["cluster_known_nodes"] != "6" {
				t.Errorf("%s: %v", n.Name(), f)
			}
		}

		// orders:42 lives on slot 11414, the third master's; the other
		// masters send a client to its address.
		master, err := g.MasterOf(ctx, "orders:42")
		if err != nil {
			t.Fatal(err)
		}
		if master != nodes[2] {
			t.Fatalf("orders:42 on %s, want %s", master.Name(), nodes[2].Name())
		}
		for _, m := range masters {
			if m == master {
				continue
			}
			if _, err := m.Do(ctx, "SET", "orders:42", "v"); err == nil || !strings.Contains(err.Error(), "MOVED 11414 "+master.Addr()) {
				t.Errorf("%s: %v, want MOVED 11414 %s", m.Name(), err, master.Addr())
			}
		}
		if n := setAcked(t, ctx, master, "orders:42", "v", 1); n != 1 {
			t.Fatalf("WAIT: %d replicas", n)
		}

		// Kill -9 the master: its replica takes over with the key.
		if err := g.Kill(ctx, master); err != nil {
			t.Fatal(err)
		}
		t0 = time.Now()
		promoted, err := g.WaitPromoted(ctx, replicas[master])
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: %s promoted %v after %s was killed (cluster-node-timeout %v)", be, promoted.Name(),
			time.Since(t0).Round(time.Millisecond), master.Name(), g.NodeTimeout())
		if err := g.WaitReady(ctx); err != nil {
			t.Fatal(err)
		}
		if now, err := g.MasterOf(ctx, "orders:42"); err != nil || now != promoted {
			t.Errorf("orders:42 now on %v (%v), want %s", now, err, promoted.Name())
		}
		if v, ok := get(t, promoted, "orders:42"); !ok || v != "v" {
			info, _ := redis.String(promoted.Do(ctx, "INFO", "replication"))
			keys, _ := redis.String(promoted.Do(ctx, "INFO", "keyspace"))
			t.Errorf("the promoted %s lost a replicated write: %q %v\n%s\n%s\n%s", promoted.Name(), v, ok, info, keys, g.rc.State())
		}
		if len(g.Addrs()) != 5 {
			t.Errorf("addresses %v with a node killed", g.Addrs())
		}

		// Started again, the old master rejoins as a replica.
		if err := g.Restart(ctx, master); err != nil {
			t.Fatal(err)
		}
		t0 = time.Now()
		if err := g.WaitRejoined(ctx, master); err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: %s a replica again %v after its restart", be, master.Name(), time.Since(t0).Round(time.Millisecond))
		if _, err := master.Do(ctx, "SET", "orders:42", "w"); err == nil || !strings.Contains(err.Error(), "MOVED 11414 "+promoted.Addr()) {
			t.Errorf("the rejoined %s: %v, want MOVED to %s", master.Name(), err, promoted.Addr())
		}

		// Close removes every process (or container) and directory.
		var dirs []string
		for _, n := range nodes {
			if ps, ok := n.srv.(*processServer); ok {
				dirs = append(dirs, ps.srv.Dir)
			}
		}
		if err := g.Close(); err != nil {
			t.Fatal(err)
		}
		for _, n := range nodes {
			if err := reach(n, 300*time.Millisecond); err == nil {
				t.Errorf("%s still answers after Close", n.Name())
			}
		}
		for _, d := range dirs {
			if _, err := os.Stat(d); !os.IsNotExist(err) {
				t.Errorf("directory %s left behind (%v)", d, err)
			}
		}
		if err := g.Close(); err != nil {
			t.Errorf("second Close: %v", err)
		}
		if err := c.Nodes()[0].Flush(ctx); err != nil {
			t.Errorf("the cluster's own node is gone with the Redis Cluster: %v", err)
		}
	})
}

// SIGINT in a program with a Redis Cluster removes it: its directories
// (process) or containers (docker) are gone when the program has died of
// the signal; the cluster's Close, which SIGINT runs, removes it too.
func TestRedisClusterSignal(t *testing.T) {
	t.Parallel()
	if signal.Ignored(syscall.SIGINT) {
		t.Skip("SIGINT is ignored in this process (a background job?) and the child would inherit that")
	}
	rclusterBackends(t, func(t *testing.T, be string) {
		child, wait := startChild(t, be+"-rcluster")
		// n1 and the six nodes of the Redis Cluster.
		interruptRemoves(t, be, child, wait, 7)
	})
}
