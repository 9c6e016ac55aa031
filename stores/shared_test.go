package stores

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/locklab/locklab/harness"
	"github.com/locklab/locklab/internal/tooling/backends"
	"github.com/locklab/locklab/stores/etcd"
	"github.com/locklab/locklab/stores/zookeeper"
)

// cellSet is a matrix's strategies and scenarios: the cells of their
// product.
type cellSet struct{ strategies, scenarios []string }

// sharedCells are, by store, cells that fault no server, among them
// violations, a crash, a partition, paused clients, waiters, time steps
// and sessions ended on the run's clock.
var sharedCells = map[string]cellSet{
	etcd.Name: {[]string{"etcd-lease", "etcd-mutex"},
		[]string{"partitioned-holder", "pause-past-ttl", "crash-before-expire", "release-after-expiry"}},
	zookeeper.Name: {[]string{"zk-recipe", "zk-ephemeral", "zk-golib"},
		[]string{"pause-past-ttl", "pause-past-ttl-fenced", "release-after-expiry", "ttl-pushed-by-waiters"}},
}

// faultCells are, by store, the cells of the default matrix that kill,
// restart or fail over a server: every one of them.
var faultCells = map[string]cellSet{
	zookeeper.Name: {[]string{"zk-recipe", "zk-ephemeral", "zk-golib"},
		[]string{"restart-loses-lock", "failover-loses-lock", "member-loses-data"}},
}

// TestSharedAnswersAlike is the evidence for Driver.StartShared
// (docs/reduction.md, "One server for the cells that fault none"): on
// every store that offers a smaller node for the cells that fault no
// server, cells of every kind explore the same schedules to the same
// verdict and the same shortest counterexample on it as on Start's
// cluster.
func TestSharedAnswersAlike(t *testing.T) {
	if testing.Short() {
		t.Skip("explores cells on etcd and ZooKeeper twice")
	}
	answersAlike(t, sharedCells, "a shared node", false, func(d *harness.Driver) func(context.Context, string) (harness.StoreNode, error) {
		return d.StartShared
	})
}

// TestFaultNodeAnswersAlike is the evidence for Driver.StartFault
// (docs/reduction.md, "Fault servers that stay up"): on every store that
// offers a node of its own for the cells that fault a server, each of
// those cells explores the same schedules to the same verdict and the
// same shortest counterexample on it as on Start's cluster, whose
// servers die by SIGKILL.
func TestFaultNodeAnswersAlike(t *testing.T) {
	if testing.Short() {
		t.Skip("explores the cells that fault a ZooKeeper server twice")
	}
	answersAlike(t, faultCells, "a node for the cells that fault a server", true, func(d *harness.Driver) func(context.Context, string) (harness.StoreNode, error) {
		return d.StartFault
	})
}

// answersAlike runs, on every store whose driver offers the node that
// start picks (what), the store's cells of sets on Start's cluster and on
// that node, and requires the same answers cell for cell (cellDiffs), and
// a cell run for each scenario at least (every cell, where all).
func answersAlike(t *testing.T, sets map[string]cellSet, what string, all bool, start func(*harness.Driver) func(context.Context, string) (harness.StoreNode, error)) {
	for _, d := range harness.Stores() {
		other := start(d)
		if other == nil {
			continue
		}
		cells, ok := sets[d.Name]
		if !ok {
			t.Errorf("%s offers %s, and no cells here compare it with its cluster", d.Name, what)
			continue
		}
		t.Run(d.Name, func(t *testing.T) {
			if err := Installed(d.Name); err != nil {
				t.Skip(err)
			}
			ctx := context.Background()
			run := func(n harness.StoreNode) *harness.MatrixResult {
				t.Helper()
				defer n.Close()
				return storeMatrix(t, d.Name, n, cells)
			}
			ns, err := d.Start(ctx, backends.Process, 1)
			if err != nil {
				t.Fatal(err)
			}
			cluster := run(ns[0])
			n, err := other(ctx, backends.Process)
			if err != nil {
				t.Fatal(err)
			}
			got := run(n)
			for _, diff := range cellDiffs(cluster.Cells, got.Cells) {
				t.Error(diff)
			}
			ran := 0
			for _, c := range got.Cells {
				on, _ := cluster.Cell(c.Strategy, c.Scenario)
				t.Logf("%s × %s: %s in %d schedules, %v (on Start's cluster: %v)", c.Strategy, c.Scenario, c.Outcome, c.Schedules,
					c.Elapsed.Round(time.Millisecond), on.Elapsed.Round(time.Millisecond))
				if c.Outcome != harness.NA {
					ran++
				} else if all {
					t.Errorf("%s × %s is n/a: %s", c.Strategy, c.Scenario, c.Message)
				}
			}
			if ran < len(cells.scenarios) {
				t.Errorf("%d cells ran; the comparison wants more", ran)
			}
		})
	}
}

// storeMatrix explores the cells of store's strategies and scenarios in
// cells on node n, with the documented matrix's bounds for the stores.
func storeMatrix(t *testing.T, store string, n harness.Node, cells cellSet) *harness.MatrixResult {
	t.Helper()
	m, err := harness.Matrix(context.Background(), harness.MatrixOptions{
		Strategies: cells.strategies, Scenarios: cells.scenarios,
		Stores:           map[string][]harness.Node{store: {n}},
		StorePreemptions: harness.StorePreemptions, StoreSchedules: harness.StoreSchedules,
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// cellDiffs lists where the cells of two runs of the same matrix differ
// in what a matrix reports: verdict, property, shortest counterexample,
// schedules explored and completeness (not the times, nor a message's
// fence numbers, which differ from one run to the next on any server).
func cellDiffs(a, b []harness.Cell) []string {
	var out []string
	if len(a) != len(b) {
		return []string{fmt.Sprintf("%d cells against %d", len(a), len(b))}
	}
	for i := range a {
		x, y := a[i], b[i]
		if x.Strategy != y.Strategy || x.Scenario != y.Scenario || x.Outcome != y.Outcome || x.Property != y.Property ||
			x.Schedule != y.Schedule || x.Schedules != y.Schedules || x.Complete != y.Complete {
			out = append(out, fmt.Sprintf("%s × %s: %s %s in %d schedules (complete %t) %q, against %s × %s: %s %s in %d (complete %t) %q",
				x.Strategy, x.Scenario, x.Outcome, x.Property, x.Schedules, x.Complete, x.Schedule,
				y.Strategy, y.Scenario, y.Outcome, y.Property, y.Schedules, y.Complete, y.Schedule))
		}
	}
	return out
}

// TestCellDiffsCatches: the comparison TestSharedAnswersAlike rests on
// reports a cell that differs in any of what it compares.
func TestCellDiffsCatches(t *testing.T) {
	base := harness.Cell{Strategy: "etcd-lease", Scenario: "pause-past-ttl", Outcome: harness.Violated,
		Property: harness.Fencing, Schedule: "c1 c2", Schedules: 14, Complete: true}
	if d := cellDiffs([]harness.Cell{base}, []harness.Cell{base}); len(d) != 0 {
		t.Fatalf("equal cells differ: %v", d)
	}
	for name, change := range map[string]func(*harness.Cell){
		"verdict":        func(c *harness.Cell) { c.Outcome = harness.Safe },
		"counterexample": func(c *harness.Cell) { c.Schedule = "c2 c1" },
		"schedules":      func(c *harness.Cell) { c.Schedules++ },
		"complete":       func(c *harness.Cell) { c.Complete = false },
		"property":       func(c *harness.Cell) { c.Property = harness.MutualExclusion },
	} {
		other := base
		change(&other)
		if d := cellDiffs([]harness.Cell{base}, []harness.Cell{other}); len(d) != 1 {
			t.Errorf("a different %s: %d differences reported, want 1", name, len(d))
		}
	}
	if d := cellDiffs([]harness.Cell{base}, nil); len(d) != 1 {
		t.Errorf("a missing cell: %d differences reported, want 1", len(d))
	}
}

// TestLanesAnswerAlike is the evidence for a store's lanes on keys of
// their own (harness/storesched.go): cells of one scenario that explore
// at once on one PostgreSQL server, each lane's on keys of its own, give
// the same answers as each cell explored alone on it.
func TestLanesAnswerAlike(t *testing.T) {
	if testing.Short() {
		t.Skip("explores PostgreSQL cells twice")
	}
	const store = "postgres"
	if err := Installed(store); err != nil {
		t.Skip(err)
	}
	d, err := harness.LookupStore(store)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	ns, err := d.Start(ctx, backends.Process, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer ns[0].Close()
	// Three strategies, so that the store's three lanes take cells of
	// one scenario at once (they take the cells strategy by strategy).
	strategies := []string{"pg-advisory", "pg-lock-table", "pg-lock-table-sync"}
	scenarios := []string{"crash-before-expire", "lost-reply"}
	together := storeMatrix(t, store, ns[0], cellSet{strategies, scenarios}).Cells
	var alone []harness.Cell
	for _, c := range together {
		alone = append(alone, storeMatrix(t, store, ns[0], cellSet{[]string{c.Strategy}, []string{c.Scenario}}).Cells...)
		if c.Outcome == harness.NA {
			t.Errorf("%s × %s is n/a: %s", c.Strategy, c.Scenario, c.Message)
		}
	}
	for _, diff := range cellDiffs(alone, together) {
		t.Error(diff)
	}
}
