package harness

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/locklab/locklab/internal/tooling/redistest"
)

func TestMatrixPrint(t *testing.T) {
	if os.Getenv("LOCKLAB_MATRIX") == "" {
		t.Skip("set LOCKLAB_MATRIX=1")
	}
	nodes := nodesOf(redistest.Start(t, 3))
	m, err := Matrix(context.Background(), MatrixOptions{Nodes: nodes, Workers: 2, Progress: func(c Cell) {
		fmt.Printf("%-22s %-18s %-10s %5d %v %s | %s\n", c.Scenario, c.Strategy, c.Outcome, c.Schedules, c.Complete, c.Schedule, c.Message)
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Log(m.Elapsed)
}

// A strategy that waits for a replica has nothing to run on a node
// without one: its cells are n/a, not failed acquires.
func TestReplicaStrategyNAWithoutReplica(t *testing.T) {
	nodes := nodesOf(redistest.Start(t, 1))
	m, err := Matrix(context.Background(), MatrixOptions{Nodes: nodes,
		Strategies: []string{"set-nx-px-wait", "set-nx-px"}, Scenarios: []string{"release-after-expiry"}})
	if err != nil {
		t.Fatal(err)
	}
	c, _ := m.Cell("set-nx-px-wait", "release-after-expiry")
	if c.Outcome != NA || !strings.Contains(c.Message, "replica") {
		t.Errorf("set-nx-px-wait without a replica: %s %q, want n/a naming the replica", c.Outcome, c.Message)
	}
	c, _ = m.Cell("set-nx-px", "release-after-expiry")
	if c.Outcome != Safe {
		t.Errorf("set-nx-px: %s, want safe", c.Outcome)
	}
}

// TestReductionKeepsCounterexamples: on every cell of the matrix, at
// bound 2, on redis-server processes (so that restarts and failovers run
// too), the explorer that does not branch inside transactions reaches the
// plain enumeration's verdict, with a shortest counterexample of the same
// length, and runs no more schedules, with an exact count of the plain
// enumeration's where it gives one. On a SAFE cell whose strategy sends
// no transaction, the reduced walk's runs fall into as many traces as the
// plain walk's: it reaches every one (a transaction's cells may have
// fewer, runPrefix's argument being about verdicts, not traces). Where the reduction skipped nothing,
// both runs are plain walks, and a difference in their counts is logged,
// not failed: on a loaded machine a multi-node fan-out can change the tree
// walked by a schedule or two. With the symmetry too (symmetry.go), every
// cell keeps its verdict and its counterexample's length, in no more
// schedules than without it.
func TestReductionKeepsCounterexamples(t *testing.T) {
	if testing.Short() {
		t.Skip("explores the whole matrix twice")
	}
	ctx := context.Background()
	nodes := processNodes(t, 3, true)
	run := func(plain, noSymmetry bool) *MatrixResult {
		m, err := Matrix(ctx, MatrixOptions{Nodes: nodes, MaxPreemptions: 2, MaxSchedules: 1 << 20,
			Workers: 2, Parallel: 4, NoReduction: plain, NoSymmetry: noSymmetry})
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	// Every command the Redis strategies send, in every cell, declares
	// what it touches (WAIT, which moves what a replica holds, touches
	// everything by its declaration).
	var mu sync.Mutex
	undeclared := map[string]int{}
	observeRun = func(h *History, _ func(string) (any, error)) {
		for _, e := range h.Events {
			if e.Client == 0 || len(e.Command) == 0 || e.Touch != nil ||
				strings.EqualFold(e.Command[0], "WAIT") || strings.HasPrefix(e.Command[0], "sleep") {
				continue
			}
			mu.Lock()
			undeclared[e.Command[0]]++
			mu.Unlock()
		}
	}
	// The traces are compared without the symmetry (a walk with it runs
	// one of each pair of mirror-image traces); with it, the verdicts
	// and counterexamples' lengths are compared too, below.
	plain, reduced := run(true, false), run(false, true)
	symmetric := run(false, false)
	observeRun = nil
	for cmd, n := range undeclared {
		t.Errorf("%d steps of %s declared no footprint", n, cmd)
	}
	steps := func(s string) int { return len(strings.Fields(s)) }
	cells := 0
	var traced [2]int // the traces of the reduced walk's runs, of the plain walk's
	for _, p := range plain.Cells {
		r, ok := reduced.Cell(p.Strategy, p.Scenario)
		switch {
		case !ok:
			t.Fatalf("%s × %s: no reduced cell", p.Strategy, p.Scenario)
		case p.Outcome == NA:
			continue
		}
		cells++
		name := p.Strategy + " × " + p.Scenario
		if p.Outcome == Safe && (!p.Complete || !r.Complete) {
			t.Errorf("%s: bound not exhausted (plain %v, reduced %v)", name, p.Complete, r.Complete)
		}
		if r.Outcome != p.Outcome || r.Property != p.Property || steps(r.Schedule) != steps(p.Schedule) {
			t.Errorf("%s: reduced %s %q, plain %s %q", name, r.Outcome, r.Schedule, p.Outcome, p.Schedule)
		}
		if r.Naive == int64(r.Schedules) && r.Schedules != p.Schedules {
			// The reduction skipped nothing here: both runs were plain
			// enumerations, and the same tree must be walked each time
			// (a multi-node client's round is waited for in full).
			t.Errorf("%s: nothing skipped, yet the two plain walks ran %d and %d schedules", name, r.Schedules, p.Schedules)
			continue
		}
		if r.Schedules > p.Schedules {
			t.Errorf("%s: reduced ran %d schedules, plain %d", name, r.Schedules, p.Schedules)
		}
		traced[0], traced[1] = traced[0]+r.traces, traced[1]+p.traces
		if p.Outcome == Safe && !strings.Contains(p.Strategy, "multi") && r.traces != p.traces {
			t.Errorf("%s: the reduced walk's runs fall into %d traces, the plain walk's %d", name, r.traces, p.traces)
		}
		if r.Naive != 0 && r.Naive != int64(p.Schedules) {
			t.Errorf("%s: plain count %d, plain ran %d", name, r.Naive, p.Schedules)
		}
		y, _ := symmetric.Cell(p.Strategy, p.Scenario)
		if y.Outcome != p.Outcome || y.Property != p.Property || steps(y.Schedule) != steps(p.Schedule) {
			t.Errorf("%s: with the symmetry %s %q, plain %s %q", name, y.Outcome, y.Schedule, p.Outcome, p.Schedule)
		}
		if y.Schedules > r.Schedules {
			t.Errorf("%s: with the symmetry %d schedules, without it %d", name, y.Schedules, r.Schedules)
		}
		if r.Schedules < p.Schedules {
			t.Logf("%-40s %-10s %6d of %6d schedules, %6d with the symmetry", name, r.Outcome, r.Schedules, p.Schedules, y.Schedules)
		}
	}
	if cells == 0 {
		t.Fatal("no cell ran")
	}
	t.Logf("%d cells: plain %v, reduced %v, with the symmetry %v; traces: reduced %d, plain %d", cells, plain.Elapsed, reduced.Elapsed, symmetric.Elapsed, traced[0], traced[1])

	// With a dependency left out on purpose, cells' verdicts move: the
	// keys' (setnx-del's DEL and SETNX commute with nothing), or the
	// harness's (the order of clients entering and leaving the lock).
	for _, left := range []struct {
		prefix                string
		strategies, scenarios []string
	}{
		{"key:", []string{"setnx-del"}, []string{"stale-recovery-getset"}},
		{"harness:", []string{"set-nx-px-del", "setnx-getset"}, []string{"partitioned-holder", "pause-past-ttl"}},
	} {
		forget = func(name string) bool { return strings.HasPrefix(name, left.prefix) }
		broken, err := Matrix(ctx, MatrixOptions{Nodes: nodes, MaxPreemptions: 2, MaxSchedules: 1 << 20, Workers: 2, Parallel: 4,
			Strategies: left.strategies, Scenarios: left.scenarios})
		forget = nil
		if err != nil {
			t.Fatal(err)
		}
		moved := 0
		for _, b := range broken.Cells {
			p, _ := plain.Cell(b.Strategy, b.Scenario)
			if b.Outcome != p.Outcome || steps(b.Schedule) != steps(p.Schedule) {
				t.Logf("without %s: %s × %s %s %q, plain %s %q", left.prefix, b.Strategy, b.Scenario, b.Outcome, b.Schedule, p.Outcome, p.Schedule)
				moved++
			}
		}
		if moved == 0 {
			t.Errorf("with the %s dependencies left out, every cell kept its verdict and counterexample", left.prefix)
		}
	}
}

// TestMatrixCountsFollowNoParallelism: a cell runs the same schedules and
// finds the same verdict and counterexample whether it runs alone on one
// worker or beside others, taking workers from the pool as it goes.
func TestMatrixCountsFollowNoParallelism(t *testing.T) {
	if testing.Short() {
		t.Skip("explores cells twice")
	}
	ctx := context.Background()
	nodes := processNodes(t, 3, false)
	run := func(parallel, workers, pool int) *MatrixResult {
		m, err := Matrix(ctx, MatrixOptions{Nodes: nodes, MaxPreemptions: 2, MaxSchedules: 1 << 20,
			Strategies: []string{"setnx-getset", "redlock", "set-nx-px-del"},
			Scenarios:  []string{"stale-recovery-getset", "release-after-expiry", "partitioned-holder"},
			Parallel:   parallel, Workers: workers, Pool: pool})
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	one, many := run(1, 1, 1), run(4, 4, 8)
	for _, a := range one.Cells {
		b, _ := many.Cell(a.Strategy, a.Scenario)
		if a.Outcome != b.Outcome || a.Schedules != b.Schedules || a.Schedule != b.Schedule || a.Complete != b.Complete {
			t.Errorf("%s × %s: one worker %s %d %q, a pool %s %d %q", a.Strategy, a.Scenario,
				a.Outcome, a.Schedules, a.Schedule, b.Outcome, b.Schedules, b.Schedule)
		}
	}
	t.Logf("one worker %v, a pool of 8 %v", one.Elapsed, many.Elapsed)
}

// TestMatrixRunsScenariosOfOnesOwn: a scenario beside the catalog's
// (MatrixOptions.Extra) runs as theirs do: release-after-expiry with a
// waiter that tries three times breaks the GET-then-DEL release and not
// the compare-and-delete one.
func TestMatrixRunsScenariosOfOnesOwn(t *testing.T) {
	nodes := nodesOf(redistest.Start(t, 1))
	mine := &Scenario{
		Name:      "release-after-expiry-retrying",
		Title:     "a late release against a waiter that tries three times",
		Property:  ReleaseSafety,
		Programs:  MustPrograms("acquire write release", "acquire*3 write release"),
		Faults:    []string{"time"},
		MaxFaults: 1,
	}
	m, err := Matrix(context.Background(), MatrixOptions{Nodes: nodes, MaxPreemptions: 2, MaxSchedules: 1 << 20,
		Strategies: []string{"set-nx-px-getdel", "set-nx-px"}, Scenarios: []string{"release-after-expiry", mine.Name},
		Extra: []*Scenario{mine}})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []struct {
		strategy, scenario string
		outcome            Outcome
	}{
		{"set-nx-px-getdel", mine.Name, Violated},
		{"set-nx-px", mine.Name, Safe},
		{"set-nx-px-getdel", "release-after-expiry", Violated},
	} {
		c, ok := m.Cell(want.strategy, want.scenario)
		if !ok || c.Outcome != want.outcome {
			t.Errorf("%s × %s: %s (%s), want %s", want.strategy, want.scenario, c.Outcome, c.Schedule, want.outcome)
		}
	}
	if c, _ := m.Cell("set-nx-px-getdel", mine.Name); c.Property != ReleaseSafety {
		t.Errorf("the cell checks %q, want %q", c.Property, ReleaseSafety)
	}
}
