// Renewal: a strategy that keeps its lease alive by default (Redisson's
// watchdog on hash-reentrant) runs in the matrix as its users get it. Its
// renewal runs on the machine's clock and would send commands no schedule
// chose, so the strategy is built without it (Config.NoWatchdog) and the
// run renews for it: while time passes, every TTL/3 of it, each holder
// whose process runs and reaches the server extends its lease with the
// strategy's own Extend, outside the schedule. A holder that is paused (in
// a sleep step), crashed or cut off (isolate) renews nothing, as its
// watchdog, which runs in its process and talks over its network, would
// not; nor does one whose last renewal failed (the watchdog says the lock
// is lost and stops). The time step's notes say who renewed, and how often.

package harness

import (
	"context"
	"fmt"
	"time"

	"github.com/locklab/locklab"
)

// renewTimeout bounds one renewal: a node that does not answer (paused)
// fails it, as the watchdog's bounded extend would.
const renewTimeout = 2 * time.Second

// renewers returns the clients whose renewal runs now: holding, alive,
// running, not cut off, their node up, and no renewal of theirs failed.
func (r *run) renewersLocked() []*client {
	if !r.spec.renew || len(r.down) == 0 || r.down[0] {
		return nil
	}
	var out []*client
	for _, c := range r.cls {
		if c.holding && !c.crashed && !c.done && !c.paused && !c.isolated && !c.sleeping && !c.renewLost {
			out = append(out, c)
		}
	}
	return out
}

// renew extends c's lease to the TTL, outside the schedule, with an
// instance of the strategy on the store's own connections.
func (r *run) renew(c *client) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = panicked(c, v)
		}
	}()
	rs, ok := r.slot.store.(Renewer)
	if !ok {
		return fmt.Errorf("the store of %s cannot renew outside the schedule", r.spec.strategy)
	}
	r.mu.Lock()
	l, lease := c.renewer, c.lease
	r.mu.Unlock()
	if l == nil {
		cfg := locklab.Config{Clock: locklab.ClockFunc(func() time.Time { return r.clock(c) }), NoWatchdog: r.spec.noWatchdog}
		rs.Unscheduled(&cfg)
		l, err = r.spec.factory(cfg)
		if err != nil {
			return err
		}
		r.mu.Lock()
		c.renewer = l
		r.mu.Unlock()
	}
	ctx, cancel := context.WithTimeout(r.ctx, renewTimeout)
	defer cancel()
	if _, err := locklab.Extend(ctx, l, lease, r.spec.ttl); err != nil {
		return err
	}
	rs.Renewed(lease)
	return nil
}

// advanceRenewing moves virtual time forward by d, every TTL/3 of it
// renewing the leases of the clients whose renewal runs, and notes on
// the run's last event who renewed and who lost the lock.
func (r *run) advanceRenewing(d time.Duration) error {
	every := r.spec.ttl / 3
	renewed := map[int]int{}
	var lost []string
	var order []int
	for left := d; left > 0; {
		r.mu.Lock()
		rs := r.renewersLocked()
		r.mu.Unlock()
		for _, c := range rs {
			if _, seen := renewed[c.id]; !seen {
				order = append(order, c.id)
			}
			if err := r.renew(c); err != nil {
				r.mu.Lock()
				c.renewLost = true
				r.mu.Unlock()
				lost = append(lost, fmt.Sprintf("c%d's %s could not renew the lock (%v): it stops", c.id, r.renewal(), err))
				continue
			}
			renewed[c.id]++
		}
		chunk := min(left, every)
		if err := r.advanceAll(chunk); err != nil {
			return err
		}
		left -= chunk
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.hist.Events) == 0 {
		return nil
	}
	e := &r.hist.Events[len(r.hist.Events)-1]
	for _, id := range order {
		if n := renewed[id]; n > 0 {
			e.Notes = append(e.Notes, fmt.Sprintf("c%d's %s renewed the lock %s", id, r.renewal(), times(n)))
		}
	}
	e.Notes = append(e.Notes, lost...)
	return nil
}

// renewal names what renews the run's leases: the strategy's watchdog,
// or the keepalive its users run (RunSetting).
func (r *run) renewal() string {
	if w := RunSetting(r.spec.strategy); w != "" {
		return w
	}
	return "watchdog"
}

func times(n int) string {
	if n == 1 {
		return "once"
	}
	return fmt.Sprintf("%d times", n)
}
