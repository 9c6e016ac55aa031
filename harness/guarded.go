// The guarded write (Scenario.Guarded): the protected resource lives on
// the lock's own store, and each write is one atomic request that the
// store carries out only while the writer still holds the lock. What the
// guard checks is what the lock handed its user when it took the lock:
// etcd's lock key and its create revision, a ZooKeeper lock node's path
// and version, a Redis lock's key and token; PostgreSQL's row with a
// version column is read once the lock is taken.

package harness

import (
	"context"
	"errors"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/strategies"
)

// Guard is what a holder's guarded writes check.
type Guard struct {
	// Key names what the store checks: the lock's key or node, or the
	// row of the resource.
	Key string
	// Token is the holder's token where the check compares one (Redis's).
	Token string
	// Version is the number the check compares: the row's version, the
	// lock key's create revision, the lock node's version.
	Version int64
	// Show is how notes name the guard: "version 3", "revision 12".
	Show string
}

// Guarded is a store that offers the guarded write of the
// Scenario.Guarded scenarios: each call that reaches a server is a step of
// client c's.
type Guarded interface {
	// PrepareGuarded creates the resource of key afresh, outside the
	// schedule, before a run's clients start.
	PrepareGuarded(ctx context.Context, key string) error
	// ReadGuard returns what client c's guarded writes check, c having
	// just taken the lock with lease: read from the server (a step of
	// c's) where the lease does not carry it.
	ReadGuard(ctx context.Context, c *Client, lease locklab.Lease) (Guard, error)
	// WriteGuarded writes the resource in one request that the store
	// carries out only while g holds. It reports whether it did, and the
	// guard of c's next write.
	WriteGuarded(ctx context.Context, c *Client, g Guard) (next Guard, ok bool, err error)
}

// unguardedNA is why a guarded scenario is n/a on a strategy its store's
// Driver names in neither Guards nor Unguarded.
const unguardedNA = "its lock hands the user nothing a guarded write could check (no token, revision or node)"

// guardNA says why the guarded scenarios are n/a on strategy d, "" where
// its store offers the guard and its lock hands the user what it needs.
func guardNA(d strategies.Description) string {
	st, err := storeOf(d.Family)
	if err != nil {
		return err.Error()
	}
	if _, ok := st.Guards[d.Name]; ok {
		return ""
	}
	if why := st.Unguarded[d.Name]; why != "" {
		return why
	}
	return unguardedNA
}

// GuardOf returns what strategy's lock hands its user that its store's
// guarded write checks, or why it hands nothing (ok false).
func GuardOf(strategy string) (what string, ok bool) {
	d, err := strategies.Info(strategy)
	if err != nil {
		return err.Error(), false
	}
	if why := guardNA(d); why != "" {
		return why, false
	}
	st, _ := storeOf(d.Family)
	return st.Guards[d.Name], true
}

// readGuard has client c, which has just taken the lock with lease, read
// what its guarded writes check. It reports false when the client's run
// is over.
func (r *run) readGuard(c *client, lease locklab.Lease) bool {
	gs, _ := r.slot.store.(Guarded) // execute refused a store without one
	g, err := gs.ReadGuard(c.ctx, c.handle, lease)
	r.mu.Lock()
	defer r.mu.Unlock()
	if c.crashed || errors.Is(err, errStopped) {
		return false
	}
	if err != nil {
		// Without its guard the client has nothing to write with: it
		// skips its writes, as a program whose read failed would.
		c.unguarded = true
		r.noteLocked(c, "guard read failed: %v", err)
		return true
	}
	c.guard, c.unguarded = g, false
	r.noteLocked(c, "guard: %s", g.Show)
	return true
}

// writeGuarded has client c write the resource with its guarded write:
// accepted while its guard holds, refused once it does not. A stale write
// is one a client that took the lock later made before it, as for the
// fenced resource. It reports false when the client's run is over.
func (r *run) writeGuarded(c *client) bool {
	r.mu.Lock()
	g, skip := c.guard, c.unguarded
	r.mu.Unlock()
	if skip {
		return true // the guard's read failed: no write
	}
	gs, _ := r.slot.store.(Guarded) // execute refused a store without one
	next, ok, err := gs.WriteGuarded(c.ctx, c.handle, g)
	r.mu.Lock()
	defer r.mu.Unlock()
	if c.crashed || errors.Is(err, errStopped) {
		return false
	}
	w := Write{Client: c.id, Fence: g.Version, Seq: c.seq, Accepted: ok && err == nil, Stale: r.lastWriter > c.seq}
	if c.lastEvent >= 0 {
		w.Step = r.hist.Events[c.lastEvent].Step
	}
	switch {
	case err != nil:
		r.noteLocked(c, "write failed: %v", err)
	case ok:
		c.guard = next
		r.lastWriter = max(r.lastWriter, c.seq)
		r.noteLocked(c, "wrote (%s)", g.Show)
	default:
		r.noteLocked(c, "write refused (%s no longer holds)", g.Show)
	}
	if err == nil {
		r.hist.Writes = append(r.hist.Writes, w)
	}
	return true
}
