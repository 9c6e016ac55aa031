// etcd-mutex's wait and keepalive. concurrency.Mutex's Lock waits on a
// watch, a stream, not on a request: after its Get of the last key created
// before its own (waitDeletes) finds one, the client watches that key
// until it is deleted. The store says so to the scheduler
// (harness.Client.Wait), which runs the other clients meanwhile, and says
// when the delete is on its way (Wake), before the step that deletes the
// key ends: a delete, a Txn that deletes, a revoke of the key's lease, or
// a time step that runs the lease out. No step then runs between the
// delete and the waiter's next request, whatever the machine's speed.
//
// The session's keepalive is a stream too, on the machine's clock: the
// store keeps it on the run's clock instead. A time step renews the
// leases of every etcd-mutex client whose process runs and reaches the
// cluster, holder or waiter, and lets those of the silent ones (paused,
// asleep, crashed, cut off) run out, as the keepalive that renews every
// third of the TTL would.

package etcd

import (
	"context"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/harness"
	"github.com/locklab/locklab/strategies/etcdlock"
)

// mutexLock builds etcd-mutex's column: Mutex.Lock as its users call it,
// waiting in the queue until it holds the lock or fails. etcd-mutex's own
// Acquire gives up after a patience on the wall clock, which Mutex.Lock's
// users do not have, and which would make a run depend on the machine's
// speed.
func mutexLock(cfg locklab.Config) (locklab.Locker, error) {
	l, err := etcdlock.NewMutexFromConfig(cfg)
	if err != nil {
		return nil, err
	}
	return waitingMutex{l}, nil
}

// waitingMutex is etcd-mutex whose Acquire is its Lock.
type waitingMutex struct{ *etcdlock.MutexLock }

func (l waitingMutex) Acquire(ctx context.Context, key string, ttl time.Duration) (locklab.Lease, error) {
	return l.Lock(ctx, key, ttl)
}

// sessionLock is a lock whose session's keepalive renews its lease while
// its process runs: etcd-mutex's column.
type sessionLock interface{ keepsSessionAlive() }

func (waitingMutex) keepsSessionAlive() {}

// keepsAlive reports whether c runs a sessionLock.
func keepsAlive(c *harness.Client) bool {
	_, ok := c.Locker().(sessionLock)
	return ok
}

// predecessor is the key waitDeletes' Get found, which the client now
// watches: a Range of the lock's prefix for the last key created before
// the client's own (MaxCreateRevision, sorted by create revision
// descending, limit 1) whose answer has one. "" for any other request.
func predecessor(req, reply any) string {
	r, ok := req.(*pb.RangeRequest)
	if !ok || r.MaxCreateRevision == 0 || r.SortTarget != pb.RangeRequest_CREATE || r.SortOrder != pb.RangeRequest_DESCEND {
		return ""
	}
	resp, ok := reply.(*pb.RangeResponse)
	if !ok || len(resp.Kvs) == 0 {
		return ""
	}
	return string(resp.Kvs[0].Key)
}

// watch makes client c, whose gate is g, wait for the delete of key.
func (g *etcdGate) watch(c *harness.Client, key string) {
	g.mu.Lock()
	g.watching = key
	g.mu.Unlock()
	g.s.mu.Lock()
	what := g.s.namesLocked().key([]byte(key))
	g.s.mu.Unlock()
	c.Wait("the delete of " + what + " (a watch)")
}

// wakeTimeout bounds wakeDeleted's read of a watched key: a cluster that
// cannot answer (no leader) leaves the waiter to wake itself, its watch's
// event then coming with its next request.
const wakeTimeout = 10 * time.Second

// wakeDeleted wakes the clients whose watched key is gone: it reads each
// one on the cluster, outside the schedule, after a step that may have
// deleted it.
func (s *etcdStore) wakeDeleted(ctx context.Context) {
	s.mu.Lock()
	clients := s.clients
	s.mu.Unlock()
	for _, ec := range clients {
		ec.gate.mu.Lock()
		key, c := ec.gate.watching, ec.gate.c
		ec.gate.mu.Unlock()
		if key == "" || c == nil {
			continue
		}
		gctx, cancel := context.WithTimeout(ctx, wakeTimeout)
		resp, err := s.admin.Get(gctx, key, clientv3.WithCountOnly())
		cancel()
		if err != nil || resp.Count > 0 {
			continue
		}
		ec.gate.mu.Lock()
		ec.gate.watching = ""
		ec.gate.mu.Unlock()
		c.Wake()
	}
}

// keptAlive returns the clients of the run whose session's keepalive runs
// now: etcd-mutex's, neither crashed nor paused nor asleep nor cut off.
func (s *etcdStore) keptAlive() map[int]bool {
	s.mu.Lock()
	clients := s.clients
	s.mu.Unlock()
	alive := map[int]bool{}
	for _, ec := range clients {
		c := ec.gate.bound()
		if c != nil && keepsAlive(c) && !c.Silent() {
			alive[c.ID()] = true
		}
	}
	return alive
}
