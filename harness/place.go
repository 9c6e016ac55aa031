// Placing the matrix's cells: several cells explore at once, each in its
// own databases of the nodes, except those that fault a node (a restart, a
// failover), which have their nodes to themselves.

package harness

import (
	"slices"
	"sync"

	"github.com/locklab/locklab/harness/fault"
)

// dbCount is the number of databases a redis-server has by default.
const dbCount = 16

// placement is where one cell runs: nodes (the slot's, in order) and the
// first database its workers use.
type placement struct {
	nodes []int // indexes into the matrix's nodes
	db    int
}

// cellJob is a cell to place: the node sets it can run on (any one of
// them), and whether it needs them to itself.
type cellJob struct {
	index     int
	cs        Case
	choices   [][]int
	exclusive bool
}

// placer hands out nodes and databases: a node runs either one exclusive
// cell or shared cells on separate lanes (ranges of Workers databases).
type placer struct {
	mu      sync.Mutex
	cond    *sync.Cond
	excl    []bool
	lanes   [][]bool // per node, per lane: in use
	width   int      // databases per lane
	running int
	max     int
}

func newPlacer(nodes, workers, parallel int) *placer {
	w := min(max(workers, 1), dbCount)
	p := &placer{excl: make([]bool, nodes), width: w, max: max(parallel, 1)}
	for range nodes {
		p.lanes = append(p.lanes, make([]bool, dbCount/w))
	}
	p.cond = sync.NewCond(&p.mu)
	return p
}

// jobFor lists where cell cs can run among nodes. A cell that faults a
// node has it to itself. A single-node cell may run on any node; one that
// needs the first node (a replica to wait for, a failover) runs there; the
// others keep off it while there are more nodes, those that fault their
// node on the last one.
//
// A strategy that waits for a replica shares the node otherwise: its
// replica catches up once and stays connected (conn.wait), and a failover
// cell leaves it caught up (exploreCell), so that its runs resync nothing
// (a fork and a transfer that would hold up the other cells' commands on
// that node, and a multi-node client's quiet period might run out).
func jobFor(index int, cs Case, nodes []Node) cellJob {
	j := cellJob{index: index, cs: cs, exclusive: len(cs.Scenario.Needs) > 0}
	k := len(cs.nodesFor(nodes))
	first := cs.Strategy.Replica || slices.Contains(cs.Scenario.Needs, fault.Failover)
	if k > 1 || first || len(nodes) == 1 {
		all := make([]int, k)
		for i := range all {
			all[i] = i
		}
		j.choices = [][]int{all}
		return j
	}
	for i := len(nodes) - 1; i >= 1; i-- {
		if why, err := cs.Scenario.unsupported(nodes[i : i+1]); err == nil && why == "" {
			j.choices = append(j.choices, []int{i})
			if j.exclusive {
				break // one node for those: the others stay shared
			}
		}
	}
	if len(j.choices) == 0 {
		j.choices = [][]int{{0}}
	}
	return j
}

// order puts the cells that fault nodes first, those on every node before
// the others: they are the ones that wait for nodes to be free. The other
// cells on every node follow, then the rest, the larger scenarios first
// (weight), so that the last cells to start are short ones.
func order(jobs []cellJob) {
	rank := func(j cellJob) int {
		switch {
		case j.exclusive && len(j.choices[0]) > 1:
			return 0
		case j.exclusive:
			return 1
		case len(j.choices[0]) > 1:
			return 2
		}
		return 3
	}
	slices.SortStableFunc(jobs, func(a, b cellJob) int {
		if r := rank(a) - rank(b); r != 0 {
			return r
		}
		return weight(b.cs.Scenario) - weight(a.cs.Scenario)
	})
}

// weight guesses how many schedules a scenario has: more with every
// operation of its clients, and more again with every fault a schedule may
// add.
func weight(sc *Scenario) int {
	ops := 0
	for _, p := range sc.Programs {
		ops += len(p)
	}
	return ops * (1 + sc.MaxFaults) * len(sc.Programs)
}

// take places the first job of jobs that fits now and removes it from
// jobs; ok=false when none does. An exclusive job that does not fit holds
// the nodes it wants against the jobs after it, so that those do not keep
// it waiting.
func (p *placer) take(jobs *[]cellJob) (cellJob, placement, bool) {
	if p.running >= p.max {
		return cellJob{}, placement{}, false
	}
	held := make([]bool, len(p.excl))
	for i, j := range *jobs {
		if pl, ok := p.fit(j, held); ok {
			*jobs = slices.Delete(*jobs, i, i+1)
			p.running++
			for _, n := range pl.nodes {
				if j.exclusive {
					p.excl[n] = true
				} else {
					p.lanes[n][pl.db/p.width] = true
				}
			}
			return j, pl, true
		}
		if !j.exclusive {
			continue
		}
		for _, c := range j.choices {
			for _, n := range c {
				held[n] = true
			}
		}
	}
	return cellJob{}, placement{}, false
}

// fit finds a place for j among the nodes not held, the least busy first.
func (p *placer) fit(j cellJob, held []bool) (placement, bool) {
	choices := slices.Clone(j.choices)
	slices.SortStableFunc(choices, func(a, b []int) int { return p.busy(a) - p.busy(b) })
	for _, c := range choices {
		if slices.ContainsFunc(c, func(n int) bool { return held[n] || p.excl[n] }) {
			continue
		}
		if j.exclusive {
			if p.busy(c) == 0 {
				return placement{nodes: c}, true
			}
			continue
		}
		for l := range p.lanes[c[0]] {
			if !slices.ContainsFunc(c, func(n int) bool { return p.lanes[n][l] }) {
				return placement{nodes: c, db: l * p.width}, true
			}
		}
	}
	return placement{}, false
}

// busy counts the lanes in use on nodes.
func (p *placer) busy(nodes []int) int {
	n := 0
	for _, i := range nodes {
		for _, used := range p.lanes[i] {
			if used {
				n++
			}
		}
	}
	return n
}

// release frees what j held.
func (p *placer) release(j cellJob, pl placement) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.running--
	for _, n := range pl.nodes {
		if j.exclusive {
			p.excl[n] = false
		} else {
			p.lanes[n][pl.db/p.width] = false
		}
	}
	p.cond.Broadcast()
}
