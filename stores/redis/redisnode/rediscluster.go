// A Redis Cluster: masters that share the hash slots, each with its
// replicas, which take over a master the others find failing.

package redisnode

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/locklab/locklab/harness/fault"

	"github.com/locklab/locklab/internal/tooling/backends"
	"github.com/locklab/locklab/internal/tooling/rcluster"
	"github.com/locklab/locklab/lockkit"
)

// RedisClusterOptions configure StartRedisCluster. The zero value starts
// three masters with one replica each and a cluster-node-timeout of 1s.
type RedisClusterOptions struct {
	// Masters is how many masters share the 16384 hash slots. Default 3,
	// the fewest with which the masters left after one failed are a
	// majority and can elect its replica.
	Masters int
	// Replicas is how many replicas each master has. Default 1.
	Replicas int
	// NodeTimeout is cluster-node-timeout: how long a node may fail to
	// answer before the others flag it failing and, for a master, its
	// replica is elected in its place. Default 1s.
	NodeTimeout time.Duration
	// ReadyTimeout bounds the wait, at start, until the cluster is formed
	// and ready. Default 60s.
	ReadyTimeout time.Duration
}

func (o *RedisClusterOptions) defaults() error {
	if o.Masters == 0 {
		o.Masters = 3
	}
	if o.Replicas == 0 {
		o.Replicas = 1
	}
	if o.NodeTimeout == 0 {
		o.NodeTimeout = time.Second
	}
	if o.ReadyTimeout <= 0 {
		o.ReadyTimeout = time.Minute
	}
	if o.Masters < 1 || o.Replicas < 0 {
		return lockkit.Invalid("node: a Redis Cluster needs at least 1 master and 0 or more replicas each, got %d and %d",
			o.Masters, o.Replicas)
	}
	if o.NodeTimeout < 10*time.Millisecond {
		return lockkit.Invalid("node: Redis Cluster NodeTimeout %v: want at least 10ms", o.NodeTimeout)
	}
	return nil
}

// RedisCluster is a Redis Cluster (redis-server --cluster-enabled yes)
// started by StartRedisCluster: its masters share the hash slots in even
// ranges, each with its replicas. Who is master now is the cluster's
// business after a failover: ask MasterOf or Masters. Close removes its
// nodes; the Cluster's Close (and SIGINT or SIGTERM) removes them too.
type RedisCluster struct {
	c    *Cluster
	opts RedisClusterOptions
	rc   *rcluster.Cluster
	// nodes are in start order, masters first, as rc.Members.
	nodes []*Node
}

// StartRedisCluster starts a Redis Cluster on the cluster's backend:
// opts.Masters masters ("rc1m1", ... for the cluster's first one) and
// opts.Replicas replicas of each ("rc1m1r1", ...), each announcing the
// address clients dial (on the process backend its proxy's, on the docker
// backend its container's), so that a cluster client on this host follows
// CLUSTER SLOTS and MOVED to it. It assigns the slots, attaches the
// replicas and waits until every node says cluster_state:ok, agrees on the
// roles, and every replica's link is up. The nodes are not among Nodes or
// Replicas. Not supported on the addrs backend.
func (c *Cluster) StartRedisCluster(ctx context.Context, opts RedisClusterOptions) (*RedisCluster, error) {
	if err := opts.defaults(); err != nil {
		return nil, err
	}
	if c.be.name() == backends.Addrs {
		return nil, fmt.Errorf("%w: cannot start a Redis Cluster: the addrs backend talks to servers it does not control; "+
			"use the docker or process backend", fault.ErrUnsupported)
	}
	n := opts.Masters * (1 + opts.Replicas)
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, errors.New("node: StartRedisCluster on a closed cluster")
	}
	c.rclusters++
	prefix := "rc" + strconv.Itoa(c.rclusters)
	first := c.nextIdx
	c.nextIdx += n
	c.mu.Unlock()

	g := &RedisCluster{c: c, opts: opts, nodes: make([]*Node, n),
		rc: &rcluster.Cluster{Masters: opts.Masters, Replicas: opts.Replicas, Members: make([]*rcluster.Member, n)}}
	ok := false
	defer func() {
		if !ok {
			g.Close()
		}
	}()
	ctx, cancel := context.WithTimeout(ctx, opts.ReadyTimeout)
	defer cancel()
	p := persistence{appendOnly: c.opts.AppendOnly, fsync: c.opts.AppendFsync}
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		name := prefix + "m" + strconv.Itoa(i+1)
		if i >= opts.Masters {
			r := i - opts.Masters
			name = prefix + "m" + strconv.Itoa(r/opts.Replicas+1) + "r" + strconv.Itoa(r%opts.Replicas+1)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			var bus int
			launch := func(ctx context.Context) (server, error) {
				srv, b, err := c.be.startClusterNode(ctx, first+i, name, p, opts.NodeTimeout)
				bus = b
				return srv, err
			}
			_, errs[i] = c.startNode(ctx, first+i, name, p, launch, func(nd *Node) {
				g.nodes[i] = nd
				g.rc.Members[i] = &rcluster.Member{Addr: nd.srv.peerAddr(), Bus: bus}
				c.grouped = append(c.grouped, nd)
			})
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if err := g.rc.Form(ctx); err != nil {
		return nil, err
	}
	ok = true
	return g, nil
}

// Nodes returns the nodes in start order: the masters as started, then
// their replicas. Roles change with failovers: ask Masters or MasterOf.
func (g *RedisCluster) Nodes() []*Node {
	g.c.mu.Lock()
	defer g.c.mu.Unlock()
	return slices.Clone(g.nodes)
}

// NodeTimeout is the cluster's cluster-node-timeout.
func (g *RedisCluster) NodeTimeout() time.Duration { return g.opts.NodeTimeout }

// Addrs returns the addresses of the nodes not killed, masters and
// replicas, "host:port": the seed list a cluster client starts from.
func (g *RedisCluster) Addrs() []string {
	var out []string
	for _, m := range g.rc.Live() {
		out = append(out, m.Addr)
	}
	return out
}

func (g *RedisCluster) member(n *Node) *rcluster.Member {
	if i := slices.Index(g.nodes, n); i >= 0 {
		return g.rc.Members[i]
	}
	return nil
}

func (g *RedisCluster) node(m *rcluster.Member) *Node {
	if i := slices.Index(g.rc.Members, m); i >= 0 {
		return g.nodes[i]
	}
	return nil
}

// Masters returns the current masters, in slot order, and the replicas of
// each, as the first node that answers sees them.
func (g *RedisCluster) Masters(ctx context.Context) ([]*Node, map[*Node][]*Node, error) {
	ms, rs, err := g.rc.Roles(ctx)
	if err != nil {
		return nil, nil, err
	}
	var masters []*Node
	replicas := map[*Node][]*Node{}
	for _, m := range ms {
		masters = append(masters, g.node(m))
		for _, r := range rs[m] {
			replicas[g.node(m)] = append(replicas[g.node(m)], g.node(r))
		}
	}
	return masters, replicas, nil
}

// KeySlot returns key's hash slot, as a node computes it (CLUSTER KEYSLOT).
func (g *RedisCluster) KeySlot(ctx context.Context, key string) (int, error) {
	return g.rc.KeySlot(ctx, key)
}

// MasterOf returns the node that serves key's hash slot as master now.
func (g *RedisCluster) MasterOf(ctx context.Context, key string) (*Node, error) {
	slot, err := g.rc.KeySlot(ctx, key)
	if err != nil {
		return nil, err
	}
	m, err := g.rc.MasterOf(ctx, slot)
	if err != nil {
		return nil, err
	}
	return g.node(m), nil
}

// WaitReady waits until the nodes not killed form a healthy cluster again
// (every slot served, the roles agreed, every replica linked and in sync).
func (g *RedisCluster) WaitReady(ctx context.Context) error { return g.rc.WaitReady(ctx) }

// Kill stops node n at once, as a crash would (SIGKILL; docker kill); its
// files stay, nodes.conf among them. The other nodes flag it failing after
// NodeTimeout and, if it was a master, elect one of its replicas.
func (g *RedisCluster) Kill(ctx context.Context, n *Node) error {
	m := g.member(n)
	if m == nil {
		return errors.New("node: Kill: not a node of this Redis Cluster")
	}
	g.rc.SetDead(m, true)
	return n.Kill(ctx)
}

// Restart starts node n again with its files (nodes.conf keeps its
// identity; the data of a node without an append-only file is gone): it
// rejoins the cluster, a replica of whoever took its slots meanwhile. It
// returns once n answers PING; WaitRejoined waits for the rest.
func (g *RedisCluster) Restart(ctx context.Context, n *Node) error {
	m := g.member(n)
	if m == nil {
		return errors.New("node: Restart: not a node of this Redis Cluster")
	}
	if err := n.Restart(ctx, true); err != nil {
		return err
	}
	g.rc.SetDead(m, false)
	return nil
}

// WaitPromoted waits until one of candidates (the replicas of a killed
// master) serves slots as a master, and returns it.
func (g *RedisCluster) WaitPromoted(ctx context.Context, candidates []*Node) (*Node, error) {
	var ms []*rcluster.Member
	for _, n := range candidates {
		if m := g.member(n); m != nil {
			ms = append(ms, m)
		}
	}
	m, err := g.rc.WaitPromoted(ctx, ms)
	if err != nil {
		return nil, fmt.Errorf("node: no replica took over: %w\n%s", err, g.rc.State())
	}
	return g.node(m), nil
}

// WaitRejoined waits until n says it is a replica and the cluster is ready
// again with it (its link up and in sync).
func (g *RedisCluster) WaitRejoined(ctx context.Context, n *Node) error {
	m := g.member(n)
	if m == nil {
		return errors.New("node: WaitRejoined: not a node of this Redis Cluster")
	}
	for {
		if r, err := g.rc.IsReplica(ctx, m); err == nil && r {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("node %s: not a replica: %w", n.name, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
	return g.rc.WaitReady(ctx)
}

// Close removes the cluster's nodes. It is safe to call more than once,
// and the Cluster's Close does it too.
func (g *RedisCluster) Close() error {
	c := g.c
	c.mu.Lock()
	var gone []*Node
	c.grouped = slices.DeleteFunc(c.grouped, func(n *Node) bool {
		if slices.Contains(g.nodes, n) {
			gone = append(gone, n)
			return true
		}
		return false
	})
	c.mu.Unlock()
	return closeNodes(gone)
}
