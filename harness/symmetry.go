// Symmetry: clients that run the same program on the same lock, and that
// no fault and no role names, are interchangeable. A schedule and the
// one that swaps two such clients' names reach the same state up to the
// swap, at the same cost, so the verdicts are the same (every property
// the harness checks is about clients whichever their names). The
// explorer uses it where two such clients have both taken no step: it
// leaves the higher one's step to the mirror of the lower one's, which it
// explores from the same state at the same cost (docs/reduction.md,
// "Symmetry").

package harness

import "slices"

// twins returns, for each client of spec (1-based; index 0 unused), the
// lowest-numbered client interchangeable with it: one with the same
// program, and neither named by a fault of the alphabet nor the
// property's waiter. A client with none is its own twin.
func twins(spec runSpec, alphabet []Step) []int {
	n := len(spec.programs)
	named := make([]bool, n+1)
	for _, f := range alphabet {
		if f.Client > 0 && f.Client <= n {
			named[f.Client] = true
		}
	}
	if spec.waiter > 0 && spec.waiter <= n {
		named[spec.waiter] = true
	}
	twin := make([]int, n+1)
	for i := 1; i <= n; i++ {
		twin[i] = i
		if named[i] {
			continue
		}
		for j := 1; j < i; j++ {
			if !named[j] && slices.Equal(spec.programs[j-1], spec.programs[i-1]) {
				twin[i] = j
				break
			}
		}
	}
	return twin
}

// mirrored reports whether the alternative alt at a choice can be left
// to its mirror: alt's client has a lower twin, neither has taken a step
// in steps (so the state is the same up to swapping them), and the
// twin's step on the same node is explored from here at the same cost,
// as the run's own step (taken, when ok) or as an alternative among
// awake within the bound (cost gives a step's cost, room the preemptions
// left).
func (e *explorer) mirrored(alt Step, steps Schedule, taken Step, ok bool, awake []Step, cost func(Step) int, room int) bool {
	if e.twin == nil || !alt.IsClient() || alt.Client >= len(e.twin) {
		return false
	}
	tw := e.twin[alt.Client]
	if tw == alt.Client {
		return false
	}
	for _, st := range steps {
		if st.Client == alt.Client || st.Client == tw {
			return false
		}
	}
	m := alt
	m.Client = tw
	if ok && taken == m {
		return cost(m) == cost(alt)
	}
	return slices.Contains(awake, m) && cost(m) == cost(alt) && cost(m) <= room
}
