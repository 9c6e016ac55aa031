// Nodes: the Redis servers a run uses (anything with a name and an
// address; the faults a node supports are node's interfaces), and the slot
// of one database on each node that one run executes in.

package harness

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/gomodule/redigo/redis"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/internal/ttlclock"
)

// Node is a Redis server the harness runs schedules on. The harness talks to
// it through its own connections to Addr (one database per parallel worker),
// so a Node needs only a name and an address. The nodes of harness/node
// satisfy it, and so does PoolNode. Schedules and scenarios that fault a node
// need it to implement node's fault interfaces (node.Pauser, node.Killer,
// node.Restarter, node.Partitioner, node.FailingOver).
type Node interface {
	Name() string
	Addr() string
}

// AddrNode is a Node given by name and address.
type AddrNode struct {
	NodeName, NodeAddr string
}

// Name returns the node's name.
func (n AddrNode) Name() string { return n.NodeName }

// Addr returns the node's "host:port".
func (n AddrNode) Addr() string { return n.NodeAddr }

// advanceTTLs shortens every TTL in the database src connects to by d,
// deleting the keys whose TTL runs out: the effect of d passing on the
// server's clock, applied at once. It returns the number of keys expired.
func advanceTTLs(ctx context.Context, src locklab.ConnSource, d time.Duration) (int, error) {
	c, err := src.GetContext(ctx)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	return ttlclock.AdvanceFew(ctx, c, d) // a run's database holds its lock's keys only
}

// expireTTLs makes every key with a TTL in src's database expire now.
func expireTTLs(ctx context.Context, src locklab.ConnSource) (int, error) {
	return advanceTTLs(ctx, src, ttlclock.All)
}

// flushDB empties the database src connects to.
func flushDB(ctx context.Context, src locklab.ConnSource) error {
	c, err := src.GetContext(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	_, err = redis.DoContext(c, ctx, "FLUSHDB")
	return err
}

// slot is a set of nodes and one database on each: where one run executes.
// Parallel workers use separate databases of the same servers.
type slot struct {
	nodes []Node
	db    int
	// direct: dial the nodes' direct addresses (directNode), for runs
	// that partition no node.
	direct bool
	// appendFsync is the fsync policy of the append-only file the slot's
	// nodes write for as long as the slot lasts ("": none, or each run
	// switches its own on and off).
	appendFsync string
	mu          sync.Mutex
	pools       []*redis.Pool
}

// directNode is a node with a second address that reaches the same server
// past what a partition cuts (node.Node.DirectAddr): on the process
// backend, the server itself rather than its loopback proxy, one hop less
// for every command.
type directNode interface {
	DirectAddr() string
}

// newSlot makes the slot of database db on nodes. steps are the steps its
// runs may take beyond the clients' own (a schedule, a fault alphabet):
// when none of them partitions a node, the slot dials the nodes' direct
// addresses. The other faults reach a client the same way on both (a
// killed, paused or failed-over server is the same server), and a run
// refuses the commands to a node it took down before they are sent.
func newSlot(nodes []Node, db int, steps ...[]Step) *slot {
	s := &slot{nodes: nodes, db: db, direct: true, pools: make([]*redis.Pool, len(nodes))}
	for _, sts := range steps {
		if slices.ContainsFunc(sts, func(st Step) bool { return st.Kind == StepPartition || st.Kind == StepHeal }) {
			s.direct = false
		}
	}
	for i := range nodes {
		s.pools[i] = s.newPool(i)
	}
	return s
}

func (s *slot) newPool(i int) *redis.Pool {
	addr := s.nodes[i].Addr()
	if d, ok := s.nodes[i].(directNode); ok && s.direct {
		addr = d.DirectAddr()
	}
	return locklab.NewPool(addr, redis.DialDatabase(s.db))
}

// pool returns the pool of node i (0-based).
func (s *slot) pool(i int) *redis.Pool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pools[i]
}

// reset replaces node i's pool: after a kill or restart, idle connections
// are dead.
func (s *slot) reset(i int) {
	s.mu.Lock()
	old := s.pools[i]
	s.pools[i] = s.newPool(i)
	s.mu.Unlock()
	old.Close()
}

func (s *slot) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range s.pools {
		p.Close()
	}
}

// appendOnly switches the append-only file of every node of the slot that
// can write one on (with the fsync policy fsync) or off.
func (s *slot) appendOnly(ctx context.Context, on bool, fsync string) error {
	for _, n := range s.nodes {
		a, ok := n.(appendOnly)
		if !ok {
			continue
		}
		if err := a.SetAppendOnly(ctx, on, fsync); err != nil {
			return err
		}
	}
	return nil
}

// keepAppendOnly switches the append-only file of the slot's nodes on for
// every run in it, until the returned function switches it off: a run then
// leaves it on. Switching it on costs a rewrite of the file on every node
// (a fork that the server notices on its next cron tick, up to 100ms), so
// that an exploration pays it once, not on every schedule. A run's restart
// that keeps the data then replays the earlier runs' commands too, their
// FLUSHDB included: it finds the data the run left, as with a file of its
// own. It is for slots whose nodes no other run uses meanwhile: the cells
// that fault nodes have them to themselves.
func (s *slot) keepAppendOnly(ctx context.Context, fsync string) (func() error, error) {
	if err := s.appendOnly(ctx, true, fsync); err != nil {
		return nil, err
	}
	s.appendFsync = fsync
	return func() error {
		s.appendFsync = ""
		return s.appendOnly(context.WithoutCancel(ctx), false, fsync)
	}, nil
}

// flush empties the slot's database on every node.
func (s *slot) flush(ctx context.Context) error {
	for i := range s.nodes {
		if err := flushDB(ctx, s.pool(i)); err != nil {
			return fmt.Errorf("FLUSHDB on %s (%s): %w", s.nodes[i].Name(), s.nodes[i].Addr(), err)
		}
	}
	return nil
}

// ServerVersion returns the "redis_version" n reports, or "" when it
// cannot be read.
func ServerVersion(ctx context.Context, n Node) string {
	p := locklab.NewPool(n.Addr())
	defer p.Close()
	c, err := p.GetContext(ctx)
	if err != nil {
		return ""
	}
	defer c.Close()
	s, err := redis.String(redis.DoContext(c, ctx, "INFO", "server"))
	if err != nil {
		return ""
	}
	for _, line := range splitLines(s) {
		if v, ok := cutPrefix(line, "redis_version:"); ok {
			return v
		}
	}
	return ""
}
