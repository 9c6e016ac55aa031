package harness

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/internal/tooling/redistest"
)

// TestShardsMergeToTheWholeMatrix: the shards of a matrix, in two and in
// three, each run on its own, hold every cell once, and merged (in any
// order) give the whole run's matrix cell for cell: verdicts,
// counterexamples, schedule counts, in the same order; only the times
// differ. A failing cell (setnx-del × stale-recovery) and n/a cells (the
// multi-node scenario on one-node strategies) are among them.
func TestShardsMergeToTheWholeMatrix(t *testing.T) {
	t.Parallel()
	nodes := nodesOf(redistest.Start(t, 3))
	o := MatrixOptions{Nodes: nodes, Workers: 2, Parallel: 2,
		Strategies: []string{"setnx-del", "set-nx-px", "setnx-getset"},
		Scenarios:  []string{"stale-recovery", "release-after-expiry", "clock-skew", "redlock-restart"}}
	whole, err := Matrix(context.Background(), o)
	require.NoError(t, err)
	require.Nil(t, whole.Shard)
	for _, of := range []int{2, 3} {
		var parts []*MatrixResult
		cells := 0
		for i := of; i >= 1; i-- { // the merge takes them in any order
			so := o
			so.Shard = &Shard{Index: i, Of: of}
			p, err := Matrix(context.Background(), so)
			require.NoError(t, err)
			assert.Equal(t, Shard{Index: i, Of: of}, *p.Shard)
			assert.Equal(t, whole.Strategies, p.Strategies)
			assert.Equal(t, whole.Scenarios, p.Scenarios)
			cells += len(p.Cells)
			assert.Equal(t, p.Shard.share(len(whole.Cells)), len(p.Cells), "shard %v's share", *p.Shard)
			parts = append(parts, p)
		}
		assert.Equal(t, len(whole.Cells), cells, "%d shards hold every cell once", of)
		m, err := MergeShards(parts)
		require.NoError(t, err)
		assert.Nil(t, m.Shard)
		assert.Equal(t, withoutTimes(whole), withoutTimes(m), "%d shards merged", of)

		// What is not every shard of one matrix, each once, is refused.
		for name, bad := range map[string][]*MatrixResult{
			"a shard missing": parts[1:],
			"a shard twice":   append([]*MatrixResult{parts[0]}, parts[:of-1]...),
			"a whole matrix":  append([]*MatrixResult{whole}, parts[1:]...),
		} {
			_, err := MergeShards(bad)
			assert.True(t, errors.Is(err, locklab.ErrInvalid), "%d shards, %s: %v", of, name, err)
		}
	}
}

// TestMergeRefusesOtherMatrices: shards of other strategies, or of
// another split, are not one matrix's; a shard's cells must be its share.
func TestMergeRefusesOtherMatrices(t *testing.T) {
	cell := func(st, sc string) Cell { return Cell{Strategy: st, Scenario: sc, Outcome: Safe} }
	part := func(i, of int, strategies []string, cells ...Cell) *MatrixResult {
		return &MatrixResult{Strategies: strategies, Scenarios: []string{"x"}, Cells: cells, Shard: &Shard{Index: i, Of: of}}
	}
	ab := []string{"a", "b"}
	good := []*MatrixResult{part(1, 2, ab, cell("a", "x")), part(2, 2, ab, cell("b", "x"))}
	m, err := MergeShards(good)
	require.NoError(t, err)
	assert.Equal(t, []Cell{cell("a", "x"), cell("b", "x")}, m.Cells)

	for name, parts := range map[string][]*MatrixResult{
		"other strategies": {part(1, 2, ab, cell("a", "x")), part(2, 2, []string{"a", "c"}, cell("c", "x"))},
		"another split":    {part(1, 2, ab, cell("a", "x")), part(2, 3, ab, cell("b", "x"))},
		"a cell elsewhere": {part(1, 2, ab, cell("b", "x")), part(2, 2, ab, cell("a", "x"))},
		"a cell missing":   {part(1, 2, ab, cell("a", "x")), part(2, 2, ab)},
		"a cell too many":  {part(1, 2, ab, cell("a", "x"), cell("b", "x")), part(2, 2, ab, cell("b", "x"))},
		"none":             nil,
	} {
		_, err := MergeShards(parts)
		assert.True(t, errors.Is(err, locklab.ErrInvalid), "%s: %v", name, err)
	}
}

func TestParseShard(t *testing.T) {
	s, err := ParseShard("2/3")
	require.NoError(t, err)
	assert.Equal(t, Shard{Index: 2, Of: 3}, *s)
	assert.Equal(t, "2/3", s.String())
	for _, bad := range []string{"", "2", "0/3", "4/3", "-1/3", "1/0", "a/b", "1/2/3"} {
		_, err := ParseShard(bad)
		assert.True(t, errors.Is(err, locklab.ErrInvalid), "%q: %v", bad, err)
	}
	_, err = Matrix(context.Background(), MatrixOptions{Shard: &Shard{Index: 3, Of: 2}})
	assert.True(t, errors.Is(err, locklab.ErrInvalid), "Matrix refuses a shard out of range: %v", err)
}

// withoutTimes is m with its times zeroed, the cells' unexported parts
// dropped: what a merge must give as a whole run does.
func withoutTimes(m *MatrixResult) MatrixResult {
	out := *m
	out.Elapsed = 0
	out.Cells = nil
	for _, c := range m.Cells {
		out.Cells = append(out.Cells, Cell{Strategy: c.Strategy, Scenario: c.Scenario, Outcome: c.Outcome, Property: c.Property,
			Schedule: c.Schedule, Message: c.Message, Schedules: c.Schedules, Complete: c.Complete, Limit: c.Limit, Naive: c.Naive})
	}
	return out
}
