// Stores: what a run's lock lives on. The run, its scheduler and its
// checkers know clients, steps and nodes; a store knows how a client's
// operations reach its servers (each one submitted to the scheduler, so
// each is a step), how to empty what the earlier runs wrote, how time
// passes on it, and how to read the lock for the timeline. redisStore is
// the store of the Redis strategies.

package harness

import (
	"context"
	"time"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/internal/tooling/ttlclock"
)

// expireAll is a duration past every lock's time: advance by it expires
// every lock that has one.
const expireAll = ttlclock.All

// store is the servers of one kind that a slot's runs lock on.
type store interface {
	// connect gives the Config of run r's client c the store's clients:
	// every operation through them waits for the scheduler's grant.
	connect(r *run, c *client, cfg *locklab.Config)
	// key returns the key a run locks, for key: itself, or key inside
	// the store's namespace.
	key(key string) string
	// empty removes what the earlier runs wrote, before a run.
	empty(ctx context.Context) error
	// advance makes d pass on node i's (0-based) clock: the locks whose
	// time runs out expire. It returns how many did.
	advance(ctx context.Context, i int, d time.Duration) (int, error)
	// probe reads key on node i outside the schedule: nil when it is
	// absent.
	probe(ctx context.Context, i int, key string) (any, error)
	// crashed is told that client c crashed; it returns once the store
	// has seen the crash (a session ended). The run's lock is not held.
	crashed(c *client)
	// reconnect drops node i's idle connections after a fault that cut
	// them.
	reconnect(i int)
	// close releases the store's connections and removes what its runs
	// left; ctx bounds what it asks the servers for that.
	close(ctx context.Context) error
}

var _ store = (*redisStore)(nil)

// storeOf names the store a strategy of family locks on: "" for Redis.
func storeOf(family string) string {
	switch family {
	case StorePostgres, StoreEtcd:
		return family
	}
	return ""
}

// storeName is how messages name a store.
func storeName(store string) string {
	switch store {
	case StorePostgres:
		return "PostgreSQL"
	case StoreEtcd:
		return "etcd"
	}
	return "Redis"
}

// storeNode is a node of a store other than Redis.
type storeNode interface {
	Store() string
}

// nodeStore names the store nodes serve: "" for Redis.
func nodeStore(nodes []Node) string {
	if len(nodes) > 0 {
		if s, ok := nodes[0].(storeNode); ok {
			return s.Store()
		}
	}
	return ""
}

// probeKey reads the run's lock key on node (1-based) outside the
// schedule.
func (r *run) probeKey(node int) (any, error) {
	return r.slot.store.probe(r.ctx, node-1, r.spec.key)
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
}

// watchRelease starts watching c's next command on node (1-based), when c
// is releasing while another client holds the lock; nil otherwise.
func (r *run) watchRelease(c *client, node int) *releaseWatch {
	var victim *client
	r.mu.Lock()
	if c.inRelease {
		for _, o := range r.cls {
			if o != c && o.holding && !o.crashed && !o.inRelease {
				victim = o
			}
		}
	}
	r.mu.Unlock()
	if victim == nil {
		return nil
	}
	before, _ := r.probeKey(node)
	return &releaseWatch{r: r, c: c, victim: victim, node: node, before: before}
}

// judge reads the key after the watched command q and records a wrongful
// release in its event.
func (w *releaseWatch) judge(q *request) {
	if w == nil {
		return
	}
	r := w.r
	after, _ := r.probeKey(w.node)
	r.mu.Lock()
	checkReleaseStep(r.hist, q.event, releaseProbe{client: w.c.id, victim: w.victim.id, node: w.node,
		token: w.victim.lease.Token, victimHolds: w.victim.holding, before: w.before, after: after})
	r.mu.Unlock()
}

// closeEmptyTimeout bounds the emptying of a store's server when a run's
// slot closes: after Ctrl-C the servers may be gone already, and a client
// would retry for ever.
const closeEmptyTimeout = 5 * time.Second
