package harness

import (
	"context"
	"testing"
	"time"
)

// TestGrantLate: in a multi-node run, a command that a fan-out goroutine
// sends after the quiet period (as on a loaded machine) is granted when it
// arrives, instead of failing the schedule that names it; a step naming a
// command that never comes still fails.
func TestGrantLate(t *testing.T) {
	nodes := []Node{AddrNode{"n1", "127.0.0.1:1"}, AddrNode{"n2", "127.0.0.1:1"}}
	sl := newSlot(nodes, 0)
	defer sl.close()
	r := newRun(context.Background(), runSpec{multi: true, key: "k"}, sl)
	c := &client{id: 1, lastEvent: -1, merge: -1}
	r.cls = []*client{c}
	st := Step{Kind: StepClient, Client: 1, Node: 2}
	if r.grant(st) {
		t.Fatal("granted a command nobody sent")
	}
	q := &request{c: c, owner: &c.local, node: 2, cmd: "GET", args: []any{"k"}, done: make(chan struct{})}
	go func() {
		time.Sleep(20 * time.Millisecond) // far past the quiet period
		r.mu.Lock()
		c.pending = append(c.pending, q)
		r.mu.Unlock()
		r.notify()
	}()
	if !r.grantLate(st) {
		t.Fatal("the late command was not granted")
	}
	select {
	case <-q.done:
	default:
		t.Fatal("the late command's request is not released")
	}
	if got := r.hist.Events[len(r.hist.Events)-1].Label; got != "c1@n2" {
		t.Errorf("event %q, want c1@n2", got)
	}
	if r.grantLate(Step{Kind: StepClient, Client: 1, Node: 1}) {
		t.Error("granted a command that never came")
	}
}
