// What a step touches: the resources of its store it reads and writes, as
// the store declares them when it submits the step (Client.SendTouching),
// for a reduction that knows which steps commute.

package harness

import "slices"

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
