package etcd

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/locklab/locklab/harness"
	"github.com/locklab/locklab/harness/harnesstest"
	"github.com/locklab/locklab/stores/etcd/etcdproc"
	"github.com/locklab/locklab/stores/etcd/etcdproc/etcdtest"
	_ "github.com/locklab/locklab/strategies/etcdlock" // registers the etcd family
)

// TestEtcdStore runs catalog scenarios on etcd's lock, on a real
// three-member etcd cluster, each request a step, and checks the verdicts
// Jepsen's analysis of etcd 3.4.3 leads to: a holder paused or cut off
// past its lease works on beside its successor unless the resource checks
// the fence (the key's create revision); the lock survives the loss of its
// leader, a restart, a clock that runs ahead.
func TestEtcdStore(t *testing.T) {
	if testing.Short() {
		t.Skip("explores schedules on etcd")
	}
	nodes := []harness.Node{NewNode("n1", etcdtest.Start(t, etcdproc.Options{}))}
	for _, tc := range []struct {
		scenario string
		want     harness.Outcome
	}{
		{"stale-recovery", harness.Safe},
		{"release-after-expiry", harness.Safe},
		{"clock-skew", harness.Safe},
		{"crash-before-expire", harness.Safe},
		{"pause-past-ttl", harness.Violated},
		{"pause-past-ttl-fenced", harness.Safe},
		{"partitioned-holder", harness.Violated},
		{"restart-loses-lock", harness.Safe},
	} {
		t.Run(tc.scenario, func(t *testing.T) {
			cs, err := harness.Resolve(tc.scenario, "etcd-lease")
			if err != nil {
				t.Fatal(err)
			}
			// A violation found is enough (its schedules lie deeper than
			// Redis's: an acquire is two requests); SAFE is within the bound.
			max := 150
			switch {
			case tc.want != harness.Safe:
				max = 3000
			case tc.scenario == "restart-loses-lock":
				max = 40 // each schedule restarts the leader: about 0.7s
			}
			res, err := harness.Explore(context.Background(), harness.ExploreOptions{Case: cs, Nodes: nodes, MaxSchedules: max,
				StopAtFirst: tc.want != harness.Safe})
			if err != nil {
				t.Fatal(err)
			}
			if res.Outcome != tc.want {
				msg := ""
				if res.Counterexample != nil {
					for _, e := range res.Counterexample.Events {
						msg += fmt.Sprintf("%d %s %v -> %s %v %v\n", e.Step, e.Label, e.Command, e.Reply, e.Keys, e.Notes)
					}
				}
				t.Fatalf("%s: %s after %d schedules, want %s\n%s", tc.scenario, res.Outcome, res.Schedules, tc.want, msg)
			}
			t.Logf("%s after %d schedules (complete %v)", res.Outcome, res.Schedules, res.Complete)
		})
	}
}

// TestEtcdFailoverKeepsLock: failover-loses-lock on etcd's lock. The
// leader is killed (not restarted) while c1 holds the lock; the other two
// members elect a new leader, which has the lock's key, and c2 is refused.
// The killed member is started again before the next run.
func TestEtcdFailoverKeepsLock(t *testing.T) {
	cl := etcdtest.Start(t, etcdproc.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	before, err := cl.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	pid := before.Pid()
	nodes := []harness.Node{NewNode("n1", cl)}
	cs := harnesstest.Case(t, "failover-loses-lock", "etcd-lease")
	h, err := harness.Run(ctx, harness.RunOptions{Case: cs, Nodes: nodes, Schedule: "c1 c1 failover(n1) c2 c2"})
	if err != nil {
		t.Fatal(err)
	}
	if h.Verdict.Outcome != harness.Safe {
		t.Fatalf("etcd failover: %v\n%s", h.Verdict, h.Schedule)
	}
	refused := false
	for _, e := range h.Events {
		if e.Client == 2 && e.Step > 3 && slices.Contains(e.Notes, "c2 refused") {
			refused = true
		}
	}
	if !refused {
		t.Errorf("c2 was not refused after the failover: %s", h.Schedule)
	}
	// The killed leader was started again, as a new process, before the
	// run's servers were handed back.
	if !before.Running() || before.Pid() == pid {
		t.Errorf("the leader %s (pid %d) was not killed and started again: running %v, pid %d",
			before.Name, pid, before.Running(), before.Pid())
	}
}

// TestEtcdLostReply: the Txn that puts c1's key is carried out and its
// reply lost (lose): etcd's client does not retry a Txn, etcd-lease's
// failed acquire revokes its lease and the key with it, and c1's retry
// acquires on a new lease; c2 is refused while c1 holds it.
func TestEtcdLostReply(t *testing.T) {
	cl := etcdtest.Start(t, etcdproc.Options{})
	nodes := []harness.Node{NewNode("n1", cl)}
	cs := harnesstest.Case(t, "lost-reply", "etcd-lease")
	h, err := harness.Run(context.Background(), harness.RunOptions{Case: cs, Nodes: nodes, Schedule: "c1 lose(c1) c1 c1 c1 c1 c2 c2"})
	if err != nil {
		t.Fatal(err)
	}
	if h.Verdict.Outcome != harness.Safe || !harnesstest.Noted(h, "c1 acquire failed") || !harnesstest.Noted(h, "c1 acquired") ||
		!harnesstest.Noted(h, "c2 refused") {
		t.Fatalf("%v\n%s", h.Verdict, h.Schedule)
	}
	if !slices.ContainsFunc(h.Events, func(e harness.Event) bool {
		return e.Label == "c1" && strings.Contains(e.Reply, "then") &&
			slices.Contains(e.Notes, "the reply is lost: c1's connection drops")
	}) {
		t.Errorf("no Txn of c1's shows its reply lost: %s", h.Schedule)
	}
}

// TestEtcdSessionReplaced: session-replaced on etcd's locks. The holder
// is cut off, its lease runs out and its key goes, c2 takes the lock and
// writes; back, c1's client reaches the cluster again, but no request of
// the lock tells it the lease is gone: its write, fenced with its key's
// create revision, is refused, etcd-lease's release finds the lease gone,
// and Mutex.Unlock deletes nothing and succeeds.
func TestEtcdSessionReplaced(t *testing.T) {
	cl := etcdtest.Start(t, etcdproc.Options{})
	nodes := []harness.Node{NewNode("n1", cl)}
	for _, tc := range []struct {
		strategy, schedule, release string
	}{
		{"etcd-lease", "c1 c1 isolate(c1) time c2 c2 c2 rejoin(c1) c1 c1 c1 c2 c2", "c1 release: not held"},
		{"etcd-mutex", "c1 c1 isolate(c1) time c2 c2 c2 rejoin(c1) c1 c1 c2", "c1 released"},
	} {
		t.Run(tc.strategy, func(t *testing.T) {
			h, err := harness.Run(t.Context(), harness.RunOptions{Case: harnesstest.Case(t, "session-replaced", tc.strategy),
				Nodes: nodes, Schedule: tc.schedule})
			if err != nil {
				t.Fatal(err)
			}
			if h.Verdict.Outcome != harness.Safe || !harnesstest.Noted(h, "c2 acquired") || !harnesstest.Noted(h, "c1 write refused") ||
				!harnesstest.Noted(h, tc.release) {
				t.Fatalf("%v, want SAFE with c2 acquired, c1's write refused and %q\n%s", h.Verdict, tc.release, h.Schedule)
			}
			if tc.strategy == "etcd-mutex" && !slices.ContainsFunc(h.Events, func(e harness.Event) bool {
				return e.Client == 1 && strings.Contains(e.Reply, "deleted 0")
			}) {
				t.Errorf("c1's Unlock deleted a key: %s", h.Schedule)
			}
		})
	}
}

// TestEtcdKeepalive: the matrix runs etcd-lease with its session's
// keepalive, as etcd's Mutex runs it: a holder that runs and reaches the
// cluster keeps its lease while time passes, and the contender is
// refused; one cut off loses it.
func TestEtcdKeepalive(t *testing.T) {
	cl := etcdtest.Start(t, etcdproc.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	nodes := []harness.Node{NewNode("n1", cl)}
	if harness.RunSetting("etcd-lease") != "keepalive" {
		t.Fatalf("etcd-lease runs as %q", harness.RunSetting("etcd-lease"))
	}
	for _, tc := range []struct {
		schedule string
		want     harness.Outcome
		renewed  bool
	}{
		{"c1 c1 time c2 c2 c2 c2 c2 c1", harness.Safe, true},
		{"c1 c1 isolate(c1) time c2 c2 c2 c2 c2 c1", harness.Violated, false},
	} {
		h, err := harness.Run(ctx, harness.RunOptions{Case: harnesstest.Case(t, "partitioned-holder", "etcd-lease"), Nodes: nodes, Schedule: tc.schedule})
		if err != nil {
			t.Fatal(err)
		}
		renewed := harnesstest.Noted(h, "c1's keepalive renewed")
		if h.Verdict.Outcome != tc.want || renewed != tc.renewed {
			t.Errorf("%q: %v, renewed %v; want %s, renewed %v", tc.schedule, h.Verdict, renewed, tc.want, tc.renewed)
		}
	}
}

// TestEtcdWorkersAgree: an exploration on etcd runs the same schedules to
// the same verdict and counterexample on one worker as on four, each
// worker locking a key of its own on the one cluster: a cell of the matrix
// can take workers from its pool without its figures moving. -short
// explores pause-past-ttl alone.
func TestEtcdWorkersAgree(t *testing.T) {
	cl := etcdtest.Start(t, etcdproc.Options{})
	nodes := []harness.Node{NewNode("n1", cl)}
	scenarios := []string{"pause-past-ttl", "crash-before-expire"}
	if testing.Short() {
		scenarios = scenarios[:1]
	}
	harnesstest.WorkersAgree(t, nodes, "etcd-lease", 2, scenarios...)
}
