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
