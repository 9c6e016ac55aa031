package redisproc

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/locklab/locklab/internal/tooling/rcluster"
)

// Slots is the number of hash slots of a Redis Cluster.
const Slots = rcluster.Slots

// ClusterOptions configure a Redis Cluster of redis-server processes.
type ClusterOptions struct {
	// Masters is how many masters share the hash slots. Default 3.
	Masters int
	// Replicas is how many replicas each master has: 0 means the default,
	// 1; -1 means none.
	Replicas int
	// NodeTimeout is cluster-node-timeout: how long a node may not answer
	// before the others count it as failing and its replica takes over.
	// Default rcluster.DefaultNodeTimeout (2s), long enough that a loaded
	// machine does not fail nodes over by itself.
	NodeTimeout time.Duration
	// Args are extra "--name value" arguments of every node.
	Args []string
	// Timeout bounds the whole start: processes, handshake, slot
	// assignment, replication. Default 60s.
	Timeout time.Duration
}

func (o ClusterOptions) withDefaults() ClusterOptions {
	if o.Masters <= 0 {
		o.Masters = 3
	}
	switch {
	case o.Replicas == 0:
		o.Replicas = 1
	case o.Replicas < 0:
		o.Replicas = 0
	}
	if o.NodeTimeout <= 0 {
		o.NodeTimeout = rcluster.DefaultNodeTimeout
	}
	if o.Timeout <= 0 {
		o.Timeout = time.Minute
	}
	return o
}

// ClusterNode is one redis-server of a Cluster.
type ClusterNode struct {
	*Server
	// ID is the node's cluster id (CLUSTER MYID); it keeps it across a
	// Restart (nodes.conf lives in its directory).
	ID string
	m  *rcluster.Member
}

// Cluster is a Redis Cluster of redis-server processes on loopback ports
// (--cluster-enabled yes), each in a temporary directory of its own: the
// masters share the 16384 hash slots in even ranges, each with its
// replicas. Close stops every process and removes the directories. What
// forms and watches the cluster is internal/tooling/rcluster's, shared with the
// harness's clusters.
type Cluster struct {
	// Nodes are the servers in start order: the masters first, then the
	// replicas (the replicas of master i are Nodes[Masters+i*Replicas:]...).
	// Roles change after a failover; Roles tells the current ones.
	Nodes []*ClusterNode
	rc    *rcluster.Cluster
}

// StartCluster starts a Redis Cluster and returns when it is ready: every
// node knows every other, every slot is served (CLUSTER INFO says
// cluster_state:ok on every node), and every replica is in sync with its
// master, which acknowledges writes to WAIT. A cluster that does not get
// there within opts.Timeout is an error, with what the nodes said.
func StartCluster(opts ClusterOptions) (*Cluster, error) {
	opts = opts.withDefaults()
	ctx, cancel := context.WithTimeout(context.Background(), opts.Timeout)
	defer cancel()
	n := opts.Masters * (1 + opts.Replicas)
	c := &Cluster{Nodes: make([]*ClusterNode, n)}
	c.rc = &rcluster.Cluster{Masters: opts.Masters, Replicas: opts.Replicas, Members: make([]*rcluster.Member, n)}
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := Start(Options{Args: append(rcluster.Args(opts.NodeTimeout), opts.Args...), ClusterBus: true})
			if err != nil {
				errs[i] = fmt.Errorf("cluster node %d: %w", i+1, err)
				return
			}
			m := &rcluster.Member{Addr: s.Addr, Bus: s.BusPort}
			c.Nodes[i] = &ClusterNode{Server: s, m: m}
			c.rc.Members[i] = m
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		c.Close()
		return nil, err
	}
	if err := c.rc.Form(ctx); err != nil {
		c.Close()
		return nil, err
	}
	for _, nd := range c.Nodes {
		nd.ID = nd.m.ID
	}
	return c, nil
}

// of returns the node of member m, or nil.
func (c *Cluster) of(m *rcluster.Member) *ClusterNode {
	for _, nd := range c.Nodes {
		if nd != nil && nd.m == m {
			return nd
		}
	}
	return nil
}

// info reads one section of INFO (or CLUSTER INFO, for section
// "cluster-info") on nd as fields.
func (c *Cluster) info(ctx context.Context, nd *ClusterNode, section string) (map[string]string, error) {
	return c.rc.Info(ctx, nd.m, section)
}

// do sends one command to nd on a connection of its own, bounded by ctx.
func (c *Cluster) do(ctx context.Context, nd *ClusterNode, cmd string, args ...any) (any, error) {
	return c.rc.Do(ctx, nd.m, cmd, args...)
}

// WaitReady waits until the live nodes form a healthy cluster: each says
// cluster_state:ok with every slot served and agrees on who is master of
// whom; each replica's link to its master is up and synced, and each master
// counts its replicas online (so WAIT counts them). Killed nodes are left
// out; a cluster missing a master with no replica to replace it never gets
// ready.
func (c *Cluster) WaitReady(ctx context.Context) error { return c.rc.WaitReady(ctx) }

// Addrs are the addresses of the live nodes, masters and replicas: the
// seed list a cluster client starts from.
func (c *Cluster) Addrs() []string {
	var out []string
	for _, m := range c.rc.Live() {
		out = append(out, m.Addr)
	}
	return out
}

// Roles tells the current masters, in slot order, and the replicas of
// each, as the first live node that answers sees them.
func (c *Cluster) Roles(ctx context.Context) (masters []*ClusterNode, replicas map[*ClusterNode][]*ClusterNode, err error) {
	ms, rs, err := c.rc.Roles(ctx)
	if err != nil {
		return nil, nil, err
	}
	replicas = map[*ClusterNode][]*ClusterNode{}
	for _, m := range ms {
		masters = append(masters, c.of(m))
		for _, r := range rs[m] {
			replicas[c.of(m)] = append(replicas[c.of(m)], c.of(r))
		}
	}
	return masters, replicas, nil
}

// MasterOf returns the live node that serves slot as master.
func (c *Cluster) MasterOf(ctx context.Context, slot int) (*ClusterNode, error) {
	m, err := c.rc.MasterOf(ctx, slot)
	if err != nil {
		return nil, err
	}
	return c.of(m), nil
}

// KeySlot asks a live node for key's hash slot (CLUSTER KEYSLOT).
func (c *Cluster) KeySlot(ctx context.Context, key string) (int, error) {
	return c.rc.KeySlot(ctx, key)
}

// FlushAll deletes every key on every master (FLUSHALL): a cluster shared
// by several tests starts each one empty.
func (c *Cluster) FlushAll(ctx context.Context) error { return c.rc.FlushAll(ctx) }

// Kill stops nd at once (SIGKILL), as a crash would; its directory and
// nodes.conf stay, so that nd.Restart brings it back into the cluster. The
// other nodes notice after NodeTimeout.
func (c *Cluster) Kill(nd *ClusterNode) {
	nd.Kill()
	c.rc.SetDead(nd.m, true)
}

// Restart starts a killed node again with its own nodes.conf: it rejoins
// the cluster, as a replica of whoever took its slots meanwhile. It
// returns once the node answers PING; WaitReady waits for the cluster.
func (c *Cluster) Restart(nd *ClusterNode) error {
	if err := nd.Restart(); err != nil {
		return err
	}
	c.rc.SetDead(nd.m, false)
	return nil
}

// KillMaster kills the master nd and waits until one of its replicas has
// been promoted by the cluster's own failover (after NodeTimeout, the
// replicas' election) and the live nodes are ready again; it returns the
// promoted replica. It fails, with nd killed all the same, when nd is not
// a master with a replica or no replica takes over before ctx ends.
func (c *Cluster) KillMaster(ctx context.Context, nd *ClusterNode) (*ClusterNode, error) {
	_, replicas, err := c.rc.Roles(ctx)
	if err != nil {
		return nil, err
	}
	candidates := replicas[nd.m]
	if len(candidates) == 0 {
		return nil, fmt.Errorf("%s is not a master with a replica", nd.Addr)
	}
	c.Kill(nd)
	promoted, err := c.rc.WaitPromoted(ctx, candidates)
	if err != nil {
		return nil, err
	}
	if err := c.WaitReady(ctx); err != nil {
		return nil, err
	}
	return c.of(promoted), nil
}

// Close stops every node and removes their directories.
func (c *Cluster) Close() {
	for _, nd := range c.Nodes {
		if nd != nil {
			nd.Stop()
		}
	}
}
