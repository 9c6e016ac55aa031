// The Redis store: one database on each Redis node (or, on a server the
// harness does not own, a namespace of its own there), the connections a
// client's strategy gets (each command a step: conn.go), emptying it
// between runs, time passing on its keys, and reading the lock key.

package redis

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gomodule/redigo/redis"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/harness"
	"github.com/locklab/locklab/internal/tooling/namespace"
	"github.com/locklab/locklab/internal/tooling/ttlclock"
	"github.com/locklab/locklab/internal/tooling/wrapconn"
	"github.com/locklab/locklab/stores/redis/redisnode"
)

// optionsNode is a node that says how clients reach it beyond its address:
// the user, password, database and TLS of its URL (redisnode.Node).
type optionsNode interface {
	PoolOptions() locklab.PoolOptions
}

// sharedNode is a node on a server the harness does not own (redisnode.Node of
// the addrs backend): a slot with one works in a namespace of its own.
type sharedNode interface {
	Shared() bool
}

func isShared(n harness.Node) bool {
	s, ok := n.(sharedNode)
	return ok && s.Shared()
}

// directNode is a node with a second address that reaches the same server
// past what a partition cuts (redisnode.Node.DirectAddr): on the process
// backend, the server itself rather than its loopback proxy, one hop less
// for every command.
type directNode interface {
	DirectAddr() string
}

// redisStore is one database on each of a slot's Redis nodes.
//
// On servers the harness owns a run starts with FLUSHDB, and time passes
// on every key of its database. A store with a Shared node works in a
// namespace instead (ns): the run's lock key carries the namespace's tag,
// so every key a strategy derives from it does too; the store tracks the
// keys its clients' commands name, deletes those (not the database) before
// each run, moves only their TTLs when time passes, and at close deletes
// every key of the namespace. It uses the database of the node's URL.
type redisStore struct {
	nodes []harness.Node
	db    int
	// direct: dial the nodes' direct addresses (directNode).
	direct bool
	// ns is the store's namespace on shared servers; zero on owned ones.
	ns    namespace.Namespace
	mu    sync.Mutex
	pools []*redis.Pool
	// keys tracks the namespace's keys the clients' commands named.
	keys *namespace.Tracker
}

func newRedisStore(nodes []harness.Node, db int, direct bool) *redisStore {
	s := &redisStore{nodes: nodes, db: db, direct: direct, pools: make([]*redis.Pool, len(nodes))}
	if slices.ContainsFunc(nodes, isShared) {
		s.ns = namespace.New()
		s.keys = namespace.NewTracker(s.ns)
	}
	for i := range nodes {
		s.pools[i] = s.newPool(i)
	}
	return s
}

// Connect gives client c's Config a connection source on each node that
// the run's scheduler sees every command of.
func (s *redisStore) Connect(h *harness.Client, cfg *locklab.Config) error {
	if h.MultiNode() {
		// A node answers when the scheduler says so: no timeout of its own.
		cfg.NodeTimeout = time.Hour
		for i := range s.nodes {
			cfg.Nodes = append(cfg.Nodes, s.source(h, i+1))
		}
		return nil
	}
	cfg.Pool = s.source(h, 1)
	return nil
}

func (s *redisStore) newPool(i int) *redis.Pool {
	o := poolOptions(s.nodes[i])
	if d, ok := s.nodes[i].(directNode); ok && s.direct {
		o.Addr = d.DirectAddr()
	}
	if s.ns.IsZero() {
		o.DB = s.db
	}
	p, err := locklab.NewPoolOptions(o)
	if err != nil {
		// The options were checked when the node was made (ParseAddr).
		panic(fmt.Sprintf("harness: the options of node %s: %v", s.nodes[i].Name(), err))
	}
	return p
}

// poolOptions are how the harness reaches node n: its address, with the
// user, password, database and TLS of its own where it has them, every
// connection named redisnode.ClientName.
func poolOptions(n harness.Node) locklab.PoolOptions {
	o := locklab.PoolOptions{Addr: n.Addr()}
	if on, ok := n.(optionsNode); ok {
		o = on.PoolOptions()
	}
	o.ClientName = redisnode.ClientName
	return o
}

// Key returns the key a run of the slot locks: key itself, or key in the
// slot's namespace.
func (s *redisStore) Key(key string) string { return s.ns.Key(key) }

// note records the namespace's keys that a command's arguments name.
func (s *redisStore) note(args []any, queued [][]any) {
	if s.keys == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.keys.Note(args)
	for _, q := range queued {
		s.keys.Note(q)
	}
}

// tracked returns the namespace's keys seen so far.
func (s *redisStore) tracked() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.keys.Keys())
}

// Advance shortens every TTL of the run's keys on node i (0-based) by d,
// deleting the keys whose TTL runs out: the effect of d passing on the
// server's clock, applied at once. On an owned server that is every key of
// the slot's database (which holds the run's keys only); on a shared one,
// the namespace's keys. It returns the number of keys expired.
func (s *redisStore) Advance(ctx context.Context, i int, d time.Duration) (int, error) {
	c, err := s.pool(i).GetContext(ctx)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	if !s.ns.IsZero() {
		return namespace.Advance(ctx, c, s.ns, s.tracked(), d)
	}
	return ttlclock.AdvanceFew(ctx, c, d)
}

// pool returns the pool of node i (0-based).
func (s *redisStore) pool(i int) *redis.Pool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pools[i]
}

// Crashed does nothing: a Redis lock outlives its client's connections.
func (s *redisStore) Crashed(*harness.Client) {}

// Reconnect replaces node i's pool: after a kill or restart, idle
// connections are dead.
func (s *redisStore) Reconnect(i int) {
	s.mu.Lock()
	old := s.pools[i]
	s.pools[i] = s.newPool(i)
	s.mu.Unlock()
	old.Close()
}

// Close closes the store's pools; in a namespace it first deletes every
// key of the namespace on every node (a SCAN finds them), whatever became
// of the run's context, and of ctx: on a server the user runs, nothing of
// the run may be left.
func (s *redisStore) Close(context.Context) error {
	var err error
	if !s.ns.IsZero() {
		srcs := make([]locklab.ConnSource, len(s.nodes))
		for i := range s.nodes {
			srcs[i] = s.pool(i)
		}
		err = namespace.SweepAll(s.ns, srcs)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range s.pools {
		p.Close()
	}
	return err
}

// Empty empties the store on every node before a run: FLUSHDB of its
// database on an owned server; in a namespace, a DEL of the keys the
// earlier runs' commands named.
func (s *redisStore) Empty(ctx context.Context) error {
	for i := range s.nodes {
		c, err := s.pool(i).GetContext(ctx)
		if err != nil {
			return fmt.Errorf("%s (%s): %w", s.nodes[i].Name(), s.nodes[i].Addr(), err)
		}
		what := "FLUSHDB"
		if s.ns.IsZero() {
			_, err = redis.DoContext(c, ctx, "FLUSHDB")
		} else {
			what = "deleting the keys of " + s.ns.String()
			err = namespace.Delete(ctx, c, s.ns, s.tracked())
		}
		c.Close()
		if err != nil {
			return fmt.Errorf("%s on %s (%s): %w", what, s.nodes[i].Name(), s.nodes[i].Addr(), err)
		}
	}
	return nil
}

// source is the ConnSource client h sees for node (1-based): its
// connections refuse to open once h has crashed, and send each command
// through conn.do.
func (s *redisStore) source(h *harness.Client, node int) locklab.ConnSource {
	return &wrapconn.Source{
		Src: storeSource{s: s, h: h, node: node},
		Open: func(context.Context) (wrapconn.Hooks, error) {
			if h.Crashed() {
				return wrapconn.Hooks{}, harness.ErrCrashed
			}
			k := &conn{h: h, k: h.Conn(), st: s, node: node}
			return wrapconn.Hooks{Do: k.do, Receive: noPush, Close: k.close}, nil
		},
	}
}

// storeSource hands out real connections to a node of the store, from the
// node's current pool (a kill or restart replaces it), for as long as the
// run lasts.
type storeSource struct {
	s    *redisStore
	h    *harness.Client
	node int
}

func (s storeSource) GetContext(context.Context) (redis.Conn, error) {
	return s.s.pool(s.node - 1).GetContext(s.h.Context())
}

// probeScript reads a lock key whatever its type: a string's value, or the
// fields of a hash (a re-entrant lock: its holder's id).
var probeScript = redis.NewScript(1, `
if redis.call('type', KEYS[1])['ok'] == 'hash' then
  return table.concat(redis.call('hkeys', KEYS[1]), ',')
end
return redis.call('get', KEYS[1])`)

// Probe reads key on node i (0-based) outside the schedule.
func (s *redisStore) Probe(ctx context.Context, i int, key string) (any, error) {
	c, err := s.pool(i).GetContext(ctx)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	return probeScript.Do(c, key)
}

// ServerVersion returns the "redis_version" n reports, or "" when it
// cannot be read.
func ServerVersion(ctx context.Context, n harness.Node) string {
	p, err := locklab.NewPoolOptions(poolOptions(n))
	if err != nil {
		return ""
	}
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
	for _, line := range strings.Split(strings.ReplaceAll(s, "\r", ""), "\n") {
		if v, ok := strings.CutPrefix(line, "redis_version:"); ok {
			return v
		}
	}
	return ""
}

var _ harness.Renewer = (*redisStore)(nil)

// Unscheduled gives cfg the first node's pool: the store's own
// connections, which the scheduler does not see.
func (s *redisStore) Unscheduled(cfg *locklab.Config) { cfg.Pool = s.pool(0) }

// Renewed does nothing: the key's TTL on the server is the account.
func (s *redisStore) Renewed(locklab.Lease) {}
