// A client's operations: acquire, write, sleep, release and crash, each
// the steps of one op of its program (loop, client.go).

package harness

import (
	"errors"

	"github.com/locklab/locklab"
)

// acquire runs c's acquire op: up to op.Attempts tries, each a step of
// its own, until one acquires. It tells whether c goes on with its
// program (false: c crashed, or the run stopped or ended).
func (r *run) acquire(c *client, op Op) bool {
	for i := 0; i < op.Attempts; i++ {
		r.mu.Lock()
		c.info.Attempts++
		r.mu.Unlock()
		if _, err := r.submit(c.ctx, c, &c.local, 0, "acquire", nil, "acquire"); err != nil {
			return false
		}
		lease, err := c.locker.Acquire(c.ctx, r.spec.key, r.spec.ttl)
		r.mu.Lock()
		if c.crashed {
			r.mu.Unlock()
			return false
		}
		if err == nil {
			r.acquiredLocked(c, lease)
			r.mu.Unlock()
			return !r.spec.guarded || r.readGuard(c, lease)
		}
		switch {
		case c.waiting && c.done:
			// The run ended while the client waited (Client.Wait).
			r.noteLocked(c, "still waits as the run ends")
			r.mu.Unlock()
			return false
		case errors.Is(err, locklab.ErrNotAcquired):
			r.noteLocked(c, "refused")
		case errors.Is(err, errStopped):
			r.mu.Unlock()
			return false
		default:
			r.noteLocked(c, "acquire failed: %v", err)
		}
		r.mu.Unlock()
	}
	return true
}

// acquiredLocked records that c acquired lease: its hold, the history's
// acquisition and a note.
func (r *run) acquiredLocked(c *client, lease locklab.Lease) {
	r.acqs++
	r.holderChanges++
	c.holding, c.lease, c.seq, c.renewLost = true, lease, r.acqs, false
	c.info.Acquired++
	step := 0
	if c.lastEvent >= 0 {
		step = r.hist.Events[c.lastEvent].Step
	}
	r.hist.Acquisitions = append(r.hist.Acquisitions, Acquisition{Client: c.id, Step: step, Token: lease.Token, Fence: lease.Fence, Seq: c.seq})
	if lease.Fence != 0 {
		r.noteLocked(c, "acquired (fence %d)", lease.Fence)
	} else {
		r.noteLocked(c, "acquired")
	}
	r.refreshHoldersLocked(c)
}

// writeOp runs c's write op, as a holder: the guarded write, or a step
// then the register's write. It tells whether c goes on.
func (r *run) writeOp(c *client) bool {
	if r.spec.guarded {
		return r.writeGuarded(c)
	}
	if _, err := r.submit(c.ctx, c, &c.local, 0, "write", nil, "write"); err != nil {
		return false
	}
	r.write(c)
	return true
}

// sleep runs c's sleep op: a step, then op.Dur of the run's clock. It
// tells whether c goes on.
func (r *run) sleep(c *client, op Op) bool {
	if _, err := r.submit(c.ctx, c, &c.local, 0, "sleep", nil, "sleep "+op.Dur.String()); err != nil {
		return false
	}
	r.mu.Lock()
	c.sleeping = true
	r.mu.Unlock()
	err := r.advance(op.Dur)
	r.mu.Lock()
	c.sleeping = false
	r.mu.Unlock()
	if err != nil {
		r.fail(err)
		return false
	}
	return true
}

// release runs c's release op, as a holder: a step, then the release of
// its lease, noted with its outcome. It tells whether c goes on.
func (r *run) release(c *client) bool {
	if _, err := r.submit(c.ctx, c, &c.local, 0, "release", nil, "release"); err != nil {
		return false
	}
	r.mu.Lock()
	c.inRelease = true
	r.holderChanges++
	lease := c.lease
	r.mu.Unlock()
	err := c.locker.Release(c.ctx, lease)
	r.mu.Lock()
	defer r.mu.Unlock()
	if c.crashed {
		return false
	}
	c.holding, c.inRelease = false, false
	r.holderChanges++
	switch {
	case err == nil:
		r.noteLocked(c, "released")
	case errors.Is(err, locklab.ErrNotHeld):
		r.noteLocked(c, "release: not held")
	default:
		r.noteLocked(c, "release failed: %v", err)
	}
	r.refreshHoldersLocked(c)
	return true
}

// crash runs c's crash op: c crashes, and its store's session ends with
// it.
func (r *run) crash(c *client) {
	r.mu.Lock()
	r.crashLocked(c)
	r.crashes++
	r.noteLocked(c, "crashed")
	c.ending = true
	r.mu.Unlock()
	r.slot.store.Crashed(c.handle)
	r.mu.Lock()
	c.ending = false
	r.mu.Unlock()
}

// refreshHoldersLocked updates the holders of c's last event.
func (r *run) refreshHoldersLocked(c *client) {
	if c.lastEvent >= 0 && c.lastEvent < len(r.hist.Events) {
		r.hist.Events[c.lastEvent].Holders = r.holdersLocked()
	}
}

func (r *run) write(c *client) {
	r.mu.Lock()
	defer r.mu.Unlock()
	w := Write{Client: c.id, Fence: c.lease.Fence, Seq: c.seq, Accepted: true}
	if c.lastEvent >= 0 {
		w.Step = r.hist.Events[c.lastEvent].Step
	}
	if r.spec.fenced && w.Fence < r.maxFence {
		w.Accepted = false
	}
	w.Stale = r.lastWriter > c.seq
	if w.Accepted {
		r.maxFence = max(r.maxFence, w.Fence)
		r.lastWriter = max(r.lastWriter, c.seq)
		r.noteLocked(c, "wrote (fence %d)", w.Fence)
	} else {
		r.noteLocked(c, "write refused (fence %d<%d)", w.Fence, r.maxFence)
	}
	r.hist.Writes = append(r.hist.Writes, w)
}
