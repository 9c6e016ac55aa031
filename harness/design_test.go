package harness_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/locklab/locklab/harness"
	"github.com/locklab/locklab/harness/node"
)

// expected is the verdict matrix the design's strategy table predicts, one
// letter per scenario in this order: S safe, V violated, D deadlock,
// T starvation, - n/a.
var (
	expectedScenarios = "clock-skew crash-before-expire failover-loses-lock partitioned-holder pause-past-ttl " +
		"pause-past-ttl-fenced redlock-clock-jump redlock-pause redlock-restart release-after-expiry " +
		"stale-recovery stale-recovery-getset ttl-pushed-by-waiters"
	expected = map[string]string{
		// C1/C2 and clock skew; blind DEL after expiry.
		"setnx-del": "V S V V V V - - - V V V S",
		// GETSET closes C1/C2 but not clock skew or the release after expiry.
		"setnx-getset": "V S V V V V - - - V S S S",
		// A crash between INCR and EXPIRE: deadlock.
		"incr-expire":     "S D V V V V - - - V S S S",
		"incr-expire-lua": "S S V V V V - - - V S S S",
		// Failed tries push the TTL: starvation.
		"incr-expire-multi": "S S V V V V - - - V S S T",
		"setnx-expire":      "S D V V V V - - - V S S S",
		"set-nx-px-del":     "S S V V V V - - - V S S S",
		"set-nx-px-getdel":  "S S V V V V - - - V S S S",
		// Safe on one node without pauses; a pause past the TTL is caught
		// only by a resource that checks the fence; failover loses it.
		"set-nx-px": "S S V V V S - - - S S S S",
		// Node restart, clock jump, client pause.
		"redlock": "- - - - - - V V V - - - -",
	}
	letter = map[harness.Outcome]string{harness.Safe: "S", harness.Violated: "V", harness.Deadlock: "D",
		harness.Starvation: "T", harness.NA: "-"}
)

// TestMatrixMatchesDesign runs the whole verdict matrix on real Redis
// processes (three nodes, the first with a replica for the failover
// scenario) and compares it with the design's expectations.
func TestMatrixMatchesDesign(t *testing.T) {
	if testing.Short() {
		t.Skip("the full matrix takes a while")
	}
	ctx := context.Background()
	c, err := node.Start(ctx, node.Options{Backend: node.BackendProcess, N: 3})
	require.NoError(t, err)
	defer c.Close()
	r, err := c.Replicated(ctx, c.Nodes()[0])
	require.NoError(t, err)
	nodes := []harness.Node{r, c.Nodes()[1], c.Nodes()[2]}

	m, err := harness.Matrix(ctx, harness.MatrixOptions{Nodes: nodes, Workers: 2})
	require.NoError(t, err)
	scs := strings.Fields(expectedScenarios)
	require.ElementsMatch(t, scs, m.Scenarios, "the catalog changed: update the expectations")
	require.Len(t, m.Strategies, len(expected), "the registry changed: update the expectations")
	for strat, row := range expected {
		want := strings.Fields(row)
		for i, sc := range scs {
			cell, ok := m.Cell(strat, sc)
			require.True(t, ok, "%s × %s missing", strat, sc)
			assert.Equal(t, want[i], letter[cell.Outcome], "%s × %s: %s %s", strat, sc, cell.Outcome, cell.Message)
			if cell.Outcome == harness.Violated || cell.Outcome == harness.Deadlock || cell.Outcome == harness.Starvation {
				assert.NotEmpty(t, cell.Schedule, "%s × %s: a failure comes with its counterexample", strat, sc)
			}
		}
	}
	t.Logf("matrix: %d cells in %v", len(m.Cells), m.Elapsed)
}
