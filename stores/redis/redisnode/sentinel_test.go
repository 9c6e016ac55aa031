package redisnode

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/locklab/locklab/internal/tooling/backends"
	"github.com/locklab/locklab/internal/tooling/procid"

	"github.com/locklab/locklab/harness/fault"

	"github.com/gomodule/redigo/redis"

	"github.com/locklab/locklab"
)

// sentinelBackends runs f on the process backend and, unless -short, on
// docker: a group is seven containers.
func sentinelBackends(t *testing.T, f func(t *testing.T, backend string)) {
	for _, be := range []string{backends.Process, backends.Docker} {
		t.Run(be, func(t *testing.T) {
			if be == backends.Docker {
				if testing.Short() {
					t.Skip("docker backend: a Sentinel group is seven containers; make test-long runs it")
				}
				requireDocker(t)
			}
			t.Parallel()
			f(t, be)
		})
	}
}

// waitFor polls cond until it holds or d passes, and returns its last error.
func waitFor(ctx context.Context, d time.Duration, cond func(ctx context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	for {
		err := cond(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// everySentinelNames checks that each Sentinel, asked alone, names m.
func everySentinelNames(g *SentinelGroup, m *Node) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		for _, s := range g.Sentinels() {
			a, err := g.askMaster(ctx, s)
			if err != nil {
				return err
			}
			if a != m.srv.peerAddr() {
				return errors.New(s.Name() + " names " + a + ", not " + m.Name() + " at " + m.Addr())
			}
		}
		return nil
	}
}

func TestSentinelOptionsInvalid(t *testing.T) {
	t.Parallel()
	for _, o := range []SentinelOptions{
		{Quorum: 4},
		{Replicas: -1},
		{Sentinels: -2},
		{MasterName: "two words"},
		{DownAfter: -time.Second},
	} {
		if err := o.defaults(); !errors.Is(err, locklab.ErrInvalid) {
			t.Errorf("%+v: error %v, want ErrInvalid", o, err)
		}
	}
	o := SentinelOptions{}
	if err := o.defaults(); err != nil {
		t.Fatal(err)
	}
	if o.Replicas != 2 || o.Sentinels != 3 || o.Quorum != 2 || o.MasterName != "locklab" {
		t.Errorf("defaults %+v", o)
	}
}

// The Sentinels agree on the master; killing it makes them promote a
// replica that holds the acknowledged writes; the old master, started
// again, becomes a replica of the new one; pausing the new master makes
// them fail over again; Close leaves nothing behind.
func TestSentinelFailover(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("a real Sentinel failover takes seconds of Sentinel's own timing; make test-long runs it")
	}
	sentinelBackends(t, func(t *testing.T, be string) {
		ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
		defer cancel()
		c := start(t, Options{Backend: be, N: 1})
		t0 := time.Now()
		g, err := c.StartSentinels(ctx, SentinelOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer g.Close()
		t.Logf("%s: group ready in %v", be, time.Since(t0).Round(time.Millisecond))
		data, sents := g.Nodes(), g.Sentinels()
		if len(data) != 3 || len(sents) != 3 || len(g.Addrs()) != 3 {
			t.Fatalf("%d data nodes, %d Sentinels, %d addresses", len(data), len(sents), len(g.Addrs()))
		}
		if len(c.Nodes()) != 1 || len(c.Replicas()) != 0 {
			t.Errorf("the group's nodes are not the cluster's: %d nodes, %d replicas", len(c.Nodes()), len(c.Replicas()))
		}
		first, err := g.Master(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if first != data[0] {
			t.Fatalf("master %s, want %s", first.Name(), data[0].Name())
		}
		if err := everySentinelNames(g, first)(ctx); err != nil {
			t.Fatal(err)
		}
		for _, r := range data[1:] {
			if role, err := r.Role(ctx); err != nil || role != "slave" {
				t.Fatalf("%s: role %q (%v), want slave", r.Name(), role, err)
			}
		}

		// A write both replicas acknowledged survives the failover.
		if n := setAcked(t, ctx, first, "k", "v", 2); n != 2 {
			t.Fatalf("WAIT: %d replicas", n)
		}
		if err := g.Kill(ctx); err != nil {
			t.Fatal(err)
		}
		t0 = time.Now()
		wctx, wcancel := context.WithTimeout(ctx, time.Minute)
		second, err := g.WaitFailover(wctx, first)
		wcancel()
		if err != nil {
			t.Fatal(err)
		}
		if second == first {
			t.Fatal("no new master")
		}
		t.Logf("%s: %s promoted %v after %s was killed", be, second.Name(), time.Since(t0).Round(time.Millisecond), first.Name())
		if v, ok := get(t, second, "k"); !ok || v != "v" {
			t.Errorf("the promoted %s lost an acknowledged write: %q %v", second.Name(), v, ok)
		}
		if err := waitFor(ctx, 30*time.Second, everySentinelNames(g, second)); err != nil {
			t.Fatal(err)
		}

		// Started again, the old master is turned into a replica of the
		// new one (Sentinel looks at a returning node every 10s and waits
		// 8s more before it reconfigures one).
		if err := g.Restart(ctx, false); err != nil {
			t.Fatal(err)
		}
		t0 = time.Now()
		if err := waitFor(ctx, time.Minute, func(ctx context.Context) error {
			info, err := redis.String(first.Do(ctx, "INFO", "replication"))
			if err != nil {
				return err
			}
			f := infoFields(info)
			if f["role"] != "slave" || f["master_link_status"] != "up" {
				return errors.New(first.Name() + ": role " + f["role"] + ", link " + f["master_link_status"])
			}
			return nil
		}); err != nil {
			t.Fatalf("the old master did not rejoin as a replica: %v", err)
		}
		t.Logf("%s: %s a replica again %v after its restart", be, first.Name(), time.Since(t0).Round(time.Millisecond))
		if v, ok := get(t, first, "k"); !ok || v != "v" {
			t.Errorf("the rejoined %s did not sync from %s: %q %v", first.Name(), second.Name(), v, ok)
		}

		// A frozen master is failed over too; thawed, it rejoins.
		if err := g.Pause(ctx); err != nil {
			t.Fatal(err)
		}
		t0 = time.Now()
		wctx, wcancel = context.WithTimeout(ctx, time.Minute)
		third, err := g.WaitFailover(wctx, second)
		wcancel()
		if err != nil {
			g.Resume(ctx)
			t.Fatal(err)
		}
		if err := g.Resume(ctx); err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: %s promoted %v after %s was paused", be, third.Name(), time.Since(t0).Round(time.Millisecond), second.Name())
		if err := waitFor(ctx, time.Minute, func(ctx context.Context) error {
			if role, err := second.Role(ctx); err != nil || role != "slave" {
				return errors.New(second.Name() + ": role " + role)
			}
			return nil
		}); err != nil {
			t.Fatalf("the thawed master did not become a replica: %v", err)
		}

		// The failover fault does it all: kill, promotion, restart.
		if err := fault.Begin(ctx, g, fault.Failover); err != nil {
			t.Fatal(err)
		}
		if m, err := g.Master(ctx); err != nil || m == third {
			t.Errorf("after the failover fault the Sentinels name %v (%v), want another than %s", m, err, third.Name())
		}
		if _, err := third.Do(ctx, "PING"); err != nil {
			t.Errorf("the failed-over %s was not started again: %v", third.Name(), err)
		}

		// Close removes every process (or container) and directory.
		var dirs []string
		all := append(g.Nodes(), g.Sentinels()...)
		for _, n := range all {
			if ps, ok := n.srv.(*processServer); ok {
				dirs = append(dirs, ps.srv.Dir)
			}
		}
		if err := g.Close(); err != nil {
			t.Fatal(err)
		}
		for _, n := range all {
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
			t.Errorf("the cluster's own node is gone with the group: %v", err)
		}
	})
}

// The cluster's Close (the path SIGINT takes) removes a group too.
func TestSentinelClusterCloseRemovesGroup(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	c, err := Start(ctx, Options{Backend: backends.Process, N: 1, Label: t.Name()})
	if err != nil {
		t.Fatal(err)
	}
	g, err := c.StartSentinels(ctx, SentinelOptions{Replicas: 1, Sentinels: 1})
	if err != nil {
		c.Close()
		t.Fatal(err)
	}
	// A Sentinel started again with its files wiped starts from its first
	// configuration and finds the master again.
	s := g.Sentinels()[0]
	if err := s.Restart(ctx, false); err != nil {
		c.Close()
		t.Fatal(err)
	}
	if m, err := g.Master(ctx); err != nil || m != g.Nodes()[0] {
		t.Errorf("after a wiped restart the Sentinel names %v (%v), want %s", m, err, g.Nodes()[0].Name())
	}
	all := append(g.Nodes(), g.Sentinels()...)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	for _, n := range all {
		if err := reach(n, 300*time.Millisecond); err == nil {
			t.Errorf("%s still answers after the cluster's Close", n.Name())
		}
		if _, err := os.Stat(n.srv.(*processServer).srv.Dir); !os.IsNotExist(err) {
			t.Errorf("%s: directory left behind (%v)", n.Name(), err)
		}
	}
	if err := g.Close(); err != nil {
		t.Errorf("group Close after the cluster's: %v", err)
	}
}

// SIGINT in a program with a Sentinel group removes the group: its
// directories (process) or containers (docker) are gone when the program
// has died of the signal.
func TestSentinelSignalRemovesGroup(t *testing.T) {
	t.Parallel()
	if signal.Ignored(syscall.SIGINT) {
		t.Skip("SIGINT is ignored in this process (a background job?) and the child would inherit that")
	}
	sentinelBackends(t, func(t *testing.T, be string) {
		child, wait := startChild(t, be)
		// n1, the master, two replicas and three Sentinels.
		interruptRemoves(t, be, child, wait, 7)
	})
}

// interruptRemoves sends SIGINT to child, a test program started by
// startChild on backend be that owns want servers, and checks that it
// dies of the signal and leaves none of their directories (process) or
// containers (docker) behind.
func interruptRemoves(t *testing.T, be string, child *exec.Cmd, wait func() error, want int) {
	t.Helper()
	pid := child.Process.Pid
	owned := func() []string {
		if be == backends.Docker {
			pool, _ := dockerClient(context.Background())
			cs, _ := ownedBy(pool.Client, pid)
			return cs
		}
		var dirs []string
		for _, base := range []string{procid.ShmDir, os.TempDir()} { // where procid.MkdirTemp makes them
			ents, _ := os.ReadDir(base)
			for _, e := range ents {
				if strings.HasPrefix(e.Name(), "locklab-redis-"+strconv.Itoa(pid)+"-") {
					dirs = append(dirs, e.Name())
				}
			}
		}
		return dirs
	}
	if got := owned(); len(got) != want {
		t.Fatalf("the child owns %v, want %d", got, want)
	}
	child.Process.Signal(syscall.SIGINT)
	done := make(chan error, 1)
	go func() { done <- wait() }()
	select {
	case err := <-done:
		ws, _ := child.ProcessState.Sys().(syscall.WaitStatus)
		if !ws.Signaled() || ws.Signal() != syscall.SIGINT {
			t.Errorf("child ended with %v, want death by SIGINT", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("child still running a minute after SIGINT")
	}
	if got := owned(); len(got) != 0 {
		t.Fatalf("after SIGINT %v remain", got)
	}
}
