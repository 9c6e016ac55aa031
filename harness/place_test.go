package harness

import (
	"testing"
)

// The placer never lets a cell that faults a node share it, gives cells
// sharing a node separate databases, and keeps to its parallelism.
func TestPlacer(t *testing.T) {
	p := newPlacer(2, 2, 3)
	jobs := []cellJob{
		{index: 0, choices: [][]int{{0}}, exclusive: true},
		{index: 1, choices: [][]int{{1}}},
		{index: 2, choices: [][]int{{0}}},
		{index: 3, choices: [][]int{{1}}},
		{index: 4, choices: [][]int{{1}}},
	}
	take := func() (cellJob, placement, bool) {
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.take(&jobs)
	}
	j0, pl0, ok := take()
	if !ok || j0.index != 0 {
		t.Fatalf("first: %v %v, want the exclusive cell", j0.index, ok)
	}
	j1, pl1, _ := take()
	if j1.index != 1 || pl1.nodes[0] != 1 || pl1.db != 0 {
		t.Fatalf("second: cell %d at %+v, want cell 1 on node 1, db 0", j1.index, pl1)
	}
	// Cell 2 waits for node 0 and holds it; cell 3 shares node 1.
	j3, pl3, _ := take()
	if j3.index != 3 || pl3.db != 2 {
		t.Fatalf("third: cell %d at %+v, want cell 3 on db 2", j3.index, pl3)
	}
	if _, _, ok := take(); ok {
		t.Fatal("a fourth cell started beyond the parallelism of 3")
	}
	p.release(j0, pl0)
	j2, pl2, ok := take()
	if !ok || j2.index != 2 || pl2.nodes[0] != 0 {
		t.Fatalf("after the exclusive cell: cell %d at %+v, want cell 2 on node 0", j2.index, pl2)
	}
}

// A strategy that waits for a replica runs on the first node, where the
// replica is, and has it to itself only when the scenario fails it over.
func TestJobForReplicaStrategy(t *testing.T) {
	nodes := []Node{AddrNode{"n1", "127.0.0.1:1", redisStore}, AddrNode{"n2", "127.0.0.1:2", redisStore}, AddrNode{"n3", "127.0.0.1:3", redisStore}}
	for _, tc := range []struct {
		scenario  string
		exclusive bool
	}{{"stale-recovery", false}, {"failover-loses-lock", true}} {
		cs, err := Resolve(tc.scenario, "set-nx-px-wait")
		if err != nil {
			t.Fatal(err)
		}
		j := jobFor(0, cs, nodes)
		if j.exclusive != tc.exclusive || len(j.choices) != 1 || len(j.choices[0]) != 1 || j.choices[0][0] != 0 {
			t.Errorf("%s: exclusive=%v choices=%v, want exclusive=%v on node 0 only", tc.scenario, j.exclusive, j.choices, tc.exclusive)
		}
	}
}
