package harness

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/locklab/locklab/internal/redistest"
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

// TestReductionKeepsCounterexamples: on every cell of the matrix these
// nodes can run, at bound 2, the explorer with its state caching reaches
// the verdict the plain enumeration reaches, with the same shortest
// counterexample, runs no more schedules, and counts the plain
// enumeration's schedules exactly when it can count them.
func TestReductionKeepsCounterexamples(t *testing.T) {
	if testing.Short() {
		t.Skip("explores the whole matrix twice")
	}
	nodes := nodesOf(redistest.Start(t, 3))
	for _, sc := range Scenarios() {
		t.Run(sc.Name, func(t *testing.T) {
			run := func(plain bool) *MatrixResult {
				m, err := Matrix(context.Background(), MatrixOptions{Nodes: nodes, Scenarios: []string{sc.Name},
					MaxPreemptions: 2, MaxSchedules: 1 << 20, Workers: 2, NoReduction: plain})
				if err != nil {
					t.Fatal(err)
				}
				return m
			}
			plain, reduced := run(true), run(false)
			for _, p := range plain.Cells {
				r, ok := reduced.Cell(p.Strategy, p.Scenario)
				if !ok {
					t.Fatalf("%s: no reduced cell", p.Strategy)
				}
				if p.Outcome == NA {
					continue
				}
				if p.Outcome == Safe && (!p.Complete || !r.Complete) {
					t.Errorf("%s: bound not exhausted (plain %v, reduced %v)", p.Strategy, p.Complete, r.Complete)
				}
				if r.Outcome != p.Outcome || r.Property != p.Property || r.Schedule != p.Schedule {
					t.Errorf("%s: reduced %s %q, plain %s %q", p.Strategy, r.Outcome, r.Schedule, p.Outcome, p.Schedule)
				}
				if r.Schedules > p.Schedules {
					t.Errorf("%s: reduced ran %d schedules, plain %d", p.Strategy, r.Schedules, p.Schedules)
				}
				if r.Naive != 0 && r.Naive != int64(p.Schedules) {
					t.Errorf("%s: naive count %d, plain ran %d", p.Strategy, r.Naive, p.Schedules)
				}
				t.Logf("%-18s %-10s %6d of %6d schedules (naive count %d)", p.Strategy, r.Outcome, r.Schedules, p.Schedules, r.Naive)
			}
		})
	}
}
