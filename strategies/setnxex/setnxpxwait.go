package setnxex

import (
	"context"
	"fmt"
	"time"

	"github.com/gomodule/redigo/redis"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/internal/rcmd"
	"github.com/locklab/locklab/internal/single"
	"github.com/locklab/locklab/lockkit"
)

// SetNXPXWait is the "set-nx-px-wait" strategy: set-nx-px's acquire, then
// WAIT 1 for a replica to acknowledge the key. When no replica acknowledges
// within the WAIT timeout, the acquire deletes what it set (compare-and-
// delete) and fails with ErrUnavailable: a lock only its master knows is
// one a failover would lose. Release is set-nx-px's compare-and-delete.
//
// WAIT narrows failover's hole without closing it: the lock survives a
// failover to the replica that acknowledged it, not one to a replica that
// did not (with several replicas, WAIT 1 names none in particular), nor a
// restart of the master without persistence, and a key that reached a
// replica can still expire there on the replica's own clock. Replication
// stays asynchronous; WAIT only reports how far it got.
type SetNXPXWait struct {
	base single.Base
}

// NewSetNXPXWait builds a SetNXPXWait from cfg. The server cfg.Pool reaches
// must be a master with at least one replica, or every acquire fails.
func NewSetNXPXWait(cfg locklab.Config) (*SetNXPXWait, error) {
	return single.Build(cfg, "set-nx-px-wait", func(b single.Base) *SetNXPXWait { return &SetNXPXWait{base: b} })
}

// WaitTimeout is how long an acquire of a ttl lock waits for a replica's
// acknowledgement: a tenth of the ttl, at least 50ms, at most 1s, and never
// more than half the ttl.
func WaitTimeout(ttl time.Duration) time.Duration {
	return min(max(ttl/10, 50*time.Millisecond), time.Second, ttl/2)
}

// Acquire runs set-nx-px's acquire script, then WAIT 1 <timeout>: two
// commands on one connection. WAIT waits for the writes of its own
// connection: a connection of a client adapter that sends each command on
// any of its connections (and on a Redis Cluster, keyless ones to any
// node) is stuck to one connection to the key's master first, when it can
// be (its Stick method).
func (l *SetNXPXWait) Acquire(ctx context.Context, key string, ttl time.Duration) (locklab.Lease, error) {
	return acquire(ctx, &l.base, key, ttl, func(c redis.Conn, lease locklab.Lease) error {
		wait := WaitTimeout(ttl)
		n, err := rcmd.Do(ctx, c, "WAIT", 1, single.Millis(wait))
		if acked, _ := n.(int64); err == nil && acked >= 1 {
			return nil
		}
		if err == nil {
			err = lockkit.Unavailable(fmt.Errorf("set-nx-px-wait: no replica acknowledged the lock %q within %v", key, wait))
		}
		// Take back what only the master knows. The WAIT's failure is the
		// answer whatever this does; a lock left behind expires at its TTL.
		releaseScript.Do(ctx, c, key, lease.Token)
		return err
	})
}

// Release runs the compare-and-delete script: one command.
func (l *SetNXPXWait) Release(ctx context.Context, lease locklab.Lease) error {
	c, err := l.base.BeginRelease(ctx, lease)
	if err != nil {
		return err
	}
	defer c.Close()
	v, err := releaseScript.Do(ctx, c, lease.Key, lease.Token)
	return single.DelReleased(lease.Key, v, err)
}

// LeaseClock is the Clock Lease.Until is read from (Config.Clock), on
// which locklab.Watch judges expiry.
func (l *SetNXPXWait) LeaseClock() locklab.Clock { return l.base.Clock }
