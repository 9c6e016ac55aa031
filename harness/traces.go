// The traces of the explorer's runs. Two schedules that differ only in the
// order of adjacent independent steps (effect.go) are one Mazurkiewicz
// trace: they end in the same state, with the same history. A reduction by
// independence (sleep sets, DPOR, source sets) must run at least one
// schedule of every trace within the bound, so the traces the runs fall
// into are the least it could run, and the schedules run beyond them are
// what a better one could save (docs/reduction.md).

package harness

import (
	"cmp"
	"hash/fnv"
	"slices"
	"strconv"
)

// traceKey names the trace of a run's first n steps, which did effects (a
// step with no effect recorded conflicts with every other): a hash of the
// steps in Foata normal form, each step at the length of the longest chain
// of dependent steps that ends at it, in the order of their names within
// a level. A step is named by its label and how often it ran before
// ("c1", 3rd time): schedules of one trace give it the same name.
func traceKey(steps Schedule, effects []stepEffect, n int) uint64 {
	n = min(n, len(steps))
	type leveled struct {
		level int
		name  string
	}
	out := make([]leveled, n)
	seen := map[Step]int{}
	effect := func(i int) stepEffect {
		if i < len(effects) {
			return effects[i]
		}
		return stepEffect{}
	}
	for j := 0; j < n; j++ {
		seen[steps[j]]++
		level := 0
		for i := 0; i < j; i++ {
			if out[i].level >= level && !independent(effect(i), effect(j)) {
				level = out[i].level + 1
			}
		}
		out[j] = leveled{level, steps[j].String() + "#" + strconv.Itoa(seen[steps[j]])}
	}
	slices.SortFunc(out, func(a, b leveled) int {
		return cmp.Or(cmp.Compare(a.level, b.level), cmp.Compare(a.name, b.name))
	})
	h := fnv.New64a()
	for _, x := range out {
		h.Write([]byte(strconv.Itoa(x.level) + ":" + x.name + ";"))
	}
	return h.Sum64()
}
