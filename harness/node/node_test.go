package node

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"
	dc "github.com/ory/dockertest/v3/docker"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/internal/tooling/dockerbox"
	"github.com/locklab/locklab/internal/tooling/redisproc"
)

const childEnv = "LOCKLAB_NODE_TEST_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		runChild()
		return
	}
	code := m.Run()
	if left := leftovers(); left != "" {
		fmt.Fprintln(os.Stderr, "left behind after the tests:", left)
		if code == 0 {
			code = 1
		}
	}
	os.Exit(code)
}

// runChild starts a docker cluster of two nodes (or, when the child
// variable names a backend, a cluster of one node and a Sentinel group on
// that backend; when it is a backend and "-rcluster", a cluster of one node
// and a Redis Cluster), says READY and waits to be killed.
func runChild() {
	ctx := context.Background()
	be, n := BackendDocker, 2
	sentinels, rcluster := false, false
	if v := os.Getenv(childEnv); v == BackendDocker || v == BackendProcess {
		be, n, sentinels = v, 1, true
	}
	if v, ok := strings.CutSuffix(os.Getenv(childEnv), "-rcluster"); ok {
		be, n, rcluster = v, 1, true
	}
	c, err := Start(ctx, Options{Backend: be, N: n, Label: "child"})
	if err != nil {
		fmt.Println("ERROR", err)
		os.Exit(2)
	}
	if sentinels {
		if _, err := c.StartSentinels(ctx, SentinelOptions{}); err != nil {
			fmt.Println("ERROR", err)
			os.Exit(2)
		}
	}
	if rcluster {
		if _, err := c.StartRedisCluster(ctx, RedisClusterOptions{}); err != nil {
			fmt.Println("ERROR", err)
			os.Exit(2)
		}
	}
	fmt.Println("READY", c.Describe())
	select {}
}

// leftovers lists the containers, networks and redis-server processes this
// test process still owns.
func leftovers() string {
	var out []string
	if pool, err := dockerClient(context.Background()); err == nil {
		cs, ns := ownedBy(pool.Client, os.Getpid())
		for _, c := range cs {
			out = append(out, "container "+c)
		}
		for _, n := range ns {
			out = append(out, "network "+n)
		}
	}
	ents, _ := os.ReadDir("/proc")
	me := strconv.Itoa(os.Getpid())
	for _, e := range ents {
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 || !strings.Contains(s[:i], "redis-server") {
			continue
		}
		if f := strings.Fields(s[i+1:]); len(f) > 2 && f[1] == me && f[0] != "Z" {
			out = append(out, "process "+e.Name())
		}
	}
	return strings.Join(out, ", ")
}

// ownedBy lists the names of the containers and networks labelled with pid.
func ownedBy(cli *dc.Client, pid int) (containers, networks []string) {
	lbl := LabelPid + "=" + strconv.Itoa(pid)
	cs, _ := cli.ListContainers(dc.ListContainersOptions{All: true, Filters: map[string][]string{"label": {lbl}}})
	for _, c := range cs {
		containers = append(containers, strings.Join(c.Names, ","))
	}
	ns, _ := cli.FilteredListNetworks(dc.NetworkFilterOpts{"label": {lbl: true}})
	for _, n := range ns {
		networks = append(networks, n.Name)
	}
	return containers, networks
}

// requireDocker skips the test when no Docker engine answers.
func requireDocker(t testing.TB) {
	t.Helper()
	if _, err := dockerClient(context.Background()); err != nil {
		t.Skipf("docker backend not tested: %v", err)
	}
}

// forEachBackend runs f for the process and docker backends, in parallel.
// With -short (make test) the docker backend runs in TestBasics only: its
// containers take seconds each to start; make test-long runs them all.
func forEachBackend(t *testing.T, f func(t *testing.T, backend string)) {
	for _, be := range []string{BackendProcess, BackendDocker} {
		t.Run(be, func(t *testing.T) {
			if be == BackendDocker {
				if testing.Short() && !strings.HasPrefix(t.Name(), "TestBasics/") {
					t.Skip("docker backend: -short runs it in TestBasics only (make test-long runs every test)")
				}
				requireDocker(t)
			}
			t.Parallel()
			f(t, be)
		})
	}
}

func start(t testing.TB, opts Options) *Cluster {
	t.Helper()
	if opts.Label == "" {
		opts.Label = t.Name()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c, err := Start(ctx, opts)
	if err != nil {
		t.Fatalf("Start(%+v): %v", opts, err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return c
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// do runs a command on a fresh connection and fails the test on error.
func do(t testing.TB, n *Node, cmd string, args ...any) any {
	t.Helper()
	v, err := n.Do(ctxT(t), cmd, args...)
	if err != nil {
		t.Fatalf("%s %v: %v", cmd, args, err)
	}
	return v
}

// setAcked sets key to v on n and returns how many replicas acknowledged
// it within 10s: WAIT on the connection that wrote, for WAIT counts the
// replicas that have the writes of its own connection only (a fresh
// connection's WAIT counts every linked replica at once).
func setAcked(t testing.TB, ctx context.Context, n *Node, key, v string, replicas int) int {
	t.Helper()
	c, err := n.Dial(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Do("SET", key, v); err != nil {
		t.Fatalf("SET %s on %s: %v", key, n.Name(), err)
	}
	acked, err := redis.Int(c.Do("WAIT", replicas, 10000))
	if err != nil {
		t.Fatalf("WAIT on %s: %v", n.Name(), err)
	}
	return acked
}

func get(t testing.TB, n *Node, key string) (string, bool) {
	t.Helper()
	v, err := redis.String(n.Do(ctxT(t), "GET", key))
	if errors.Is(err, redis.ErrNil) {
		return "", false
	}
	if err != nil {
		t.Fatalf("GET %s on %s: %v", key, n.Name(), err)
	}
	return v, true
}

// reach reports whether a new connection to n answers PING within d.
// serverID identifies the server process behind n: its run_id (random at
// each start) and pid, from INFO server.
func serverID(t testing.TB, n *Node) string {
	t.Helper()
	info, err := redis.String(n.Do(ctxT(t), "INFO", "server"))
	if err != nil {
		t.Fatal(err)
	}
	f := infoFields(info)
	if f["run_id"] == "" {
		t.Fatalf("INFO server has no run_id:\n%s", info)
	}
	return "run_id " + f["run_id"] + " pid " + f["process_id"]
}

func reach(n *Node, d time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	c, err := n.Dial(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	_, err = redis.DoWithTimeout(c, d, "PING")
	return err
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func TestBadInput(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cases := []struct {
		opts Options
		want string
	}{
		{Options{Backend: "podman", N: 1}, `unknown backend "podman"`},
		{Options{Backend: BackendProcess, N: 0}, "N must be at least 1"},
		{Options{Backend: BackendProcess, N: -2}, "N must be at least 1"},
		{Options{Backend: BackendProcess, N: 1, AppendFsync: "sometimes"}, `AppendFsync "sometimes"`},
		{Options{Backend: BackendAddrs}, "needs Addrs"},
		{Options{Backend: BackendAddrs, Addrs: []string{"localhost"}}, `malformed address "localhost"`},
		{Options{Backend: BackendAddrs, Addrs: []string{"localhost:redis"}}, `port "redis"`},
		{Options{Backend: BackendAddrs, Addrs: []string{"pw@localhost:70000"}}, `port "70000"`},
		{Options{Backend: BackendAddrs, Addrs: []string{":6379"}}, "empty host"},
		{Options{Backend: BackendAddrs, N: 3, Addrs: []string{"127.0.0.1:6379"}}, "N=3 but only 1 addresses"},
		{Options{Backend: BackendProcess, N: 1, Addrs: []string{"127.0.0.1:6379"}}, "Addrs given with backend"},
	}
	for _, tc := range cases {
		c, err := Start(ctx, tc.opts)
		if err == nil {
			c.Close()
			t.Errorf("Start(%+v) succeeded, want an error containing %q", tc.opts, tc.want)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Start(%+v) = %v, want an error containing %q", tc.opts, err, tc.want)
		}
	}
}

func TestBackendFromEnv(t *testing.T) {
	t.Setenv("LOCKLAB_BACKEND", "process")
	c := start(t, Options{N: 1})
	if c.Backend() != BackendProcess {
		t.Fatalf("Backend() = %q with LOCKLAB_BACKEND=process", c.Backend())
	}
	if d := c.Describe(); !strings.HasPrefix(d, "process ") || !strings.Contains(d, "(Redis ") {
		t.Errorf("Describe() = %q", d)
	}
	t.Setenv("LOCKLAB_BACKEND", "vagrant")
	if _, err := Start(context.Background(), Options{N: 1}); err == nil || !strings.Contains(err.Error(), "unknown backend") {
		t.Errorf("LOCKLAB_BACKEND=vagrant: %v", err)
	}
}

func TestAutoBackend(t *testing.T) {
	t.Parallel()
	c := start(t, Options{N: 1})
	want := BackendProcess
	if _, err := dockerClient(context.Background()); err == nil {
		want = BackendDocker
	}
	if c.Backend() != want {
		t.Errorf("automatic backend = %q, want %q", c.Backend(), want)
	}
	t.Logf("automatic backend: %s", c.Describe())
}

func TestNodeThatDoesNotComeUp(t *testing.T) {
	t.Setenv("LOCKLAB_REDIS_SERVER", "/bin/false")
	c, err := Start(context.Background(), Options{Backend: BackendProcess, N: 2, StartTimeout: time.Second})
	if err == nil {
		c.Close()
		t.Fatal("Start with /bin/false as redis-server succeeded")
	}
	for _, want := range []string{"node n1", "node n2", "did not come up"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not contain %q", err, want)
		}
	}
}

func TestBasics(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, be string) {
		c := start(t, Options{Backend: be, N: 3})
		if c.Backend() != be {
			t.Errorf("Backend() = %q", c.Backend())
		}
		t.Logf("%s", c.Describe())
		if !strings.Contains(c.Describe(), "(Redis 7") && !strings.Contains(c.Describe(), "(Redis ") {
			t.Errorf("Describe() = %q", c.Describe())
		}
		nodes := c.Nodes()
		var _ locklab.ConnSource = nodes[0].Pool()
		if len(nodes) != 3 {
			t.Fatalf("%d nodes", len(nodes))
		}
		for i, n := range nodes {
			if want := "n" + strconv.Itoa(i+1); n.Name() != want {
				t.Errorf("node %d named %q", i, n.Name())
			}
			conn := n.Pool().Get()
			if _, err := conn.Do("SET", "k", n.Name()); err != nil {
				t.Fatalf("SET on %s (%s): %v", n.Name(), n.Addr(), err)
			}
			conn.Close()
		}
		for _, n := range nodes { // independent servers
			if v, _ := get(t, n, "k"); v != n.Name() {
				t.Errorf("%s holds %q", n.Name(), v)
			}
		}
		if err := nodes[0].Flush(ctxT(t)); err != nil {
			t.Fatal(err)
		}
		if _, ok := get(t, nodes[0], "k"); ok {
			t.Error("key survived Flush")
		}
		if _, ok := get(t, nodes[1], "k"); !ok {
			t.Error("Flush of n1 emptied n2")
		}
	})
}

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

// On docker, a kill and a restart replace the redis-server process inside a
// container that stays up, and a partition takes its interface down; where
// the image has no ip command the engine disconnects it instead, and that
// cuts it off as well.
func TestDockerFaultsInsideContainer(t *testing.T) {
	t.Parallel()
	skipShort(t)
	requireDocker(t)
	n := start(t, Options{Backend: BackendDocker, N: 1}).Nodes()[0]
	s := n.srv.(*dockerServer)
	if !s.supervised {
		t.Skipf("image %s has no /bin/sh: its containers restart whole", s.b.image.name)
	}
	ctx := ctxT(t)
	started := func() string {
		c, err := s.b.cli.InspectContainerWithContext(s.id, ctx)
		if err != nil {
			t.Fatal(err)
		}
		return c.ID + " started " + c.State.StartedAt.String()
	}
	before, id := started(), serverID(t, n)
	if err := n.Kill(ctx); err != nil {
		t.Fatal(err)
	}
	for _, keep := range []bool{true, false} {
		if err := n.Restart(ctx, keep); err != nil {
			t.Fatal(err)
		}
		if now := serverID(t, n); now == id {
			t.Errorf("restart(keep=%v): the same server %s", keep, id)
		} else {
			id = now
		}
	}
	if after := started(); after != before {
		t.Errorf("the container was restarted: %s, then %s", before, after)
	}
	for _, viaEngine := range []bool{false, true} {
		if viaEngine {
			s.b.ipLink.Store(-1)
		}
		if err := n.Partition(ctx); err != nil {
			t.Fatal(err)
		}
		if s.linkDown == viaEngine {
			t.Errorf("partition by the engine %v, yet linkDown = %v", viaEngine, s.linkDown)
		}
		if err := reach(n, 300*time.Millisecond); err == nil {
			t.Fatalf("a partitioned node answers (by the engine: %v)", viaEngine)
		}
		if err := n.Heal(ctx); err != nil {
			t.Fatal(err)
		}
		if err := reach(n, 2*time.Second); err != nil {
			t.Fatalf("after Heal (by the engine: %v): %v", viaEngine, err)
		}
		if now := serverID(t, n); now != id {
			t.Errorf("a partition replaced the server: %s, then %s", id, now)
		}
	}
}

// A connection the pool kept from before a restart is dropped on borrow:
// the first command after the fault does not fail with the dead
// connection's EOF.
func TestPoolAfterRestart(t *testing.T) {
	t.Parallel()
	n := start(t, Options{Backend: BackendProcess, N: 1}).Nodes()[0]
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

func TestAddrsBackend(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	plain, err := redisproc.Start(redisproc.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Stop()
	secret, err := redisproc.Start(redisproc.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer secret.Stop()
	sc, err := redis.Dial("tcp", secret.Addr)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sc.Do("CONFIG", "SET", "requirepass", "s3cr@t"); err != nil {
		t.Fatal(err)
	}
	sc.Close()
	c := start(t, Options{Backend: BackendAddrs, Addrs: []string{plain.Addr, "s3cr@t@" + secret.Addr}})
	if c.Backend() != BackendAddrs || len(c.Nodes()) != 2 {
		t.Fatalf("backend %s, %d nodes", c.Backend(), len(c.Nodes()))
	}
	t.Log(c.Describe())
	for _, f := range Faults() {
		if Supports(c.Nodes()[0], f) {
			t.Errorf("a node of the addrs backend supports %v", f)
		}
	}
	n1, n2 := c.Nodes()[0], c.Nodes()[1]
	if n2.Password() != "s3cr@t" || n2.Addr() != secret.Addr {
		t.Errorf("n2: addr %s password %q", n2.Addr(), n2.Password())
	}
	for _, n := range c.Nodes() {
		conn := n.Pool().Get()
		if _, err := conn.Do("SET", "t", "v", "EX", 100); err != nil {
			t.Fatalf("%s: %v", n.Name(), err)
		}
		conn.Do("SET", "k", "v")
		conn.Close()
		// The server is not the harness's: its keys and settings stay.
		if !n.Shared() {
			t.Errorf("%s: a node of the addrs backend is not Shared", n.Name())
		}
		for op, f := range map[string]func() error{
			"ExpireAll":     func() error { return n.ExpireAll(ctx) },
			"Flush":         func() error { return n.Flush(ctx) },
			"SetAppendOnly": func() error { return n.SetAppendOnly(ctx, true, "always") },
		} {
			if err := f(); !errors.Is(err, ErrUnsupported) {
				t.Errorf("%s: %s on a shared server: %v, want ErrUnsupported", n.Name(), op, err)
			}
		}
		if _, ok := get(t, n, "t"); !ok {
			t.Errorf("%s: a TTL key of the server's was removed", n.Name())
		}
		if _, ok := get(t, n, "k"); !ok {
			t.Errorf("%s: a key of the server's was removed", n.Name())
		}
		if aof, err := redis.Strings(n.Do(ctx, "CONFIG", "GET", "appendonly")); err != nil || aof[1] != "no" {
			t.Errorf("%s: appendonly %v (%v), want it left at no", n.Name(), aof, err)
		}
	}
	faults := map[string]func() error{
		"Pause":     func() error { return n1.Pause(ctx) },
		"Resume":    func() error { return n1.Resume(ctx) },
		"Kill":      func() error { return n1.Kill(ctx) },
		"Restart":   func() error { return n1.Restart(ctx, true) },
		"Partition": func() error { return n1.Partition(ctx) },
		"Heal":      func() error { return n1.Heal(ctx) },
		"AddReplica": func() error {
			_, err := c.AddReplica(ctx, n1)
			return err
		},
	}
	for name, f := range faults {
		err := f()
		if !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), "addrs backend") {
			t.Errorf("%s on addrs: %v, want ErrUnsupported with an explanation", name, err)
		}
	}
	if err := reach(n1, time.Second); err != nil {
		t.Errorf("n1 after refused faults: %v", err)
	}

	// A server that does not answer is an error naming the node.
	port, _ := redisproc.FreePort()
	_, err = Start(ctx, Options{Backend: BackendAddrs, Addrs: []string{"127.0.0.1:" + strconv.Itoa(port)}, StartTimeout: 300 * time.Millisecond})
	if err == nil || !strings.Contains(err.Error(), "node n1") {
		t.Errorf("Start on a dead address: %v", err)
	}
}

// TestAddrsBackendURL: an address given as a redis:// URL brings its ACL
// user and database to every connection of the node, and Node.URL gives
// back what ParseAddr reads.
func TestAddrsBackendURL(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	srv, err := redisproc.Start(redisproc.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	admin, err := redis.Dial("tcp", srv.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	if _, err := admin.Do("ACL", "SETUSER", "alice", "on", ">pa:ss", "~*", "+@all"); err != nil {
		t.Fatal(err)
	}
	url := "redis://alice:pa%3Ass@" + srv.Addr + "/5"
	c := start(t, Options{Backend: BackendAddrs, Addrs: []string{url}})
	n := c.Nodes()[0]
	conn := n.Pool().Get()
	who, err := redis.String(conn.Do("ACL", "WHOAMI"))
	if err != nil || who != "alice" {
		t.Errorf("ACL WHOAMI: %q, %v; want alice", who, err)
	}
	if _, err := conn.Do("SET", "url:k", "v"); err != nil {
		t.Fatal(err)
	}
	conn.Close()
	if _, err := admin.Do("SELECT", 5); err != nil {
		t.Fatal(err)
	}
	if v, err := redis.String(admin.Do("GET", "url:k")); err != nil || v != "v" {
		t.Errorf("GET in database 5: %q, %v", v, err)
	}
	if n.URL() != url {
		t.Errorf("URL() = %q, want %q", n.URL(), url)
	}
	if o, err := ParseAddr(n.URL()); err != nil || o.Username != "alice" || o.Password != "pa:ss" || o.DB != 5 {
		t.Errorf("ParseAddr(URL()) = %+v, %v", o, err)
	}

	// A wrong password is refused with Redis's own message, naming the node.
	_, err = Start(ctx, Options{Backend: BackendAddrs, Addrs: []string{"redis://alice:wrong@" + srv.Addr}, StartTimeout: time.Minute})
	if err == nil || !strings.Contains(err.Error(), "WRONGPASS") || !strings.Contains(err.Error(), "node n1") {
		t.Errorf("Start with a wrong password: %v", err)
	}
	for _, bad := range []string{"http://" + srv.Addr, "redis://" + srv.Addr + "/x", "no-port"} {
		if _, err := Start(ctx, Options{Backend: BackendAddrs, Addrs: []string{bad}}); !errors.Is(err, locklab.ErrInvalid) {
			t.Errorf("Start(%q): %v, want ErrInvalid", bad, err)
		}
	}
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
		if be == BackendDocker {
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

// BenchmarkStart measures how long 1 and 5 nodes take to come up on each
// backend (a speed target is a benchmark here, not a timed test).
func BenchmarkStart(b *testing.B) {
	for _, be := range []string{BackendProcess, BackendDocker} {
		for _, n := range []int{1, 5} {
			b.Run(fmt.Sprintf("%s/%d", be, n), func(b *testing.B) {
				if be == BackendDocker {
					requireDocker(b)
				}
				for i := 0; i < b.N; i++ {
					c, err := Start(context.Background(), Options{Backend: be, N: n})
					if err != nil {
						b.Fatal(err)
					}
					b.StopTimer()
					c.Close()
					b.StartTimer()
				}
			})
		}
	}
}

// No error of ParseAddr shows the password of a password@host:port address.
func TestParseAddrErrorsHidePassword(t *testing.T) {
	for _, a := range []string{"s3cret@localhost", "s3cret@localhost:redis", "s3cret@localhost:70000", "s3cret@:6379", "redis://:s3cret@localhost:x"} {
		_, err := ParseAddr(a)
		if !errors.Is(err, locklab.ErrInvalid) {
			t.Fatalf("%s: %v, want ErrInvalid", a, err)
		}
		if strings.Contains(err.Error(), "s3cret") || !strings.Contains(err.Error(), "xxxxx") {
			t.Errorf("%s: the message shows the password or masks nothing: %v", a, err)
		}
	}
}

// BenchmarkRestart measures a kill and a restart (with and without the
// node's files) of a running node on each backend: what a schedule with a
// node restart pays.
func BenchmarkRestart(b *testing.B) {
	for _, be := range []string{BackendProcess, BackendDocker} {
		for _, keep := range []bool{false, true} {
			b.Run(fmt.Sprintf("%s/keep=%v", be, keep), func(b *testing.B) {
				if be == BackendDocker {
					requireDocker(b)
				}
				c, err := Start(context.Background(), Options{Backend: be, N: 1, Label: b.Name()})
				if err != nil {
					b.Fatal(err)
				}
				defer c.Close()
				n := c.Nodes()[0]
				ctx := context.Background()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					if err := n.Kill(ctx); err != nil {
						b.Fatal(err)
					}
					if err := n.Restart(ctx, keep); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// A supervisor command whose caller stops waiting (a start's liveness check
// cut short by the end of the start) leaves the supervisor usable: its late
// answer is dropped, and the next command gets its own. A command on a
// context that has ended already gets the context's error every time, even
// when its answer (or an earlier one) is there by the time it looks.
func TestDockerSupervisorAfterCancelledCommand(t *testing.T) {
	t.Parallel()
	skipShort(t)
	requireDocker(t)
	n := start(t, Options{Backend: BackendDocker, N: 1}).Nodes()[0]
	s := n.srv.(*dockerServer)
	if !s.supervised {
		t.Skipf("image %s has no /bin/sh: its containers restart whole", s.b.image.name)
	}
	done, cancel := context.WithCancel(context.Background())
	cancel()
	for i := 0; i < 3; i++ {
		if _, err := s.sup.Do(done, "alive", nil); !errors.Is(err, context.Canceled) {
			t.Fatalf("a command on a cancelled context: %v, want context.Canceled", err)
		}
	}
	ctx := ctxT(t)
	if a, err := s.sup.Do(ctx, "alive", nil); err != nil || a != "yes" {
		t.Fatalf("alive after cancelled commands: %q, %v; want yes", a, err)
	}
	if err := n.Kill(ctx); err != nil {
		t.Fatal(err)
	}
	if err := n.Restart(ctx, false); err != nil {
		t.Fatal(err)
	}
}

// A fault that reaches a supervised docker node after it was closed (a run
// interrupted in the middle of a restart) fails with an error, not a panic.
func TestDockerRestartAfterClose(t *testing.T) {
	t.Parallel()
	skipShort(t)
	requireDocker(t)
	n := start(t, Options{Backend: BackendDocker, N: 1}).Nodes()[0]
	s := n.srv.(*dockerServer)
	if !s.supervised {
		t.Skipf("image %s has no /bin/sh: its containers restart whole", s.b.image.name)
	}
	if err := s.close(); err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t)
	for _, keep := range []bool{true, false} {
		if err := s.restart(ctx, keep); !errors.Is(err, dockerbox.ErrContainerRemoved) {
			t.Fatalf("restart(keepData %v) of a removed container: %v, want dockerbox.ErrContainerRemoved", keep, err)
		}
	}
}
