// The cluster's history between runs. etcd keeps every revision of every
// key until a compaction, deleted keys included: the lock's keys are new
// in every run (their names are the runs' lease IDs), and a range over
// the lock's prefix (the Txn of every acquire, a waiter's Get, the
// store's reads) walks the index entries of every key the earlier runs
// put there, on every member. Left alone, each schedule costs the cluster
// more than the one before. The stores compact the cluster now and then,
// between runs, up to a revision that no run under way reads behind.

package etcd

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// compactEvery is how many revisions the cluster's history grows by
// before a store compacts it: a run moves the revision by a handful, so
// the compaction, a write every member applies and a walk of its whole
// index, comes once in a few hundred runs, and the index a range walks
// stays small. Compacting every 100 revisions cost more than it saved.
const compactEvery = 1000

// compactor is the compaction of one cluster, which the stores of the
// workers and cells that run on it share.
type compactor struct {
	mu sync.Mutex
	// floors is, for each store with a run under way or about to start,
	// the cluster's revision before the run's first request: the run's
	// requests, and the watches etcd-mutex's waiters open from a
	// revision they read (concurrency.Mutex's waitDeletes), read at that
	// revision or later.
	floors map[*etcdStore]int64
	// compacted is the revision the cluster is compacted to, or is being
	// compacted to.
	compacted int64
	// off: a run killed or restarted a member (stopped), and the cluster
	// is compacted no more. A member that starts again resumes the
	// compaction it had under way, and the timing of a schedule around a
	// restart is to be the same as before the stores compacted; the cells
	// that do so run few schedules, on a cluster of their own.
	off bool
}

// stop compacts the cluster no more.
func (c *compactor) stop() {
	c.mu.Lock()
	c.off = true
	c.mu.Unlock()
}

// hold keeps the cluster's history from being compacted beyond where it
// is now until settle gives s's next floor: the revision settle is given
// is read after hold returns.
func (c *compactor) hold(s *etcdStore) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.floors == nil {
		c.floors = map[*etcdStore]int64{}
	}
	c.floors[s] = c.compacted
}

// settle records rev, the cluster's revision after s emptied it, as the
// floor of s's next run, and compacts the history up to the lowest floor
// of the cluster's stores once it has grown by compactEvery revisions
// since the last compaction.
func (c *compactor) settle(ctx context.Context, s *etcdStore, admin *clientv3.Client, rev int64) error {
	c.mu.Lock()
	c.floors[s] = rev
	low := rev
	for _, f := range c.floors {
		low = min(low, f)
	}
	due := !c.off && low-c.compacted >= compactEvery
	if due {
		c.compacted = low
	}
	c.mu.Unlock()
	if !due {
		return nil
	}
	// Another store's compaction, to a later revision, may have gone
	// through first.
	if _, err := admin.Compact(ctx, low); err != nil && !errors.Is(err, rpctypes.ErrCompacted) {
		return fmt.Errorf("compacting etcd (%s) to revision %d: %w", s.node.Name(), low, err)
	}
	return nil
}

// drop forgets s, whose runs are over.
func (c *compactor) drop(s *etcdStore) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.floors, s)
}
