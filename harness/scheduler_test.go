package harness

import (
	"context"
	"testing"
	"time"

	"github.com/locklab/locklab/internal/fanout"
)

// TestGrantLate: in a multi-node run, a command that a fan-out goroutine
// sends after the quiet period (as on a loaded machine) is granted when it
// arrives, instead of failing the schedule that names it; a step naming a
// command that never comes still fails.
func TestGrantLate(t *testing.T) {
	nodes := []Node{AddrNode{"n1", "127.0.0.1:1", redisStore}, AddrNode{"n2", "127.0.0.1:1", redisStore}}
	sl := mustSlot(t, nodes)
	defer sl.close()
	r := newRun(context.Background(), runSpec{multi: true, key: "k"}, sl)
	c := &client{id: 1, lastEvent: -1, merge: -1}
	r.cls = []*client{c}
	st := Step{Kind: StepClient, Client: 1, Node: 2}
	if r.grant(st) {
		t.Fatal("granted a command nobody sent")
	}
	q := &request{c: c, owner: &c.local, node: 2, text: []string{"GET", "k"}, done: make(chan struct{})}
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

// TestSettledAfterFanOut: a multi-node client with commands outstanding on
// some nodes waits out the quiet period (another fan-out goroutine may not
// have sent yet), unless every node has had its command since the client
// was last idle: then nothing more is coming.
func TestSettledAfterFanOut(t *testing.T) {
	nodes := []Node{AddrNode{"n1", "127.0.0.1:1", redisStore}, AddrNode{"n2", "127.0.0.1:1", redisStore}, AddrNode{"n3", "127.0.0.1:1", redisStore}}
	sl := mustSlot(t, nodes)
	defer sl.close()
	r := newRun(context.Background(), runSpec{multi: true, key: "k", quiet: time.Hour}, sl)
	c := &client{id: 1, lastEvent: -1, merge: -1}
	r.cls = []*client{c}
	send := func(node int) {
		if _, err := r.submit(context.Background(), c, &c.local, node, "GET", []any{"k"}, ""); err != nil {
			t.Error(err)
		}
	}
	pending := func(n int) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			r.mu.Lock()
			got := len(c.pending)
			r.mu.Unlock()
			if got == n {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d commands pending, want %d", got, n)
			}
			time.Sleep(time.Millisecond)
		}
	}
	go send(2)
	go send(3)
	pending(2)
	r.mu.Lock()
	ok, wait := r.settledLocked(time.Now())
	r.mu.Unlock()
	if ok || wait <= 0 {
		t.Fatalf("n1 has not had its command yet: settled %v, wait %v", ok, wait)
	}
	go send(1)
	pending(3)
	r.mu.Lock()
	ok, _ = r.settledLocked(time.Now())
	// n1's command is answered; n2 and n3 are still outstanding.
	q := c.pending[2]
	c.pending = c.pending[:2]
	r.mu.Unlock()
	if !ok {
		t.Fatal("a command on every node: settled")
	}
	close(q.done)
	r.mu.Lock()
	ok, wait = r.settledLocked(time.Now())
	for _, q := range c.pending {
		close(q.done)
	}
	c.pending = nil
	r.mu.Unlock()
	if !ok || wait != 0 {
		t.Fatalf("every node had its command: settled %v, wait %v", ok, wait)
	}
}

// TestSettledWaitsForAnnouncedFanOut: a round that says how many nodes it
// sends to (internal/fanout) is waited for until that many commands are
// in, however long past the quiet period, and no longer: a round to two of
// three nodes is complete with two.
func TestSettledWaitsForAnnouncedFanOut(t *testing.T) {
	nodes := []Node{AddrNode{"n1", "127.0.0.1:1", redisStore}, AddrNode{"n2", "127.0.0.1:1", redisStore}, AddrNode{"n3", "127.0.0.1:1", redisStore}}
	for _, tc := range []struct {
		name  string
		quiet time.Duration
		round []int
	}{
		{"every node, a goroutine held back past the quiet period", time.Nanosecond, []int{2, 3, 1}},
		{"two of three nodes, a quiet period never over", time.Hour, []int{3, 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sl := mustSlot(t, nodes)
			defer sl.close()
			r := newRun(context.Background(), runSpec{multi: true, key: "k", quiet: tc.quiet}, sl)
			c := &client{id: 1, lastEvent: -1, merge: -1}
			r.cls = []*client{c}
			ctx := fanout.With(context.Background(), len(tc.round))
			for i, node := range tc.round {
				go r.submit(ctx, c, &c.local, node, "GET", []any{"k"}, "")
				deadline := time.Now().Add(10 * time.Second)
				for {
					r.mu.Lock()
					n := len(c.pending)
					r.mu.Unlock()
					if n == i+1 {
						break
					}
					if time.Now().After(deadline) {
						t.Fatalf("%d commands pending, want %d", n, i+1)
					}
					time.Sleep(time.Millisecond)
				}
				time.Sleep(2 * time.Millisecond) // past a nanosecond's quiet
				r.mu.Lock()
				ok, wait := r.settledLocked(time.Now())
				r.mu.Unlock()
				if last := i == len(tc.round)-1; ok != last || wait != 0 {
					t.Fatalf("after %d of %d commands: settled %v, wait %v; want settled %v, no quiet wait", i+1, len(tc.round), ok, wait, last)
				}
			}
			r.mu.Lock()
			for _, q := range c.pending {
				close(q.done)
			}
			c.pending = nil
			r.mu.Unlock()
		})
	}
}

// mustSlot is the slot of database 0 on nodes.
func mustSlot(t *testing.T, nodes []Node) *slot {
	t.Helper()
	sl, err := newSlot(nodes, 0, "")
	if err != nil {
		t.Fatal(err)
	}
	return sl
}
