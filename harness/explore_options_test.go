package harness

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/internal/tooling/redistest"
)

// TestExploreRefusesBadOptions: a bound out of its range is refused with
// ErrInvalid before anything runs, never replaced by a default.
func TestExploreRefusesBadOptions(t *testing.T) {
	cs := mustCase(t, "stale-recovery", "setnx-del")
	for _, c := range []struct {
		o    ExploreOptions
		want string
	}{
		{ExploreOptions{Clients: -1}, "Clients -1"},
		{ExploreOptions{MaxSteps: -5}, "MaxSteps -5"},
		{ExploreOptions{MaxPreemptions: -7}, "MaxPreemptions -7"},
		{ExploreOptions{MaxFaults: -2}, "MaxFaults -2"},
		{ExploreOptions{MaxSchedules: -1}, "MaxSchedules -1"},
		{ExploreOptions{Samples: -5, Random: true}, "Samples -5"},
		{ExploreOptions{Workers: -3}, "Workers -3"},
		{ExploreOptions{Workers: MaxWorkers + 1}, "Workers 17"},
		{ExploreOptions{DB: -1}, "DB -1"},
	} {
		c.o.Case = cs // no Nodes: the options are refused before the nodes are looked at
		_, err := Explore(context.Background(), c.o)
		if !errors.Is(err, locklab.ErrInvalid) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want ErrInvalid naming %q", c.o, err, c.want)
		}
	}
}

// TestMatrixRefusesBadOptions: so does the matrix, before any cell runs
// (and without nodes), rather than after the cells before the first that
// uses the bound.
func TestMatrixRefusesBadOptions(t *testing.T) {
	mine := &Scenario{Name: "mine", Property: MutualExclusion, Programs: MustPrograms("acquire")}
	for _, c := range []struct {
		o    MatrixOptions
		want string
	}{
		{MatrixOptions{Parallel: -1}, "Parallel -1"},
		{MatrixOptions{Workers: -3}, "Workers -3"},
		{MatrixOptions{Workers: MaxWorkers + 1}, "Workers 17"},
		{MatrixOptions{MaxPreemptions: -2}, "MaxPreemptions -2"},
		{MatrixOptions{MaxSchedules: -1}, "MaxSchedules -1"},
		{MatrixOptions{StorePreemptions: -4}, "StorePreemptions -4"},
		{MatrixOptions{StoreSchedules: -5}, "StoreSchedules -5"},
		{MatrixOptions{Extra: []*Scenario{{Name: "stale-recovery", Property: MutualExclusion,
			Programs: MustPrograms("acquire")}}}, "is the catalog's"},
		{MatrixOptions{Extra: []*Scenario{{Name: "mine", Property: MutualExclusion}}}, "no client program"},
		{MatrixOptions{Extra: []*Scenario{{Name: "mine", Property: "liveness", Programs: MustPrograms("acquire")}}}, `checks "liveness"`},
		{MatrixOptions{Extra: []*Scenario{{Name: "mine", Property: MutualExclusion, Programs: MustPrograms("acquire"),
			Faults: []string{"isolate(c1"}}}}, "scenario mine"},
		{MatrixOptions{Extra: []*Scenario{nil}}, "nil scenario"},
		{MatrixOptions{Extra: []*Scenario{mine, mine}}, `two scenarios of one's own are named "mine"`},
	} {
		_, err := Matrix(context.Background(), c.o)
		if !errors.Is(err, locklab.ErrInvalid) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want ErrInvalid naming %q", c.o, err, c.want)
		}
	}
}

// TestExploreBoundsMeanWhatTheySay: -1 preemptions and -1 faults are none,
// and a search cut short by MaxSchedules headlines INCOMPLETE, not SAFE.
func TestExploreBoundsMeanWhatTheySay(t *testing.T) {
	nodes := nodesOf(redistest.Start(t, 1))
	ctx := context.Background()
	cs := mustCase(t, "crash-before-expire", "incr-expire")
	res, err := Explore(ctx, ExploreOptions{Case: cs, Nodes: nodes})
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != Deadlock || res.Headline() != string(Deadlock) {
		t.Fatalf("crash-before-expire on incr-expire: %s (%s), want DEADLOCK", res.Outcome, res.Headline())
	}
	res, err = Explore(ctx, ExploreOptions{Case: cs, Nodes: nodes, MaxFaults: -1})
	if err != nil {
		t.Fatal(err)
	}
	if res.Counterexample != nil || !res.Complete || res.Headline() != "SAFE" {
		t.Errorf("without faults (the deadlock needs a crash): %s after %d schedules, complete %v", res.Headline(), res.Schedules, res.Complete)
	}

	cs = mustCase(t, "release-after-expiry", "set-nx-px")
	all, err := Explore(ctx, ExploreOptions{Case: cs, Nodes: nodes})
	if err != nil {
		t.Fatal(err)
	}
	none, err := Explore(ctx, ExploreOptions{Case: cs, Nodes: nodes, MaxPreemptions: -1})
	if err != nil {
		t.Fatal(err)
	}
	if !none.Complete || none.Schedules >= all.Schedules {
		t.Errorf("no preemption: %d schedules (complete %v), want fewer than the default bound's %d", none.Schedules, none.Complete, all.Schedules)
	}
	cut, err := Explore(ctx, ExploreOptions{Case: cs, Nodes: nodes, MaxSchedules: 5})
	if err != nil {
		t.Fatal(err)
	}
	if cut.Complete || cut.Schedules != 5 || cut.Headline() != Incomplete {
		t.Errorf("cut at 5 schedules: %s after %d, complete %v; want INCOMPLETE", cut.Headline(), cut.Schedules, cut.Complete)
	}
	if all.Headline() != "SAFE" {
		t.Errorf("every schedule of set-nx-px on release-after-expiry: %s, want SAFE", all.Headline())
	}
}
