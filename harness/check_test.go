package harness

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/locklab/locklab/internal/tooling/redistest"
)

// recordedHistories reads the histories harness/render keeps in its
// testdata, recorded from real runs.
func recordedHistories(t *testing.T) map[string]*History {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("render", "testdata", "histories", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no recorded histories (%v)", err)
	}
	out := map[string]*History{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var h History
		if err := json.Unmarshal(b, &h); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		out[filepath.Base(f)] = &h
	}
	return out
}

// TestCheckersOnRecordedHistories judges histories recorded from real runs
// again, without Redis: every checker reaches the verdict the run reached,
// and among them are a violation of each property.
func TestCheckersOnRecordedHistories(t *testing.T) {
	seen := map[Outcome]bool{}
	props := map[Property]bool{}
	for name, h := range recordedHistories(t) {
		sc, err := Lookup(h.Scenario)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		v := checkProperty(h, sc.Property, sc.Waiter)
		if v != h.Verdict {
			t.Errorf("%s: checked again %v, recorded %v", name, v, h.Verdict)
		}
		seen[v.Outcome] = true
		if v.Failed() {
			props[v.Property] = true
		}
	}
	for _, o := range []Outcome{Safe, Violated, Deadlock, Starvation} {
		if !seen[o] {
			t.Errorf("no recorded history is %s", o)
		}
	}
	for _, p := range []Property{MutualExclusion, ReleaseSafety, Fencing, NoDeadlock, NoStarvation} {
		if !props[p] {
			t.Errorf("no recorded history violates %s", p)
		}
	}
}

// TestCheckersCatchBrokenHistories: a safe recorded history made unsafe
// by hand (a second holder, an accepted stale write, a wrongful release, a
// probe that could not acquire) fails the matching checker.
func TestCheckersCatchBrokenHistories(t *testing.T) {
	safe := recordedHistories(t)["stale-recovery--setnx-getset.json"]
	if safe == nil || safe.Verdict.Outcome != Safe {
		t.Fatal("the recorded setnx-getset run is not safe")
	}
	clone := func() *History {
		b, _ := json.Marshal(safe)
		var h History
		if err := json.Unmarshal(b, &h); err != nil {
			t.Fatal(err)
		}
		return &h
	}
	h := clone()
	h.Events[3].Holders = []int{1, 2}
	if v := checkMutualExclusion(h); v.Outcome != Violated || v.Step != h.Events[3].Step {
		t.Errorf("two holders: %v", v)
	}
	h = clone()
	h.Writes = append(h.Writes, Write{Client: 1, Step: 9, Fence: 0, Accepted: true, Stale: true})
	if v := checkFencing(h); v.Outcome != Violated {
		t.Errorf("stale write accepted: %v", v)
	}
	h = clone()
	if !checkReleaseStep(h, 2, releaseProbe{client: 1, victim: 2, node: 1, victimHolds: true,
		heldBefore: tokenHolds([]byte("t2"), "t2"), heldAfter: tokenHolds(nil, "t2")}) {
		t.Fatal("a release that deleted the holder's key was not caught")
	}
	if v := checkRelease(h); v.Outcome != Violated || v.Step != h.Events[2].Step {
		t.Errorf("wrongful release: %v", v)
	}
	if checkReleaseStep(clone(), 2, releaseProbe{client: 1, victim: 2, victimHolds: true,
		heldBefore: tokenHolds([]byte("t2"), "t2"), heldAfter: tokenHolds([]byte("t2"), "t2")}) {
		t.Error("a release that left the holder's key alone was flagged")
	}
	h = clone()
	no := false
	h.Probe = &no
	if v := checkDeadlock(h); v.Outcome != Deadlock {
		t.Errorf("probe refused: %v", v)
	}
}

// TestLivenessProbeTellsRepairFromDeadlock: the holder crashes with its key
// left without a TTL. setnx-forever's key stays for ever: both probes are
// refused, DEADLOCK. setnx-expire-always's refused probe runs its own
// PEXPIRE, which gives the orphaned key a TTL: the second probe, a TTL
// later, acquires, and that is no deadlock.
func TestLivenessProbeTellsRepairFromDeadlock(t *testing.T) {
	nodes := nodesOf(redistest.Start(t, 1))
	cases := []struct {
		strategy, schedule string
		want               Outcome
		tries              int
	}{
		{"setnx-forever", "c1 crash(c1)", Deadlock, 2},
		{"incr-expire", "c1 crash(c1)", Deadlock, 2},
		{"setnx-expire-always", "c2 c2 c2 c2 c1 crash(c1)", Safe, 2},
		{"set-nx-px", "c1 crash(c1)", Safe, 1},
	}
	for _, c := range cases {
		h, err := Run(context.Background(), RunOptions{Case: mustCase(t, "crash-before-expire", c.strategy), Nodes: nodes, Schedule: c.schedule})
		if err != nil {
			t.Fatalf("%s: %v", c.strategy, err)
		}
		if h.Verdict.Outcome != c.want || h.ProbeTries != c.tries {
			t.Errorf("%s after %q: %v with %d probes, want %s with %d", c.strategy, c.schedule, h.Verdict, h.ProbeTries, c.want, c.tries)
		}
		probes := 0
		for _, cl := range h.Clients {
			if cl.Probe {
				probes++
			}
		}
		if probes != c.tries {
			t.Errorf("%s: %d probe clients in the history, want %d", c.strategy, probes, c.tries)
		}
	}
}
