package harness

import (
	"context"
	"fmt"
	"os"
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
