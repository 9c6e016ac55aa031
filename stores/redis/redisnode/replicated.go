// A replicated node: a master and one asynchronous replica seen as a single
// node, whose Failover promotes the replica that missed the last writes.

package redisnode

import (
	"context"
	"net"
	"sync"
	"time"

	"github.com/locklab/locklab/harness/fault"
)

// Replicated is a master with one asynchronous replica, seen by clients as a
// single node, as clients of a Redis behind Sentinel see it. Prepare gets it
// ready for a run: master and replica hold the same empty data and the
// replica's link is cut, so every write from then on is one it will miss.
// Failover promotes the replica and demotes the master; from then on Addr
// is the new master's, and the old master is the replica of the next run.
//
// CatchUp and Lag let the replica receive what it missed when a client's
// WAIT asks for it, and cut it off again after.
//
// It implements the faults of a Node on whichever server is the master.
type Replicated struct {
	c    *Cluster
	name string

	mu              sync.Mutex
	master, replica *Node
	// up: the replica's link is up (CatchUp), not cut.
	up bool
}

var (
	_ fault.Pauser      = (*Replicated)(nil)
	_ fault.Killer      = (*Replicated)(nil)
	_ fault.Restarter   = (*Replicated)(nil)
	_ fault.Partitioner = (*Replicated)(nil)
	_ fault.FailingOver = (*Replicated)(nil)
)

// Replicated adds a replica to master, waits until it has synced over the
// replication link, and returns the pair as one node, named like master.
// Not supported on the addrs backend.
func (c *Cluster) Replicated(ctx context.Context, master *Node) (*Replicated, error) {
	r, err := c.AddReplica(ctx, master)
	if err != nil {
		return nil, err
	}
	return &Replicated{c: c, name: master.Name(), master: master, replica: r}, nil
}

func (r *Replicated) current() *Node {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.master
}

// Members returns the pair's two servers, the current master first.
func (r *Replicated) Members() []*Node {
	r.mu.Lock()
	defer r.mu.Unlock()
	return []*Node{r.master, r.replica}
}

// Name is the name of the master the pair was made from.
func (r *Replicated) Name() string { return r.name }

// Store names the store the pair serves, StoreName.
func (r *Replicated) Store() string { return StoreName }

// Addr is the current master's address.
func (r *Replicated) Addr() string { return r.current().Addr() }

// DirectAddr is the current master's direct address (Node.DirectAddr).
func (r *Replicated) DirectAddr() string { return r.current().DirectAddr() }

// Prepare makes master and replica hold the same empty data set with the
// replica's link cut, as if it had been in sync until now and stopped
// receiving: every write from here on is one it misses. The replica is
// emptied with replica-read-only briefly off, so that no resync is needed on
// every run; Replicated made it a true replica, synced over the replication
// link, once.
func (r *Replicated) Prepare(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.up = false
	if _, err := r.master.Do(ctx, "FLUSHALL"); err != nil {
		return err
	}
	if err := r.replica.StopReplication(ctx); err != nil {
		return err
	}
	for _, cmd := range [][]any{
		{"CONFIG", "SET", "replica-read-only", "no"},
		{"FLUSHALL"},
		{"CONFIG", "SET", "replica-read-only", "yes"},
	} {
		if _, err := r.replica.Do(ctx, cmd[0].(string), cmd[1:]...); err != nil {
			return err
		}
	}
	return nil
}

// Failover promotes the replica, which lacks every write since Prepare, and
// takes the master out of service the way a Sentinel failover does: demoted
// to a replica of nobody, read-only, no longer the address clients dial.
// (Cluster.Failover kills the master instead; a demotion keeps runs fast,
// since nothing has to be restarted before the next one.)
func (r *Replicated) Failover(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.replica.Promote(ctx); err != nil {
		return err
	}
	if err := r.master.StopReplication(ctx); err != nil {
		return err
	}
	r.master, r.replica = r.replica, r.master
	r.up = false
	return nil
}

// catchUpTimeout bounds CatchUp: a full resync on loopback takes well
// under a second on an idle machine; the bound is for a server that never
// syncs, not for a slow one.
const catchUpTimeout = time.Minute

// CatchUp connects the replica to the current master, if its link is
// cut, and waits until it has applied everything the master has; the link
// then stays up until Lag, Prepare or Failover cuts it: a WAIT sent to the
// master meanwhile counts the replica.
func (r *Replicated) CatchUp(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.up {
		return nil
	}
	// A full resync (the first after a failover: the new master cannot
	// continue the old one's stream) goes through a file on disk. A
	// diskless one streams the snapshot, then waits for the replica's
	// first acknowledgement before it streams the commands that follow;
	// the replica sends it as soon as it has loaded the snapshot, but the
	// master takes it only once its cron has seen the snapshot's child
	// end, and otherwise waits for the next one, a second later. The
	// master deletes the file once sent (it has no persistence of its own
	// to find it at a restart). Its cron runs every 10ms (hz 100), not
	// 100ms, and notices the snapshot's child end that much sooner; it
	// changes nothing else a run sees (keys expire on the harness's clock).
	ctx, cancel := context.WithTimeout(ctx, catchUpTimeout)
	defer cancel()
	if _, err := r.master.doWaiting(ctx, "CONFIG", "SET", "repl-diskless-sync", "no", "repl-diskless-sync-delay", "0",
		"rdb-del-sync-files", "yes", "hz", "100"); err != nil {
		return err
	}
	host, port, _ := net.SplitHostPort(r.master.srv.peerAddr())
	if _, err := r.replica.doWaiting(ctx, "REPLICAOF", host, port); err != nil {
		return err
	}
	// A partial resync on loopback takes a few milliseconds: poll often.
	if err := r.replica.waitSynced(ctx, r.master, catchUpTimeout, time.Millisecond); err != nil {
		return err
	}
	r.up = true
	return nil
}

// Lag cuts the replica's link again: the writes that follow are ones it
// misses.
func (r *Replicated) Lag(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.up {
		return nil
	}
	r.up = false
	return r.replica.StopReplication(ctx)
}

// Pause pauses the current master.
func (r *Replicated) Pause(ctx context.Context) error { return r.current().Pause(ctx) }

// Resume resumes the current master.
func (r *Replicated) Resume(ctx context.Context) error { return r.current().Resume(ctx) }

// Kill kills the current master.
func (r *Replicated) Kill(ctx context.Context) error { return r.current().Kill(ctx) }

// Restart restarts the current master. The replica's link broke with it:
// the replica lags until the next CatchUp, which resyncs it from the
// restarted master (emptying it, when the master came back empty).
func (r *Replicated) Restart(ctx context.Context, keepData bool) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.master.Restart(ctx, keepData); err != nil {
		return err
	}
	r.up = false
	return r.replica.StopReplication(ctx)
}

// Partition cuts the current master off.
func (r *Replicated) Partition(ctx context.Context) error { return r.current().Partition(ctx) }

// Heal reconnects the current master.
func (r *Replicated) Heal(ctx context.Context) error { return r.current().Heal(ctx) }

// ExpireAll makes time pass on the current master.
func (r *Replicated) ExpireAll(ctx context.Context) error { return r.current().ExpireAll(ctx) }
