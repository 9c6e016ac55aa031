package harness

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/locklab/locklab/internal/tooling/redistest"
)

// TestInteractiveC1C2: stepping the C1/C2 schedule by hand breaks
// setnx-del at the same step as Run, shows each pending command with its
// arguments, refuses steps that cannot run without changing the run, and a
// replayed prefix ends in the same state.
func TestInteractiveC1C2(t *testing.T) {
	nodes := nodesOf(redistest.Start(t, 1))
	ctx := context.Background()
	p, err := StartInteractive(ctx, InteractiveOptions{Case: mustCase(t, "stale-recovery", "setnx-del"), Nodes: nodes})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	st := p.State()
	if st.Steps != 0 || len(st.Clients) != 3 || st.Done {
		t.Fatalf("initial state: %+v", st)
	}
	if got := st.Clients[0].Next; len(got) != 1 || got[0].Step != "c1" || got[0].Command[0] != "acquire" {
		t.Fatalf("c1's next step: %+v", got)
	}
	if len(st.Faults) != 1 || st.Faults[0] != "time" {
		t.Fatalf("faults: %v", st.Faults)
	}
	for _, bad := range []string{"c9", "crash(c1)", "restart(n1)", "nonsense("} {
		if _, err := p.Step(ctx, bad); !errors.Is(err, ErrBadStep) {
			t.Fatalf("step %q: %v, want ErrBadStep", bad, err)
		}
	}
	if p.State().Steps != 0 {
		t.Fatal("a refused step changed the run")
	}
	sched, err := ParseSchedule("c3 time c1 c2 c1 c2 c1 c1 c2 c2")
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range sched {
		st, err = p.Step(ctx, s.String())
		if err != nil {
			t.Fatalf("step %d (%s): %v", i+1, s, err)
		}
		if st.Steps != i+1 {
			t.Fatalf("after step %d: Steps=%d", i+1, st.Steps)
		}
		if i == 6 {
			// c1 has sent GET and DEL; its SETNX is next, with its token.
			next := st.Clients[0].Next
			if len(next) != 1 || next[0].Command[0] != "SETNX" || next[0].Command[1] != "lock:stale-recovery" || len(next[0].Command) != 3 {
				t.Fatalf("c1's next command after step 7: %+v", next)
			}
		}
		if v, bad := st.Violation(); bad != (i == 9) {
			t.Fatalf("after step %d: violation %v (%v)", i+1, bad, v)
		}
	}
	if _, err := p.Step(ctx, "time"); !errors.Is(err, ErrBadStep) {
		t.Fatalf("a second time: %v", err)
	}
	v, _ := st.Violation()
	if v.Property != MutualExclusion || v.Step != 10 {
		t.Fatalf("violation: %+v", v)
	}
	last := st.History.Events[9]
	if last.Violation != string(MutualExclusion) || len(last.Keys) != 1 || last.Keys[0] == "-" {
		t.Fatalf("step 10: %+v", last)
	}
	// Undo: the prefix minus the last step, replayed on fresh state.
	u, err := StartInteractive(ctx, InteractiveOptions{Case: mustCase(t, "stale-recovery", "setnx-del"), Nodes: nodes, DB: 1,
		Prefix: sched[:9].String()})
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	us := u.State()
	if us.Steps != 9 || us.Schedule != sched[:9].String() {
		t.Fatalf("replayed: %d steps, %q", us.Steps, us.Schedule)
	}
	if _, bad := us.Violation(); bad {
		t.Fatal("undo kept the violation")
	}
	if next := us.Clients[1].Next; len(next) != 1 || !strings.HasPrefix(next[0].Command[0], "SETNX") {
		t.Fatalf("c2's next after undo: %+v", next)
	}
	// Finish: the clients run to their end, the run is over.
	for !st.Done {
		var step string
		for _, c := range st.Clients {
			if len(c.Next) > 0 {
				step = c.Next[0].Step
				break
			}
		}
		if step == "" {
			t.Fatalf("not done, yet no client can step: %+v", st)
		}
		if st, err = p.Step(ctx, step); err != nil {
			t.Fatal(err)
		}
	}
	if st.History.Verdict.Outcome != Violated {
		t.Fatalf("final verdict %v", st.History.Verdict)
	}
	if _, err := p.Step(ctx, "c1"); !errors.Is(err, ErrRunOver) {
		t.Fatalf("step after the end: %v", err)
	}
	if _, err := StartInteractive(ctx, InteractiveOptions{Case: mustCase(t, "stale-recovery", "setnx-del"), Nodes: nodes, Prefix: "c3 c3 c3 c3 c9"}); err == nil {
		t.Fatal("a prefix naming a missing client replayed")
	}
}

// TestInteractiveDeadlock: a run that ends in the liveness probe reports
// the steps played apart from the probe's, so that undo replays only
// those.
func TestInteractiveDeadlock(t *testing.T) {
	nodes := nodesOf(redistest.Start(t, 1))
	ctx := context.Background()
	p, err := StartInteractive(ctx, InteractiveOptions{Case: mustCase(t, "crash-before-expire", "setnx-expire"), Nodes: nodes})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	var st InteractiveState
	for _, s := range []string{"c1", "crash(c1)", "c2", "c2"} {
		if st, err = p.Step(ctx, s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	if !st.Done || st.History.Verdict.Outcome != Deadlock {
		t.Fatalf("after c1 crash(c1) c2 c2: done=%v verdict %v", st.Done, st.History.Verdict)
	}
	if st.Steps != 4 || st.Schedule != "c1 crash(c1) c2 c2" {
		t.Fatalf("played: %d %q", st.Steps, st.Schedule)
	}
	if !strings.HasPrefix(st.History.Schedule, st.Schedule+" time(") {
		t.Fatalf("the history lacks the probe's steps: %q", st.History.Schedule)
	}
	u, err := StartInteractive(ctx, InteractiveOptions{Case: mustCase(t, "crash-before-expire", "setnx-expire"), Nodes: nodes, Prefix: "c1 crash(c1) c2"})
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	if s := u.State(); s.Done || s.Steps != 3 {
		t.Fatalf("undo: done=%v steps=%d", s.Done, s.Steps)
	}
}
