// Events: the steps of a schedule that are not a client's command: a
// client crashes, pauses, is cut off or its clock skews; time passes; a
// node's clock jumps, or a node is killed, restarted, paused, partitioned
// or failed over.

package harness

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/locklab/locklab/harness/fault"
)

// crashLocked marks c crashed; the caller tells the store (Store.Crashed)
// once it has let go of the run's lock.
func (r *run) crashLocked(c *client) {
	if c.crashed || c.done {
		c.crashed = true
		return
	}
	c.crashed = true
	c.info.Crashed = true
	c.holding = c.holding && true
	for _, q := range c.pending {
		q.err = errCrashed
		close(q.done)
	}
	c.pending = nil
	c.cancel()
}

// event applies an environment step.
func (r *run) event(st Step) error {
	r.mu.Lock()
	r.markLocked(nil)
	e := Event{Step: len(r.hist.Events) + 1, Label: st.String()}
	var c *client
	if st.Client > 0 {
		if st.Client > len(r.cls) {
			r.mu.Unlock()
			return fmt.Errorf("step %s: no client c%d", st, st.Client)
		}
		c = r.cls[st.Client-1]
	}
	if st.Node > len(r.slot.nodes) {
		r.mu.Unlock()
		return fmt.Errorf("step %s: no node n%d (the run has %d)", st, st.Node, len(r.slot.nodes))
	}
	switch st.Kind {
	case StepCrash:
		r.crashLocked(c)
		e.Notes = append(e.Notes, fmt.Sprintf("c%d crashed", c.id))
	case StepPause:
		c.paused = true
	case StepResume:
		c.paused = false
	case StepIsolate:
		c.isolated = true
	case StepRejoin:
		c.isolated = false
	case StepLose:
		c.loseReply = true
	case StepSkew:
		c.skew += st.Dur
		e.Notes = append(e.Notes, fmt.Sprintf("c%d's clock is off by %s", c.id, signed(c.skew)))
	}
	r.hist.Events = append(r.hist.Events, e)
	idx := len(r.hist.Events) - 1
	r.steps = append(r.steps, st)
	r.mu.Unlock()
	if st.Kind == StepCrash {
		r.slot.store.Crashed(c.handle)
	}
	if st.Kind == StepCrash {
		r.notify()
	}
	var err error
	switch st.Kind {
	case StepTime:
		d := st.Dur
		if d == 0 {
			d = r.spec.ttl + 2*time.Second
		}
		t := r.timeTouch(d)
		r.mu.Lock()
		r.marks.time = t
		r.mu.Unlock()
		err = r.advance(d)
	case StepExpire:
		var n int
		n, err = r.slot.store.Advance(r.ctx, st.Node-1, expireAll)
		r.mu.Lock()
		r.hist.Events[idx].Notes = append(r.hist.Events[idx].Notes, fmt.Sprintf("n%d's clock jumps: %d key(s) expired", st.Node, n))
		r.mu.Unlock()
	case StepTerminate:
		err = r.terminate(c, idx)
	case StepKill, StepRestart, StepNodePause, StepNodeResume, StepPartition, StepHeal, StepFailover, StepLag, StepWipe:
		err = r.nodeFault(st)
		if nt, ok := r.slot.nodes[st.Node-1].(fault.Noter); ok {
			if note := nt.Note(); note != "" {
				r.mu.Lock()
				r.hist.Events[idx].Notes = append(r.hist.Events[idx].Notes, note)
				r.mu.Unlock()
			}
		}
	}
	return err
}

// takeLost reports whether the reply to c's request q is to be lost
// (lose(cN)): once per lose step, for the next request the client sends
// after it, which q's event then says.
func (r *run) takeLost(c *client, q *request) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !c.loseReply {
		return false
	}
	c.loseReply = false
	e := &r.hist.Events[q.event]
	e.Notes = append(e.Notes, fmt.Sprintf("the reply is lost: c%d's connection drops", c.id))
	return true
}

// terminate has the server end c's sessions (terminate(cN)) and notes how
// many it ended on event idx.
func (r *run) terminate(c *client, idx int) error {
	t, ok := r.slot.store.(Terminator)
	if !ok {
		return fmt.Errorf("step terminate(c%d): this store cannot end a client's sessions", c.id)
	}
	n, err := t.Terminate(r.ctx, c.handle)
	if err != nil {
		return err
	}
	r.mu.Lock()
	note := fmt.Sprintf("the server ended c%d's %d sessions", c.id, n)
	switch n {
	case 0:
		note = fmt.Sprintf("c%d has no session to end", c.id)
	case 1:
		note = fmt.Sprintf("the server ended c%d's session", c.id)
	}
	r.hist.Events[idx].Notes = append(r.hist.Events[idx].Notes, note)
	r.mu.Unlock()
	return nil
}

// advance moves virtual time forward by d on every clock and node, the
// leases of the holders whose renewal runs renewed as it passes (renew.go).
func (r *run) advance(d time.Duration) error {
	if r.spec.renew {
		return r.advanceRenewing(d)
	}
	return r.advanceAll(d)
}

// advanceAll moves virtual time forward by d on every clock and node.
func (r *run) advanceAll(d time.Duration) error {
	r.mu.Lock()
	r.now += d
	down := slices.Clone(r.down)
	r.mu.Unlock()
	for i := range r.slot.nodes {
		if down[i] {
			continue
		}
		if _, err := r.slot.store.Advance(r.ctx, i, d); err != nil {
			return fmt.Errorf("advancing time on %s: %w", r.slot.nodes[i].Name(), err)
		}
	}
	return nil
}

// nodeFault applies a node fault step: the beginning or the end of one of
// node's faults. A node that goes down or comes back gets a fresh pool: its
// idle connections are dead.
func (r *run) nodeFault(st Step) error {
	n := r.slot.nodes[st.Node-1]
	f, end := st.fault()
	if st.Kind == StepRestart && st.Delayed {
		if err := r.delayRestart(st); err != nil {
			return err
		}
	}
	var err error
	if end {
		err = fault.End(r.ctx, n, f)
	} else {
		err = fault.Begin(r.ctx, n, f)
	}
	if errors.Is(err, fault.ErrNotImplemented) {
		return fmt.Errorf("step %s: node %s does not support this fault", st, n.Name())
	}
	if f == fault.Kill || f == fault.Restart || f == fault.RestartKeep || f == fault.Failover || f == fault.MemberLoss {
		r.slot.store.Reconnect(st.Node - 1)
	}
	// A failover, and a member's loss, leave the node (a cluster) serving:
	// the node's Recover makes it whole for the next run.
	if f != fault.Failover && f != fault.MemberLoss {
		r.mu.Lock()
		r.down[st.Node-1] = !end
		r.faulted[st.Node-1] = 0
		if !end {
			r.faulted[st.Node-1] = f
		}
		r.mu.Unlock()
	}
	return err
}

// endFaults ends the faults a run left its nodes under (a node killed and
// not restarted, paused and not resumed, partitioned and not healed): the
// next run on these nodes starts with every node up, as the first did.
func (r *run) endFaults() error {
	r.mu.Lock()
	faulted := slices.Clone(r.faulted)
	clear(r.faulted)
	r.mu.Unlock()
	var errs []error
	for i, f := range faulted {
		if f == 0 {
			continue
		}
		n := r.slot.nodes[i]
		if err := fault.End(context.WithoutCancel(r.ctx), n, f); err != nil {
			errs = append(errs, fmt.Errorf("ending %s on %s after the run: %w", f, n.Name(), err))
		}
		r.slot.store.Reconnect(i)
	}
	return errors.Join(errs...)
}

// delayRestart keeps node st.Node down while the TTL passes everywhere
// else, before the restart brings it back: the delayed restart of the
// Redlock page.
func (r *run) delayRestart(st Step) error {
	r.mu.Lock()
	r.down[st.Node-1] = true
	r.mu.Unlock()
	d := r.spec.ttl + 2*time.Second
	if err := r.advance(d); err != nil {
		return err
	}
	r.mu.Lock()
	e := &r.hist.Events[len(r.hist.Events)-1]
	e.Notes = append(e.Notes, fmt.Sprintf("n%d stays down %s before it rejoins", st.Node, d))
	r.mu.Unlock()
	return nil
}

// fault is the node fault a node step begins or ends.
func (s Step) fault() (f fault.Fault, end bool) {
	switch s.Kind {
	case StepKill:
		return fault.Kill, false
	case StepRestart:
		if s.Keep {
			return fault.RestartKeep, true
		}
		return fault.Restart, true
	case StepNodePause, StepNodeResume:
		return fault.Pause, s.Kind == StepNodeResume
	case StepPartition, StepHeal:
		return fault.Partition, s.Kind == StepHeal
	case StepFailover:
		return fault.Failover, false
	case StepLag, StepWipe:
		return fault.MemberLoss, s.Kind == StepWipe
	}
	return 0, false
}
