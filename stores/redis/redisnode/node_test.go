package redisnode

import (
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/internal/tooling/backends"
)

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
	for _, be := range []string{backends.Process, backends.Docker} {
		t.Run(be, func(t *testing.T) {
			if be == backends.Docker {
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
		{Options{Backend: backends.Process, N: 0}, "N must be at least 1"},
		{Options{Backend: backends.Process, N: -2}, "N must be at least 1"},
		{Options{Backend: backends.Process, N: 1, AppendFsync: "sometimes"}, `AppendFsync "sometimes"`},
		{Options{Backend: backends.Addrs}, "needs Addrs"},
		{Options{Backend: backends.Addrs, Addrs: []string{"localhost"}}, `malformed address "localhost"`},
		{Options{Backend: backends.Addrs, Addrs: []string{"localhost:redis"}}, `port "redis"`},
		{Options{Backend: backends.Addrs, Addrs: []string{"pw@localhost:70000"}}, `port "70000"`},
		{Options{Backend: backends.Addrs, Addrs: []string{":6379"}}, "empty host"},
		{Options{Backend: backends.Addrs, N: 3, Addrs: []string{"127.0.0.1:6379"}}, "N=3 but only 1 addresses"},
		{Options{Backend: backends.Process, N: 1, Addrs: []string{"127.0.0.1:6379"}}, "Addrs given with backend"},
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
	if c.Backend() != backends.Process {
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
	want := backends.Process
	if _, err := dockerClient(context.Background()); err == nil {
		want = backends.Docker
	}
	if c.Backend() != want {
		t.Errorf("automatic backend = %q, want %q", c.Backend(), want)
	}
	t.Logf("automatic backend: %s", c.Describe())
}

func TestNodeThatDoesNotComeUp(t *testing.T) {
	t.Setenv("LOCKLAB_REDIS_SERVER", "/bin/false")
	c, err := Start(context.Background(), Options{Backend: backends.Process, N: 2, StartTimeout: time.Second})
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
