// What a step touches: the resources of its store it reads and writes, as
// the store declares them when it submits the step (Client.SendTouching),
// for a reduction that knows which steps commute.

package harness

import (
	"slices"
	"strings"
)

// Touch is what a step reads and writes on its store, named as the store
// names its resources (a ZooKeeper node's data, its list of children, the
// ensemble's transaction id). A step declared by no Touch touches
// everything: it conflicts with every other step.
type Touch struct {
	Reads, Writes []string
}

// Conflicts reports whether steps touching t and u may give another
// outcome in the other order: one writes what the other reads or writes.
// A nil Touch conflicts with everything.
func (t *Touch) Conflicts(u *Touch) bool {
	if t == nil || u == nil {
		return true
	}
	for _, w := range t.Writes {
		if slices.Contains(u.Reads, w) || slices.Contains(u.Writes, w) {
			return true
		}
	}
	for _, w := range u.Writes {
		if slices.Contains(t.Reads, w) {
			return true
		}
	}
	return false
}

// unsuffixed is t with the run's key named as the scenario names it where
// the run locks it with a worker's suffix (storeKeySuffix): a footprint's
// names are the same whichever worker ran the step, for the steps that a
// run's alternatives, run by other workers, keep asleep (sleep.go).
func (r *run) unsuffixed(t *Touch) *Touch {
	if t == nil || r.slot.keySuffix == "" {
		return t
	}
	name := func(ns []string) []string {
		out := make([]string, len(ns))
		for i, n := range ns {
			out[i] = strings.ReplaceAll(n, r.spec.key, r.hist.Key)
		}
		return out
	}
	return &Touch{Reads: name(t.Reads), Writes: name(t.Writes)}
}
