// Shards of the verdict matrix: a deterministic share of its cells that a
// machine of its own may run, and the merge that puts the shares together
// into the matrix one whole run gives.

package harness

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/locklab/locklab/lockkit"
)

// Shard is the Index-th of Of shares of a matrix's cells (1 <= Index <=
// Of). The cells are numbered in the whole matrix's order, scenario by
// scenario and within one strategy by strategy, and shard k holds the
// cells whose number is k-1 modulo Of: every cell belongs to exactly one
// shard, and the neighbours of a scenario's row, which cost alike, fall
// into different shards. Which cells a shard holds depends only on the
// matrix's strategies and scenarios, so that shards run on machines of
// their own, with the same strategies installed, cover the matrix once.
type Shard struct {
	Index int `json:"index"`
	Of    int `json:"of"`
}

// ParseShard reads a shard written "i/n", as `locklab matrix --shard`
// takes it.
func ParseShard(s string) (*Shard, error) {
	a, b, ok := strings.Cut(s, "/")
	i, err1 := strconv.Atoi(a)
	n, err2 := strconv.Atoi(b)
	if !ok || err1 != nil || err2 != nil {
		return nil, lockkit.Invalid("shard %q: want i/n, such as 1/3", s)
	}
	sh := &Shard{Index: i, Of: n}
	if err := sh.check(); err != nil {
		return nil, err
	}
	return sh, nil
}

// String writes the shard as ParseShard reads it.
func (s Shard) String() string { return fmt.Sprintf("%d/%d", s.Index, s.Of) }

// check refuses a shard out of its range (lockkit.ErrInvalid); nil is
// the whole matrix.
func (s *Shard) check() error {
	if s == nil {
		return nil
	}
	if s.Of < 1 || s.Index < 1 || s.Index > s.Of {
		return lockkit.Invalid("shard %d/%d: want i/n with 1 <= i <= n", s.Index, s.Of)
	}
	return nil
}

// share is how many of a matrix's n cells the shard holds; all of them
// for the whole matrix (nil).
func (s *Shard) share(n int) int {
	if s == nil {
		return n
	}
	return (n - s.Index + s.Of) / s.Of
}

// holds says whether the i-th cell of the whole matrix (from 0) is the
// shard's; every cell is the whole matrix's (nil).
func (s *Shard) holds(i int) bool { return s == nil || i%s.Of == s.Index-1 }

// MergeShards puts the results of every shard of one matrix together:
// the matrix a whole run with the same options gives, but for the times
// (Elapsed is the longest shard's, the wall time of shards run side by
// side). It refuses parts that are not the shards 1 to n of one matrix,
// each once, or whose cells are not those of their shard.
func MergeShards(parts []*MatrixResult) (*MatrixResult, error) {
	if len(parts) == 0 {
		return nil, lockkit.Invalid("merge: no shard given")
	}
	first := parts[0]
	if first.Shard == nil {
		return nil, lockkit.Invalid("merge: part 1 is a whole matrix, not a shard of one (matrix --shard i/n --json)")
	}
	of := first.Shard.Of
	if len(parts) != of {
		return nil, lockkit.Invalid("merge: %d parts of a matrix in %d shards: give every shard once", len(parts), of)
	}
	m := &MatrixResult{Strategies: first.Strategies, Scenarios: first.Scenarios, About: first.About}
	byShard := make([]*MatrixResult, of)
	for k, p := range parts {
		if p.Shard == nil {
			return nil, lockkit.Invalid("merge: part %d is a whole matrix, not a shard of one", k+1)
		}
		if err := p.Shard.check(); err != nil {
			return nil, lockkit.Invalid("merge: part %d: %v", k+1, err)
		}
		if p.Shard.Of != of {
			return nil, lockkit.Invalid("merge: part %d is shard %v, part 1 shard %v: shards of different splits", k+1, *p.Shard, *first.Shard)
		}
		if byShard[p.Shard.Index-1] != nil {
			return nil, lockkit.Invalid("merge: shard %v given twice", *p.Shard)
		}
		if !slices.Equal(p.Strategies, m.Strategies) || !slices.Equal(p.Scenarios, m.Scenarios) {
			return nil, lockkit.Invalid("merge: shard %v ran other strategies or scenarios than shard %v: run every shard with the same --strategy and --scenario, and the same stores installed", *p.Shard, *first.Shard)
		}
		byShard[p.Shard.Index-1] = p
		m.Elapsed = max(m.Elapsed, p.Elapsed)
	}
	next := make([]int, of) // the next cell of each shard
	for i := range len(m.Scenarios) * len(m.Strategies) {
		sc, st := m.Scenarios[i/len(m.Strategies)], m.Strategies[i%len(m.Strategies)]
		k := i % of
		p := byShard[k]
		if next[k] >= len(p.Cells) {
			return nil, lockkit.Invalid("merge: shard %v lacks the cell %s × %s", *p.Shard, st, sc)
		}
		c := p.Cells[next[k]]
		if c.Strategy != st || c.Scenario != sc {
			return nil, lockkit.Invalid("merge: shard %v holds %s × %s where %s × %s belongs", *p.Shard, c.Strategy, c.Scenario, st, sc)
		}
		next[k]++
		m.Cells = append(m.Cells, c)
	}
	for k, p := range byShard {
		if next[k] != len(p.Cells) {
			return nil, lockkit.Invalid("merge: shard %v holds %d cells, its share is %d", *p.Shard, len(p.Cells), next[k])
		}
	}
	return m, nil
}
