package zookeeper

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/locklab/locklab/harness"
	"github.com/locklab/locklab/harness/harnesstest"
	"github.com/locklab/locklab/stores/zookeeper/zkproc/zktest"
)

// ensemble is the test binary's shared ensemble, whose servers grant
// sessions as the driver's do (zktest.SharedConfig is serverConfig), for a
// test that faults no server.
func ensemble(t *testing.T) []harness.Node {
	t.Helper()
	if !slices.Equal(zktest.SharedConfig, serverConfig) {
		t.Fatalf("the shared ensemble's config %q is not the driver's %q", zktest.SharedConfig, serverConfig)
	}
	return []harness.Node{NewNode("n1", zktest.Shared(t))}
}

// timeline is a history's events, one a line, for a failure's message.
func timeline(h *harness.History) string {
	out := ""
	for _, e := range h.Events {
		out += fmt.Sprintf("%d %s %v -> %s %v %v\n", e.Step, e.Label, e.Command, e.Reply, e.Keys, e.Notes)
	}
	return out
}

// TestZooKeeperStore runs catalog scenarios on the zookeeper family's
// locks under explicit schedules, on a real three-server ensemble, each
// request a step, and checks the verdicts a session's lock leads to: a
// holder paused or cut off past its session timeout (the TTL, on the
// run's clock) loses its node to the next client and works on beside it,
// unless the resource checks the fence (the node's czxid); a crashed
// holder's session expires and frees the lock.
func TestZooKeeperStore(t *testing.T) {
	nodes := ensemble(t)
	for _, tc := range []struct {
		strategy, scenario, schedule string
		want                         harness.Outcome
		note                         string
	}{
		{"zk-recipe", "pause-past-ttl", "c1 c1 c1 c1 c2 c2 c2 c2 c2 c1", harness.Violated, "c2 acquired"},
		{"zk-recipe", "pause-past-ttl-fenced", "c1 c1 c1 c1 c2 c2 c2 c2 c2 c1", harness.Safe, "c1 write refused"},
		{"zk-recipe", "partitioned-holder", "c1 c1 c1 isolate(c1) time c2 c2 c2 c2 c2 c1 c1", harness.Violated, "c2 acquired"},
		{"zk-ephemeral", "pause-past-ttl", "c1 c1 c1 c2 c2 c2 c2 c2 c1", harness.Violated, "c2 acquired"},
		// C1 stops between its release's read and its delete, and its
		// session expires: C2's node has the version C1 read, but the
		// delete goes out on the connection the session's end closed.
		{"zk-ephemeral", "pause-in-release", "c1 c1 c1 c1 pause(c1) time c2 c2 resume(c1) c1", harness.Safe,
			"c1 release failed: locklab: server unreachable or failed: zk: connection closed"},
		{"zk-recipe", "crash-before-expire", "", harness.Safe, ""},
		// zk-golib's Lock waits on its predecessor's watch between steps:
		// the holder's delete wakes it (step 8 is c1's, after c2's
		// release), as does the end of the holder's session, and the end
		// of its own session fails it.
		{"zk-golib", "partitioned-holder", "c2 c1 c1 c1 c2 c2 c2 c1", harness.Safe, "c1 acquired"},
		{"zk-golib", "pause-past-ttl", "c1 c1 c1 c2 c2 c2 c2 c1", harness.Violated, "c2 acquired"},
		// A create whose reply is lost (lose): zk-recipe finds its node
		// by its GUID and goes on; zk-ephemeral's retry meets its own
		// node, which its live session keeps; zk.Lock returns an error
		// with its node left in line, and its retry waits behind it
		// (go-zookeeper#229): every later client is refused for good.
		{"zk-recipe", "lost-reply", "lose(c1) c1 c1 c1 c1", harness.Safe, "c1 acquired"},
		{"zk-ephemeral", "lost-reply", "c2 lose(c1) c2 c2 c2 c2 c1 c1", harness.Deadlock, "c1 refused"},
		{"zk-golib", "lost-reply", "c2 c1 lose(c1) c1 c1 c1 c1 c2 c2 c2", harness.Deadlock,
			"c1 acquire failed: locklab: server unreachable or failed: zk: connection closed"},
		{"zk-golib", "partitioned-holder", "c2 c1 c1 c1 c2 c2 isolate(c1) time c2",
			harness.Safe, "c1 acquire failed: locklab: server unreachable or failed: zk: session has been expired by the server"},
		// session-replaced: the holder's session expires while it is cut
		// off; back on a new session, the delete of its release reaches
		// the ensemble and finds no node. zk.Lock gives no fence, and the
		// resource takes its stale write; zk-recipe's czxid is refused.
		// Cut between its create and its getChildren, zk.Lock's
		// getChildren fails on the closed connection.
		{"zk-golib", "session-replaced", "c1 c1 isolate(c1) time c2 c2 c2 rejoin(c1) c1 c1 c2", harness.Violated,
			"c1 release: not held"},
		{"zk-recipe", "session-replaced", "c1 c1 c1 isolate(c1) time c2 c2 c2 c2 rejoin(c1) c1 c1 c2", harness.Safe,
			"c1 write refused"},
		{"zk-golib", "session-replaced", "c1 isolate(c1) time rejoin(c1) c2 c2 c2 c1 c2", harness.Safe,
			"c1 acquire failed: locklab: server unreachable or failed: zk: connection closed"},
	} {
		t.Run(tc.strategy+"/"+tc.scenario, func(t *testing.T) {
			cs, err := harness.Resolve(tc.scenario, tc.strategy)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			h, err := harness.Run(ctx, harness.RunOptions{Case: cs, Nodes: nodes, Schedule: tc.schedule})
			if err != nil {
				t.Fatal(err)
			}
			if h.Verdict.Outcome != tc.want || (tc.note != "" && !harnesstest.Noted(h, tc.note)) {
				t.Fatalf("%s: %v, want %s with a note %q\n%s", h.Schedule, h.Verdict, tc.want, tc.note, timeline(h))
			}
		})
	}
}

// TestZooKeeperLabels: each request of an acquire is a step, shown as
// zkCli would name it, with the lock's path as P and the protected node's
// GUID as the client that made it.
func TestZooKeeperLabels(t *testing.T) {
	nodes := ensemble(t)
	cs, err := harness.Resolve("pause-past-ttl", "zk-recipe")
	if err != nil {
		t.Fatal(err)
	}
	h, err := harness.Run(context.Background(), harness.RunOptions{Case: cs, Nodes: nodes, Schedule: "c1 c1 c1"})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range h.Events[:3] {
		got = append(got, fmt.Sprintf("%s -> %s", strings.Join(e.Command, " "), e.Reply))
	}
	want := []string{
		"create -e -s P/_c_c1-lock- -> P/_c_c1-lock-0000000000",
		"ls P -> [_c_c1-lock-0000000000]",
		"exists P/_c_c1-lock-0000000000 -> @",
	}
	for i := range want {
		if !strings.HasPrefix(got[i], want[i]) {
			t.Errorf("step %d: %q, want %q…", i+1, got[i], want[i])
		}
	}
}

// TestZooKeeperExplore explores cells of both session locks to the end of
// the explorer's bound, each on a fresh ensemble: a run must replay the
// same way every time its schedule is taken again, or the walk fails. The
// holder that sleeps past its session timeout works beside its successor;
// a crashed holder's session expires and the next client gets the lock; a
// clock that runs ahead reaches no session; zk-golib's waiter wakes when
// its predecessor goes.
func TestZooKeeperExplore(t *testing.T) {
	if testing.Short() {
		t.Skip("explores schedules on ZooKeeper")
	}
	for _, tc := range []struct {
		strategy, scenario string
		want               harness.Outcome
	}{
		{"zk-recipe", "pause-past-ttl", harness.Violated},
		{"zk-ephemeral", "crash-before-expire", harness.Safe},
		{"zk-ephemeral", "clock-skew", harness.Safe},
		// zk-golib's waits: each schedule's choices are the same whether
		// a watch's event reached the waiter before or after the step
		// that caused it ended.
		{"zk-golib", "crash-before-expire", harness.Safe},
	} {
		t.Run(tc.strategy+"/"+tc.scenario, func(t *testing.T) {
			nodes := ensemble(t)
			cs, err := harness.Resolve(tc.scenario, tc.strategy)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			res, err := harness.Explore(ctx, harness.ExploreOptions{Case: cs, Nodes: nodes, MaxSchedules: 300})
			if err != nil {
				t.Fatal(err)
			}
			if res.Outcome != tc.want || !res.Complete {
				t.Fatalf("%s after %d schedules (complete %v), want %s in full", res.Outcome, res.Schedules, res.Complete, tc.want)
			}
			t.Logf("%s after %d schedules", res.Outcome, res.Schedules)
		})
	}
}

// TestZooKeeperTouches: every request of the three locks is declared with
// what it reads and writes, and the declarations say what commutes: two
// clients' creates of sequential nodes both move the zxid (the fences);
// a read of a node commutes with a read of the queue.
func TestZooKeeperTouches(t *testing.T) {
	nodes := ensemble(t)
	for _, strategy := range strategyNames {
		cs, err := harness.Resolve("pause-past-ttl", strategy)
		if err != nil {
			t.Fatal(err)
		}
		h, err := harness.Run(context.Background(), harness.RunOptions{Case: cs, Nodes: nodes})
		if err != nil {
			t.Fatal(err)
		}
		// Two runs of one schedule declare the same names: the
		// reduction compares one run's steps with another's.
		again, err := harness.Run(context.Background(), harness.RunOptions{Case: cs, Nodes: nodes})
		if err != nil {
			t.Fatal(err)
		}
		if a, b := fmt.Sprint(touchesOf(h)), fmt.Sprint(touchesOf(again)); a != b {
			t.Errorf("%s: two runs declare\n%s\nand\n%s", strategy, a, b)
		}
		requests := 0
		for _, e := range h.Events {
			if e.Client == 0 || e.Node == 0 {
				continue // a time step or fault, a local step
			}
			requests++
			if e.Touch == nil {
				t.Errorf("%s: step %d (%v) declares nothing", strategy, e.Step, e.Command)
			}
		}
		if requests < 4 {
			t.Errorf("%s: %d requests in\n%s", strategy, requests, timeline(h))
		}
	}
	create := touches(request{op: opCreate, path: "/l/_c_a-lock-", flags: flagEphemeral | flagSequential})
	ls := touches(request{op: opGetChildren, path: "/l"})
	get := touches(request{op: opGetData, path: "/l/_c_b-lock-0000000001", watch: true})
	del := touches(request{op: opDelete, path: "/l/_c_b-lock-0000000001"})
	for _, tc := range []struct {
		name string
		t, u *harness.Touch
		want bool
	}{
		{"create, create", create, create, true},
		{"create, ls", create, ls, true},
		{"create, get", create, get, false},
		{"ls, get", ls, get, false},
		{"delete, get", del, get, true},
		{"delete, ls", del, ls, true},
	} {
		harnesstest.Conflict(t, tc.name, tc.t, tc.u, tc.want)
	}
	harnesstest.Undeclared(t, "a sync", touches(request{op: opSync, path: "/l"}))
}

// touchesOf lists what each step of h declares.
func touchesOf(h *harness.History) []harness.Touch {
	var out []harness.Touch
	for _, e := range h.Events {
		if e.Touch != nil {
			out = append(out, *e.Touch)
		}
	}
	return out
}

// TestZooKeeperWorkersAgree: an exploration on ZooKeeper runs the same
// schedules to the same verdict and counterexample on one worker as on
// four, each worker locking a key of its own (its paths, its sessions) on
// the one ensemble.
func TestZooKeeperWorkersAgree(t *testing.T) {
	if testing.Short() {
		t.Skip("explores schedules on ZooKeeper")
	}
	harnesstest.WorkersAgree(t, ensemble(t), "zk-recipe", 2, "pause-past-ttl", "crash-before-expire")
}
