// The scheduler: waits until every client has reached its next step,
// lists the steps that can run, and grants the one a chooser picks (an
// explicit schedule, the explorer, or the default order).

package harness

import (
	"fmt"
	"math/bits"
	"slices"
	"sort"
	"time"
)

// chooser picks the next step among the enabled client steps (it may also
// return an event); ok=false ends the run.
type chooser func(r *run, enabled []Step) (Step, bool)

// settledLocked reports whether every client has reached its next step or
// its end; wait is how long to wait for a quiet period when that is what
// is missing. A multi-node client is settled once its round's commands are
// all in: a command on every node, or as many as the round said it sends
// (internal/fanout); a round that said nothing is taken to be complete
// after a quiet period without a new command.
func (r *run) settledLocked(now time.Time) (bool, time.Duration) {
	var wait time.Duration
	ok := true
	for _, c := range r.cls {
		if c.ending {
			ok = false
			continue
		}
		if c.done || c.crashed {
			continue
		}
		if c.active > 0 || len(c.pending) == 0 {
			// A client that waits for its store's event (Client.Wait) has
			// reached its next step: none, until the event comes.
			ok = ok && c.waiting && c.active == 0 && len(c.pending) == 0
			continue
		}
		if !r.spec.multi {
			continue
		}
		if len(c.pending) >= len(r.slot.nodes) || c.burst == 1<<len(r.slot.nodes)-1 ||
			slices.ContainsFunc(c.pending, func(q *request) bool { return q.node == 0 }) {
			continue
		}
		if c.fan > 0 {
			// The round said how many commands it sends: wait for them
			// all, however long a goroutine is held back.
			if bits.OnesCount64(c.burst) < c.fan {
				ok = false
			}
			continue
		}
		if d := r.spec.quiet - now.Sub(c.changed); d > 0 {
			ok = false
			wait = max(wait, d)
		}
	}
	return ok, wait
}

// settleLimit is how long every client may run outside its requests
// before the run takes the strategy for blocked outside the store: a
// minute, which a client reconnecting on a loaded machine (a ZooKeeper
// session opened anew, a server slow to accept) stays well within, where
// 20 s did not under a full test run.
const settleLimit = time.Minute

func (r *run) settle() error {
	deadline := time.Now().Add(settleLimit)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		now := time.Now()
		r.mu.Lock()
		ok, wait := r.settledLocked(now)
		err := r.err
		r.mu.Unlock()
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		if now.After(deadline) {
			return fmt.Errorf("a client neither sent a command nor finished within %v (does the strategy sleep or block outside the store?)", settleLimit)
		}
		if wait <= 0 {
			wait = time.Second
		}
		timer.Reset(wait)
		select {
		case <-r.wake:
		case <-timer.C:
		case <-r.ctx.Done():
			return r.ctx.Err()
		}
	}
}

// enabledLocked lists the client steps that can run now.
func (r *run) enabledLocked() []Step {
	var out []Step
	for _, c := range r.cls {
		if c.done || c.crashed || c.paused || len(c.pending) == 0 {
			continue
		}
		if len(c.pending) == 1 && (!r.spec.multi || c.pending[0].node == 0) {
			out = append(out, Step{Kind: StepClient, Client: c.id})
			continue
		}
		ps := slices.Clone(c.pending)
		sort.Slice(ps, func(i, j int) bool {
			return ps[i].node < ps[j].node || ps[i].node == ps[j].node && ps[i].seq < ps[j].seq
		})
		seen := map[int]bool{}
		for _, q := range ps {
			if !seen[q.node] {
				seen[q.node] = true
				out = append(out, Step{Kind: StepClient, Client: c.id, Node: q.node})
			}
		}
	}
	return out
}

// pickLocked finds the request a client step names.
func (r *run) pickLocked(st Step) *request {
	if st.Client < 1 || st.Client > len(r.cls) {
		return nil
	}
	c := r.cls[st.Client-1]
	if c.done || c.crashed || c.paused {
		return nil
	}
	var best *request
	for _, q := range c.pending {
		if st.Node != 0 && q.node != st.Node {
			continue
		}
		if best == nil || q.node < best.node || q.node == best.node && q.seq < best.seq {
			best = q
		}
	}
	return best
}

// grant lets a client step run. It returns false when the step names
// nothing that can run.
func (r *run) grant(st Step) bool {
	r.mu.Lock()
	q := r.pickLocked(st)
	if q == nil {
		r.mu.Unlock()
		return false
	}
	c := q.c
	r.markLocked(c)
	c.pending = slices.DeleteFunc(c.pending, func(x *request) bool { return x == q })
	q.owner.active = true
	c.active++
	c.changed = time.Now()
	label := st
	if r.spec.multi && q.node != 0 {
		label.Node = q.node
	} else {
		label.Node = 0
	}
	e := Event{Step: len(r.hist.Events) + 1, Label: label.String(), Client: c.id, Node: q.node}
	e.Command = q.command()
	e.Touch = q.touch
	if q.local != "" {
		e.Touch = localTouch(q.local)
	}
	r.hist.Events = append(r.hist.Events, e)
	q.event = len(r.hist.Events) - 1
	c.lastEvent = q.event
	if q.local == "acquire" || q.local == "release" {
		c.merge = q.event
	}
	r.steps = append(r.steps, label)
	r.last = c.id
	r.mu.Unlock()
	close(q.done)
	return true
}

// defaultStepLocked is the schedule after an explicit prefix runs out: keep
// running the client that ran last while it can (no preemption), else the
// lowest-numbered one; resume a paused client when nothing else can run.
func (r *run) defaultStepLocked(enabled []Step) (Step, bool) {
	for _, st := range enabled {
		if st.Client == r.last {
			return st, true
		}
	}
	if len(enabled) > 0 {
		return enabled[0], true
	}
	for _, c := range r.cls {
		if c.paused && !c.done && !c.crashed {
			return Step{Kind: StepResume, Client: c.id}, true
		}
	}
	return Step{}, false
}

// lateCommand is how long grantLate waits for a command the scheduler took
// as missing.
const lateCommand = 2 * time.Second

// grantLate grants st once its command arrives, in a multi-node run where
// the quiet period ran out before a client sent it (a loaded machine can
// hold a fan-out goroutine back longer than the quiet period). It returns
// false when nothing arrives within lateCommand or st names no node.
func (r *run) grantLate(st Step) bool {
	if !r.spec.multi || st.Node == 0 {
		return false
	}
	deadline := time.NewTimer(lateCommand)
	defer deadline.Stop()
	for {
		r.mu.Lock()
		q := r.pickLocked(st)
		r.mu.Unlock()
		if q != nil {
			return r.grant(st)
		}
		select {
		case <-r.wake:
		case <-time.After(time.Millisecond):
		case <-deadline.C:
			return false
		case <-r.ctx.Done():
			return false
		}
	}
}
