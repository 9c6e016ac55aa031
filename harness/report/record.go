package report

import (
	"context"
	"fmt"

	"github.com/locklab/locklab/harness"
)

// Record replays the counterexample of every failing cell of m on nodes
// with the lock key read on every node after every step, so that the
// timelines show the key's value, as "locklab demo" does. The matrix's
// exploration does not record it, to run fast. A replay replaces the
// counterexample only when it reaches the same verdict; it returns how
// many were replaced.
func Record(ctx context.Context, m *harness.MatrixResult, nodes []harness.Node) (int, error) {
	n := 0
	for i := range m.Cells {
		c := &m.Cells[i]
		ce := c.Counterexample
		if ce == nil || !(harness.Verdict{Outcome: c.Outcome}).Failed() {
			continue
		}
		h, err := harness.Run(ctx, harness.RunOptions{
			Scenario: c.Scenario,
			Strategy: c.Strategy,
			Nodes:    nodes,
			Schedule: ce.Schedule,
		})
		if err != nil {
			if ctx.Err() != nil {
				return n, ctx.Err()
			}
			continue // keep the unrecorded history
		}
		if h.Verdict.Outcome != ce.Verdict.Outcome || h.Verdict.Property != ce.Verdict.Property || h.Schedule != ce.Schedule {
			continue
		}
		c.Counterexample = h
		n++
	}
	if ctx.Err() != nil {
		return n, fmt.Errorf("report: %w", ctx.Err())
	}
	return n, nil
}
