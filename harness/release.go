// The wrongful-release watch: a release that runs while another client
// holds the lock has the key read before and after its command, and the
// checker (check.go) judges what changed.

package harness

import "slices"

// probeKey reads the run's lock key on node (1-based) outside the
// schedule.
func (r *run) probeKey(node int) (any, error) {
	return r.slot.store.Probe(r.ctx, node-1, r.spec.key)
}

// releaseWatch is a command of a release that runs while another client
// holds the lock: the key is read before and after it, and the
// wrongful-release checker (check.go) judges what changed.
type releaseWatch struct {
	r      *run
	c      *client
	victim *client
	node   int
	before any
	// held: the victim's hold was the lock before the command, where the
	// store is a HoldProber (hp), which says so in place of before.
	hp   HoldProber
	held bool
}

// watchRelease starts watching c's next command on node (1-based), when c
// is releasing while another client holds the lock; nil otherwise.
func (r *run) watchRelease(c *client, node int) *releaseWatch {
	var victim *client
	r.mu.Lock()
	if c.inRelease {
		// The victim holds the lock as the mutual-exclusion check counts
		// holders: its lease still valid on its own clock. A lock whose
		// time ran out is no one's to be wronged of, though its value
		// may be the releaser's too (incr-expire's tokens are counts).
		holders := r.holdersLocked()
		for _, o := range r.cls {
			if o != c && slices.Contains(holders, o.id) {
				victim = o
			}
		}
	}
	r.mu.Unlock()
	if victim == nil {
		return nil
	}
	w := &releaseWatch{r: r, c: c, victim: victim, node: node}
	if hp, ok := r.slot.store.(HoldProber); ok {
		w.hp = hp
		w.held, _ = w.holds()
		return w
	}
	w.before, _ = r.probeKey(node)
	return w
}

// holds asks the HoldProber whether the victim's hold is the lock now.
func (w *releaseWatch) holds() (bool, error) {
	r := w.r
	r.mu.Lock()
	lease := w.victim.lease
	r.mu.Unlock()
	return w.hp.Holds(r.ctx, w.node-1, r.spec.key, w.victim.handle, lease)
}

// judge reads the key after the watched command q and records a wrongful
// release in its event.
func (w *releaseWatch) judge(q *request) {
	if w == nil {
		return
	}
	r := w.r
	if w.hp != nil {
		still, err := w.holds()
		r.mu.Lock()
		if w.held && err == nil && !still && w.victim.holding {
			recordWrongRelease(r.hist, q.event, w.c.id, w.victim.id, w.node)
		}
		r.mu.Unlock()
		return
	}
	after, _ := r.probeKey(w.node)
	r.mu.Lock()
	checkReleaseStep(r.hist, q.event, releaseProbe{client: w.c.id, victim: w.victim.id, node: w.node,
		token: w.victim.lease.Token, victimHolds: w.victim.holding, before: w.before, after: after})
	r.mu.Unlock()
}
