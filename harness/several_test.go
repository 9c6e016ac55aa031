package harness

import (
	"context"
	"strings"
	"testing"

	"github.com/gomodule/redigo/redis"

	"github.com/locklab/locklab/internal/tooling/backends"
	"github.com/locklab/locklab/internal/tooling/redistest"
	"github.com/locklab/locklab/strategies"
)

// A story told for one node runs on Redlock's three nodes with its
// multi-node schedule; a story with no meaning there stays n/a.
func TestStoryOnSeveralNodes(t *testing.T) {
	rl, err := strategies.Info("redlock")
	if err != nil {
		t.Fatal(err)
	}
	for _, sc := range Scenarios() {
		on := sc.On(rl)
		switch {
		case sc.MultiNode:
			// As it is: its store's known schedules may be added (On
			// copies it then), nothing else.
			if on.Name != sc.Name || !on.MultiNode || on.Schedule != sc.Schedule || len(on.Programs) != len(sc.Programs) ||
				!sc.AppliesTo(rl) {
				t.Errorf("%s: a multi-node scenario runs as it is on redlock", sc.Name)
			}
		case sc.Several == nil:
			if sc.AppliesTo(rl) {
				t.Errorf("%s: applies to redlock without saying how it plays on several nodes", sc.Name)
			}
		default:
			if !sc.AppliesTo(rl) || !on.MultiNode || on.NodesNeeded() != 3 || sc.NodesFor(rl) != 3 {
				t.Errorf("%s on redlock: applies %v, %d nodes", sc.Name, sc.AppliesTo(rl), on.NodesNeeded())
			}
			if on.Schedule != sc.Several.Schedule {
				t.Errorf("%s on redlock: schedule %q, want the multi-node one", sc.Name, on.Schedule)
			}
			if sc.NodesNeeded() != 1 || sc.Schedule == on.Schedule && sc.Schedule != "" {
				t.Errorf("%s: the single-node scenario changed", sc.Name)
			}
		}
	}
	cs, err := Resolve("failover-loses-lock", "redlock")
	if err != nil {
		t.Fatal(err)
	}
	if cs.Scenario.Schedule == mustLookup(t, "failover-loses-lock").Schedule {
		t.Error("Resolve keeps the single-node schedule for redlock")
	}
}

// The node fault a story needs is asked of the node it strikes only: a
// failover of n1 needs a replica behind n1, not behind n2 and n3.
func TestNeedsCheckedPerFaultedNode(t *testing.T) {
	srv := redistest.Start(t, 3)
	nodes := nodesOf(srv)
	m, err := Matrix(context.Background(), MatrixOptions{Nodes: nodes, Strategies: []string{"redlock"},
		Scenarios: []string{"failover-loses-lock", "restart-loses-lock"}})
	if err != nil {
		t.Fatal(err)
	}
	c, _ := m.Cell("redlock", "failover-loses-lock")
	if c.Outcome != NA || c.Message != "n1 cannot failover" {
		t.Errorf("failover on plain nodes: %s %q, want n/a naming n1", c.Outcome, c.Message)
	}
	c, _ = m.Cell("redlock", "restart-loses-lock")
	if c.Outcome != NA || !strings.HasPrefix(c.Message, "n1 cannot") {
		t.Errorf("restart on nodes given by address: %s %q, want n/a naming n1", c.Outcome, c.Message)
	}
}

// A node that writes every command to its append-only file with
// appendfsync always comes back from a restart with the lock: the restart
// of redlock-restart-fsync is SAFE, and the same restart without the file
// loses the lock. The run leaves the file off again.
func TestRedlockRestartWithAppendOnlyFile(t *testing.T) {
	ctx := context.Background()
	nodes := processNodes(t, 3, false)
	cs, err := Resolve("redlock-restart-fsync", "redlock")
	if err != nil {
		t.Fatal(err)
	}
	h, err := Run(ctx, RunOptions{Case: cs, Nodes: nodes, NoRecord: true})
	if err != nil {
		t.Fatal(err)
	}
	if h.Verdict.Outcome != Safe {
		t.Errorf("restart from the append-only file: %v (%s)", h.Verdict, h.Schedule)
	}
	for _, n := range nodes {
		v, err := redis.Strings(n.(commander).Do(ctx, "CONFIG", "GET", "appendonly"))
		if err != nil || len(v) != 2 || v[1] != "no" {
			t.Errorf("%s after the run: appendonly %v %v, want no", n.Name(), v, err)
		}
	}
	bare := *cs.Scenario
	bare.AppendFsync = ""
	h, err = Run(ctx, RunOptions{Case: Case{Scenario: &bare, Strategy: cs.Strategy, Factory: cs.Factory}, Nodes: nodes, NoRecord: true})
	if err != nil {
		t.Fatal(err)
	}
	if h.Verdict.Outcome != Violated {
		t.Errorf("the same restart without the append-only file: %v, want the lock lost", h.Verdict)
	}
}

// A run that leaves a node killed, paused or cut off ends the fault when
// it is over: the next run on the same nodes finds every node up (else its
// FLUSHDB fails on the node). The minority-down story is SAFE on Redlock.
func TestRunEndsItsFaults(t *testing.T) {
	ctx := context.Background()
	nodes := processNodes(t, 3, false)
	cs, err := Resolve("redlock-minority-down", "redlock")
	if err != nil {
		t.Fatal(err)
	}
	for _, sched := range []string{"c1 kill(n3)", "c1 pause(n2)", "c1 partition(n1)", ""} {
		h, err := Run(ctx, RunOptions{Case: cs, Nodes: nodes, Schedule: sched, NoRecord: true})
		if err != nil {
			t.Fatalf("schedule %q: %v", sched, err)
		}
		if h.Verdict.Outcome != Safe {
			t.Errorf("schedule %q: %v (%s)", sched, h.Verdict, h.Schedule)
		}
	}
	for _, n := range nodes {
		if _, err := n.(commander).Do(ctx, "PING"); err != nil {
			t.Errorf("%s after the runs: %v", n.Name(), err)
		}
	}
}

// processNodes starts n redis-server processes the test may fault (kill,
// restart, partition), n1 with an asynchronous replica when replica says
// so, through the Main store's Driver (stores/redis, which redis_test.go
// links in), and closes them when it ends.
func processNodes(t *testing.T, n int, replica bool) []Node {
	t.Helper()
	d, err := MainStore()
	if err != nil {
		t.Fatal(err)
	}
	s, err := d.StartNodes(context.Background(), NodesOptions{Backend: backends.Process, N: n, Replica: replica, Label: t.Name()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s.Nodes
}

// commander is a Redis node as the tests send it a command of their own.
type commander interface {
	Do(ctx context.Context, cmd string, args ...any) (any, error)
}
