// The etcd store: the etcd family's lock (strategies/etcdlock) on a real
// etcd cluster. Each client gets an etcd client of its own whose every
// request is a step (a gRPC interceptor submits it to the scheduler).
// Time passes on leases as it does on Redis keys: the store keeps each
// lease's expiry on the run's virtual clock and, when a time step passes
// it, revokes the lease, which is what the leader does when a lease's TTL
// runs out with no keepalive. The leases' own TTL is the harness's 30s,
// which no run lasts.

package etcd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/harness"
)

// etcdStore is one etcd cluster.
//
// A client's etcd client outlives its run: the next run's client of the
// same number takes it over, its gate bound to the new run, so that a
// schedule dials no new connections to the members (three per client).
// What a run's clients hold lives on the server (leases, keys), which
// empty clears; after a fault struck a member every client is closed
// (reconnect), and the next runs dial afresh.
type etcdStore struct {
	node  *Node
	admin *clientv3.Client

	mu sync.Mutex
	// clients are the current run's; spare the earlier runs', by client
	// number; restarted: a member was killed or restarted in the run.
	clients   []*etcdClient
	spare     map[int]*etcdClient
	restarted bool
	// now is the store's virtual clock: the time passed by advance.
	now time.Duration
	// leases are the expiries, on now's clock, of the leases granted;
	// names how timelines name them (L1, L2, ... in the order granted in
	// the run: their IDs differ from one cluster to the next).
	leases map[clientv3.LeaseID]time.Duration
	// leaseTTL are the leases' TTLs as granted: a renewal moves a lease's
	// expiry to that far from now (renew.go).
	leaseTTL map[clientv3.LeaseID]time.Duration
	// revoked are the leases the run's clients revoked: empty need not
	// revoke them again (a revoke is a write the cluster agrees on).
	revoked map[clientv3.LeaseID]bool
	names   map[int64]string
	// book is what the run's requests did with its leases, for their
	// declarations (touch.go).
	book *leaseBook
	// lockKey is the key the runs lock (key).
	lockKey string
	// resources are the keys of the guarded writes' resources (guarded.go),
	// which close deletes: one per key the runs locked, however many runs
	// prepared it.
	resources map[string]bool
}

func newStore(n *Node) (*etcdStore, error) {
	admin, err := n.Cluster.Client()
	if err != nil {
		return nil, err
	}
	return &etcdStore{node: n, admin: admin, spare: map[int]*etcdClient{}, leases: map[clientv3.LeaseID]time.Duration{},
		leaseTTL: map[clientv3.LeaseID]time.Duration{}, revoked: map[clientv3.LeaseID]bool{}, names: map[int64]string{}, book: newLeaseBook()}, nil
}

// etcdClient is a client's etcd client and the gate its requests pass.
type etcdClient struct {
	id   int
	cli  *clientv3.Client
	gate *etcdGate
}

// Connect gives client c an etcd client of its own, whose requests are
// its steps: the one an earlier run's client of the same number left, or
// a new one.
func (s *etcdStore) Connect(c *harness.Client, cfg *locklab.Config) error {
	s.mu.Lock()
	ec := s.spare[c.ID()]
	delete(s.spare, c.ID())
	s.mu.Unlock()
	if ec == nil {
		g := &etcdGate{s: s}
		cc := s.node.Cluster.ClientConfig()
		cc.DialOptions = append(cc.DialOptions, grpc.WithChainUnaryInterceptor(g.unary))
		cli, err := clientv3.New(cc)
		if err != nil {
			return err
		}
		ec = &etcdClient{id: c.ID(), cli: cli, gate: g}
	}
	ec.gate.bind(c)
	s.mu.Lock()
	s.clients = append(s.clients, ec)
	s.mu.Unlock()
	cfg.Store = ec.cli
	return nil
}

// Key notes the key the runs lock: what empty deletes, so that cells
// locking other keys can run beside the store's.
func (s *etcdStore) Key(key string) string {
	s.mu.Lock()
	s.lockKey = key
	s.mu.Unlock()
	return key
}

// Empty unbinds the earlier run's clients from it and keeps them for the
// next run (closes them after a fault struck a member), revokes their
// leases (all at once) and deletes the keys left under the runs' lock's
// prefix; now and then it compacts the cluster's history (compact.go).
func (s *etcdStore) Empty(ctx context.Context) error {
	if err := s.node.Recover(ctx); err != nil {
		return fmt.Errorf("restarting the member a failover killed on %s: %w", s.node.Name(), err)
	}
	s.mu.Lock()
	clients := s.clients
	var leases []clientv3.LeaseID
	for id := range s.leases {
		if !s.revoked[id] {
			leases = append(leases, id)
		}
	}
	clear(s.revoked)
	restarted := s.restarted
	s.clients, s.leases, s.now, s.restarted = nil, map[clientv3.LeaseID]time.Duration{}, 0, false
	s.leaseTTL = map[clientv3.LeaseID]time.Duration{}
	clear(s.names)
	s.book = newLeaseBook()
	s.mu.Unlock()
	for _, ec := range clients {
		c := ec.gate.bound()
		if cl, ok := c.Locker().(io.Closer); ok {
			cl.Close() // any keepalive it runs ends with its run
		}
		ec.gate.bind(nil)
		s.mu.Lock()
		old := s.spare[ec.id]
		keep := !restarted && old == nil
		if keep {
			s.spare[ec.id] = ec
		}
		s.mu.Unlock()
		if !keep {
			ec.cli.Close()
		}
	}
	var wg sync.WaitGroup
	for _, id := range leases {
		wg.Go(func() {
			s.admin.Revoke(ctx, id) // gone already, or gone now
		})
	}
	wg.Wait()
	s.mu.Lock()
	key := s.lockKey
	s.mu.Unlock()
	// The keys are the leases' (revoking a lease deletes its keys): a
	// read, which the cluster answers without writing its log, finds
	// most runs' prefix empty already, and only a prefix with keys left
	// costs a delete, which every member writes.
	prefix := etcdPrefix(key) + "/"
	s.node.history.hold(s)
	left, err := s.admin.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err == nil && left.Count > 0 {
		_, err = s.admin.Delete(ctx, prefix, clientv3.WithPrefix())
	}
	if err != nil {
		return fmt.Errorf("emptying etcd (%s): %w", s.node.Name(), err)
	}
	// The next run reads from the read's revision on.
	return s.node.history.settle(ctx, s, s.admin, left.Header.Revision)
}

// Advance moves the store's clock by d and revokes the leases whose TTL
// it passes. It returns how many it revoked.
func (s *etcdStore) Advance(ctx context.Context, _ int, d time.Duration) (int, error) {
	alive := s.keptAlive()
	s.mu.Lock()
	s.now += d
	var due []clientv3.LeaseID
	for id, exp := range s.leases {
		if owner, ok := s.book.owner[int64(id)]; ok && alive[owner] && !s.revoked[id] {
			// etcd-mutex's session: its keepalive renewed it all along.
			s.leases[id] = s.now + s.leaseTTL[id]
			continue
		}
		if exp <= s.now {
			due = append(due, id)
			delete(s.leases, id)
			delete(s.book.keys, int64(id)) // the revoke below deletes them
		}
	}
	s.mu.Unlock()
	slices.Sort(due)
	for _, id := range due {
		if _, err := s.admin.Revoke(ctx, id); err != nil && !strings.Contains(err.Error(), "requested lease not found") {
			return 0, fmt.Errorf("expiring lease %x on %s: %w", int64(id), s.node.Name(), err)
		}
	}
	if len(due) > 0 {
		s.wakeDeleted(ctx)
	}
	return len(due), nil
}

// Crashed does nothing: a lease lives its TTL whether its client lives or
// not (etcd-lease's session renews nothing without Config.Watchdog, and
// etcd-mutex's keepalive stops with its silent process: Advance).
func (s *etcdStore) Crashed(*harness.Client) {}

// Probe returns the key that holds the lock on key: the lowest create
// revision under the lock's prefix, which is the holder's Lease.Token.
func (s *etcdStore) Probe(ctx context.Context, _ int, key string) (any, error) {
	resp, err := s.admin.Get(ctx, etcdPrefix(key)+"/", clientv3.WithPrefix(),
		clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend), clientv3.WithLimit(1))
	if err != nil {
		return nil, err
	}
	if len(resp.Kvs) == 0 {
		return nil, nil
	}
	return string(resp.Kvs[0].Key), nil
}

// etcdPrefix is etcdlock.Prefix: the lock's prefix for key.
func etcdPrefix(key string) string {
	return strings.NewReplacer("%", "%25", "/", "%2F").Replace(key)
}

// Reconnect closes the spare clients once a fault struck a member, and
// has empty close the run's: the next runs dial the members afresh, as
// they did before the store kept clients. The cluster is compacted no
// more (compact.go).
func (s *etcdStore) Reconnect(int) {
	s.node.history.stop()
	s.mu.Lock()
	s.restarted = true
	s.mu.Unlock()
	s.closeSpare()
}

// closeSpare closes the clients the earlier runs left for the next.
func (s *etcdStore) closeSpare() {
	s.mu.Lock()
	spare := s.spare
	s.spare = map[int]*etcdClient{}
	s.mu.Unlock()
	for _, ec := range spare {
		ec.cli.Close()
	}
}

// Close empties the cluster and closes the store's clients.
func (s *etcdStore) Close(ctx context.Context) error {
	err := errors.Join(s.Empty(ctx), s.deleteResources(ctx))
	s.node.history.drop(s)
	s.closeSpare()
	s.admin.Close()
	return err
}

var _ harness.Store = (*etcdStore)(nil)

// etcdGate makes each unary request of one client a step: it waits for
// the scheduler's grant, and records the answer in the step's event; a
// lease it grants gets its expiry on the store's clock. Streams (the
// keepalive a session opens and orphans at once) are not steps.
type etcdGate struct {
	s *etcdStore

	mu sync.Mutex
	// c is the client the etcd client serves now; nil between runs.
	c *harness.Client
	// watching is the key c's Mutex.Lock watches for its delete (wait.go),
	// "" when it waits for none.
	watching string
}

// bind makes the gate's requests steps of client c (none when c is nil).
func (g *etcdGate) bind(c *harness.Client) {
	g.mu.Lock()
	g.c, g.watching = c, ""
	g.mu.Unlock()
}

// bound returns the client the gate serves now, nil between runs.
func (g *etcdGate) bound() *harness.Client {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.c
}

func (g *etcdGate) unary(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	g.mu.Lock()
	c := g.c
	g.mu.Unlock()
	if c == nil {
		return harness.ErrStopped // no run: the client's run is over
	}
	name := method[strings.LastIndex(method, "/")+1:]
	g.s.mu.Lock()
	touch := touches(g.s.book, g.s.names, c.ID(), req)
	g.s.mu.Unlock()
	step, err := c.SendTouching(ctx, 1, g.s.request(name, req), nil, touch)
	if err != nil {
		return err
	}
	err = invoker(ctx, method, req, reply, cc, opts...)
	g.s.mu.Lock()
	g.s.book.learn(c.ID(), req, reply, err)
	g.s.mu.Unlock()
	if lg, ok := reply.(interface {
		GetID() int64
		GetTTL() int64
	}); ok && err == nil && name == "LeaseGrant" {
		g.s.mu.Lock()
		g.s.leases[clientv3.LeaseID(lg.GetID())] = g.s.now + time.Duration(lg.GetTTL())*time.Second
		g.s.leaseTTL[clientv3.LeaseID(lg.GetID())] = time.Duration(lg.GetTTL()) * time.Second
		g.s.names[lg.GetID()] = fmt.Sprintf("L%d", len(g.s.names)+1)
		g.s.mu.Unlock()
	}
	if rv, ok := req.(interface{ GetID() int64 }); ok && err == nil && name == "LeaseRevoke" {
		g.s.mu.Lock()
		g.s.revoked[clientv3.LeaseID(rv.GetID())] = true
		g.s.mu.Unlock()
	}
	var v any
	shown := err
	if err == nil {
		v = g.s.reply(reply)
	} else {
		shown = etcdError(err)
	}
	lost := step.LoseReply()
	// The waits (wait.go), before the step ends: a write may have deleted
	// a key a waiter watches; waitDeletes' Get, answered, starts a watch.
	if name != "Range" {
		g.s.wakeDeleted(ctx)
	}
	if key := predecessor(req, reply); key != "" && err == nil && !lost {
		g.watch(c, key)
	}
	if lost {
		// The server did it; the client reads what a connection that
		// drops before the answer gives gRPC.
		step.Done(v, shown)
		return errLostReply
	}
	step.Done(v, shown)
	return err
}

// errLostReply is what a request whose reply a lose step lost returns: the
// error gRPC gives a call whose connection drops before the answer.
var errLostReply = status.Error(codes.Unavailable, "error reading from server: EOF")

// names is how the run's timeline names keys and leases: keys under the
// lock's prefix as P/..., leases by their names. The caller holds s.mu.
func (s *etcdStore) namesLocked() etcdNames {
	n := etcdNames{lease: func(id int64) string { return s.names[id] }}
	if s.lockKey != "" {
		n.prefix = etcdPrefix(s.lockKey) + "/"
	}
	return n
}

// request is how a timeline shows a request of method.
func (s *etcdStore) request(method string, req any) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.namesLocked().request(method, req)
}

// reply is how a timeline shows a response.
func (s *etcdStore) reply(resp any) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.namesLocked().reply(resp)
}
