// The explorer's reduction: state caching at choice points, and the count
// of the schedules a plain enumeration would have run.
//
// At every choice point the explorer fingerprints the run's state
// (state.go). A run that reaches a state some earlier run already reached,
// with at least as much of its bounds left, stops there: everything that
// can follow is a schedule the earlier run, or the prefixes it pushed, runs
// too. The earlier visit's prefix must also come first in the schedule
// text, so that the counterexample the explorer keeps (fewest steps, then
// the smallest text) is the one the plain enumeration keeps: two paths to
// the same state have the same step count, and a common suffix keeps the
// order of their prefixes. Nothing is lost: every verdict, and every
// shortest counterexample, is the plain enumeration's.
//
// The explorer also records the state graph it walked: each state's
// default step and alternatives, and the state each step leads to. That is
// enough to count, without running them, the schedules the plain
// enumeration would have run within the same bounds (Naive).

package harness

import (
	"hash/fnv"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// budget is how much of its bounds a schedule has used.
type budget struct {
	preem, faults int
	used          []int // uses of each fault of the alphabet
}

// within reports whether b has used no more than o of every bound.
func (b budget) within(o budget) bool {
	if b.preem > o.preem || b.faults > o.faults {
		return false
	}
	for k := range b.used {
		if b.used[k] > o.used[k] {
			return false
		}
	}
	return true
}

func (b budget) key() string {
	var s strings.Builder
	s.WriteString(strconv.Itoa(b.preem))
	s.WriteByte('/')
	s.WriteString(strconv.Itoa(b.faults))
	for _, u := range b.used {
		s.WriteByte('/')
		s.WriteString(strconv.Itoa(u))
	}
	return s.String()
}

// choice is an alternative to the default step at a choice point: another
// client step (pre: it is a preemption), or fault number fault of the
// alphabet (-1 for a client step).
type choice struct {
	step  Step
	pre   bool
	fault int
}

// choices lists every alternative to def, whatever the budget.
func (e *explorer) choices(def Step, last int, enabled []Step) []choice {
	var out []choice
	for _, alt := range enabled {
		if alt != def {
			out = append(out, choice{step: alt, pre: preemptive(alt, last, enabled), fault: -1})
		}
	}
	for k, f := range e.alphabet {
		out = append(out, choice{step: f, fault: k})
	}
	return out
}

// take returns the budget after choosing c with budget b; ok=false when c
// is beyond the bounds.
func (e *explorer) take(b budget, c choice) (budget, bool) {
	if c.fault < 0 {
		np := b.preem
		if c.pre {
			np++
		}
		if np > e.opts.MaxPreemptions {
			return budget{}, false
		}
		return budget{preem: np, faults: b.faults, used: b.used}, true
	}
	if b.faults >= e.opts.MaxFaults {
		return budget{}, false
	}
	if b.used[c.fault] > 0 && alphabetCount(e.alphabet, c.step) <= b.used[c.fault] {
		return budget{}, false
	}
	u := slices.Clone(b.used)
	u[c.fault]++
	return budget{preem: b.preem, faults: b.faults + 1, used: u}, true
}

// stateNode is one state of the graph: the run ends there (end), or goes
// on with def (a preemption when defPre) or one of alts; next is the state
// each step leads to (0: the run ended after it).
type stateNode struct {
	end    bool
	def    Step
	defPre bool
	alts   []choice
	next   map[Step]uint64
}

// visit is an exploration of a state's subtree: the schedule text that
// reached it and the budget it had used.
type visit struct {
	text string
	b    budget
}

// reducer is the explorer's cache of states and its state graph.
type reducer struct {
	mu     sync.Mutex
	seen   map[uint64][]visit
	graph  map[uint64]*stateNode
	root   uint64
	pruned int
}

func newReducer() *reducer {
	return &reducer{seen: map[uint64][]visit{}, graph: map[uint64]*stateNode{}}
}

// pathState is the fingerprint of a state that cannot be compared: the
// path that reached it.
func pathState(steps Schedule) uint64 {
	h := fnv.New64a()
	writeString(h, "path "+steps.String())
	return h.Sum64() | 1
}

// node records state fp's choices, the first time it is seen.
func (d *reducer) node(fp uint64, root bool, n *stateNode) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if root {
		d.root = fp
	}
	if _, ok := d.graph[fp]; !ok {
		n.next = map[Step]uint64{}
		d.graph[fp] = n
	}
}

// edge records that step st leads from state from to state to.
func (d *reducer) edge(from uint64, st Step, to uint64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if n := d.graph[from]; n != nil {
		if _, ok := n.next[st]; !ok {
			n.next[st] = to
		}
	}
}

// prune reports whether a run that reached state fp by the schedule text
// with budget b can stop: an exploration of fp began with no more of the
// bounds used and a text that sorts first. Otherwise it records this one.
func (d *reducer) prune(fp uint64, text string, b budget) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	vs := d.seen[fp]
	for _, v := range vs {
		if v.text <= text && v.b.within(b) {
			d.pruned++
			return true
		}
	}
	vs = slices.DeleteFunc(vs, func(v visit) bool { return text <= v.text && b.within(v.b) })
	d.seen[fp] = append(vs, visit{text: text, b: b})
	return false
}

// naive counts the schedules the plain enumeration runs from the root with
// nothing of the bounds used; ok=false when the graph lacks a state it
// would reach (the exploration stopped early).
func (e *explorer) naive(d *reducer) (int64, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	memo := map[string]int64{}
	ok := true
	var count func(fp uint64, b budget) int64
	count = func(fp uint64, b budget) int64 {
		if fp == 0 {
			return 1
		}
		n := d.graph[fp]
		if n == nil {
			ok = false
			return 1
		}
		if n.end {
			return 1
		}
		k := strconv.FormatUint(fp, 16) + ":" + b.key()
		if v, seen := memo[k]; seen {
			return v
		}
		follow := func(st Step, nb budget) int64 {
			to, has := n.next[st]
			if !has {
				ok = false
				return 1
			}
			return count(to, nb)
		}
		nb := b
		if n.defPre {
			nb.preem++
		}
		total := follow(n.def, nb)
		for _, c := range n.alts {
			if cb, in := e.take(b, c); in {
				total = satAdd(total, follow(c.step, cb))
			}
		}
		memo[k] = total
		return total
	}
	return count(d.root, budget{used: make([]int, len(e.alphabet))}), ok
}

func satAdd(a, b int64) int64 {
	if s := a + b; s >= a {
		return s
	}
	return 1<<63 - 1
}
