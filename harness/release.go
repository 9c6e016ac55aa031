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
// holds the lock: whether the victim's hold is the lock is read before and
// after it, and the wrongful-release checker (check.go) judges.
type releaseWatch struct {
	r      *run
	c      *client
	victim *client
	node   int
	// held: the victim's hold was the lock before the command.
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
	w.held, _ = w.holds()
	return w
}

// holds reads whether the victim's hold is the lock on the watched node
// now: a HoldProber says so; another store's Probe reads the holder's
// Lease.Token, whose failure to read counts as the hold gone.
func (w *releaseWatch) holds() (bool, error) {
	r := w.r
	r.mu.Lock()
	lease := w.victim.lease
	r.mu.Unlock()
	if hp, ok := r.slot.store.(HoldProber); ok {
		return hp.Holds(r.ctx, w.node-1, r.spec.key, w.victim.handle, lease)
	}
	v, _ := r.probeKey(w.node)
	return tokenHolds(v, lease.Token), nil
}

// judge reads the key after the watched command q and records a wrongful
// release in its event.
func (w *releaseWatch) judge(q *request) {
	if w == nil {
		return
	}
	r := w.r
	still, err := w.holds()
	if err != nil {
		return
	}
	r.mu.Lock()
	checkReleaseStep(r.hist, q.event, releaseProbe{client: w.c.id, victim: w.victim.id, node: w.node,
		heldBefore: w.held, heldAfter: still, victimHolds: w.victim.holding})
	r.mu.Unlock()
}
