package harness

import (
	"context"
	"testing"

	"github.com/locklab/locklab/internal/tooling/redistest"
)

// TestRecordKeepsKeys: Record replays every failing cell's counterexample
// with the lock key read after each step, so that a timeline shows who
// holds the lock; a counterexample the search stopped at its violation is
// replayed too (the replay runs on past it).
func TestRecordKeepsKeys(t *testing.T) {
	nodes := nodesOf(redistest.Start(t, 3))
	m, err := Matrix(context.Background(), MatrixOptions{Nodes: nodes, Strategies: []string{"set-nx-px", "setnx-del"},
		Scenarios: []string{"pause-past-ttl", "release-after-expiry"}})
	if err != nil {
		t.Fatal(err)
	}
	n, err := Record(context.Background(), m, nodes)
	if err != nil {
		t.Fatal(err)
	}
	if want := m.Violations(); n != want {
		t.Errorf("recorded %d of %d counterexamples", n, want)
	}
	for _, c := range m.Cells {
		if c.Counterexample == nil || !(Verdict{Outcome: c.Outcome}).Failed() {
			continue
		}
		keys := 0
		for _, e := range c.Counterexample.Events {
			keys += len(e.Keys)
		}
		if keys == 0 {
			t.Errorf("%s × %s: the recorded timeline reads no key", c.Strategy, c.Scenario)
		}
	}
}
