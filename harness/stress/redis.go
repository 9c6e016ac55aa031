// Redis's servers as stress mode fails them over: a Sentinel group and a
// Redis Cluster, which the caller starts (stores/redis/redisnode's) and
// hands over through Options.Sentinels and Options.RedisCluster, adapted
// by Sentinels and Cluster. Stress mode imports no store's package.

package stress

import (
	"context"
	"time"
)

// RedisNode is a data node of a Sentinel group or a Redis Cluster.
type RedisNode interface {
	Name() string
	// Addr is what clients dial.
	Addr() string
	// Do runs one command on the node as its default user.
	Do(ctx context.Context, cmd string, args ...any) (any, error)
	// Role is the node's ROLE: "master" or "slave".
	Role(ctx context.Context) (string, error)
}

// SentinelGroup is a Redis Sentinel group a run locks on: a master, its
// replicas and the Sentinels that watch them.
type SentinelGroup interface {
	// MasterName is the name the Sentinels know the master by.
	MasterName() string
	// Addrs are the Sentinels' addresses.
	Addrs() []string
	// Nodes are the data nodes, the master and its replicas.
	Nodes() []RedisNode
	// Master is the node the Sentinels name the master.
	Master(ctx context.Context) (RedisNode, error)
	// WaitFailover waits until the Sentinels name a master other than
	// from, and returns it.
	WaitFailover(ctx context.Context, from RedisNode) (RedisNode, error)
}

// RedisCluster is a Redis Cluster a run locks on: masters, each with a
// replica.
type RedisCluster interface {
	// Addrs are the nodes' addresses, as clients dial them.
	Addrs() []string
	// Nodes are every node of the cluster.
	Nodes() []RedisNode
	// NodeTimeout is the cluster's cluster-node-timeout.
	NodeTimeout() time.Duration
	// Masters are the masters and, by master, its replicas.
	Masters(ctx context.Context) ([]RedisNode, map[RedisNode][]RedisNode, error)
	// KeySlot is the hash slot of key.
	KeySlot(ctx context.Context, key string) (int, error)
	// MasterOf is the master that serves key's slot.
	MasterOf(ctx context.Context, key string) (RedisNode, error)
	// WaitReady waits until the cluster serves every slot.
	WaitReady(ctx context.Context) error
	// Kill kills node n; Restart starts it again with its nodes.conf.
	Kill(ctx context.Context, n RedisNode) error
	Restart(ctx context.Context, n RedisNode) error
	// WaitPromoted waits until one of candidates is a master, and
	// returns it.
	WaitPromoted(ctx context.Context, candidates []RedisNode) (RedisNode, error)
	// WaitRejoined waits until n, restarted, is a replica again.
	WaitRejoined(ctx context.Context, n RedisNode) error
}

// node is the type of the nodes of a group or a cluster of the caller's:
// a *redisnode.Node.
type node interface {
	comparable
	RedisNode
}

// sentinelsOf is a Sentinel group whose nodes are of type N.
type sentinelsOf[N node] interface {
	MasterName() string
	Addrs() []string
	Nodes() []N
	Master(ctx context.Context) (N, error)
	WaitFailover(ctx context.Context, from N) (N, error)
}

// Sentinels adapts a Sentinel group whose nodes are of type N to a
// SentinelGroup: Sentinels[*redisnode.Node](g).
func Sentinels[N node, G sentinelsOf[N]](g G) SentinelGroup { return sentinels[N, G]{g} }

type sentinels[N node, G sentinelsOf[N]] struct{ g G }

func (s sentinels[N, G]) MasterName() string { return s.g.MasterName() }
func (s sentinels[N, G]) Addrs() []string    { return s.g.Addrs() }
func (s sentinels[N, G]) Nodes() []RedisNode { return redisNodes(s.g.Nodes()) }
func (s sentinels[N, G]) Master(ctx context.Context) (RedisNode, error) {
	return redisNode(s.g.Master(ctx))
}
func (s sentinels[N, G]) WaitFailover(ctx context.Context, from RedisNode) (RedisNode, error) {
	return redisNode(s.g.WaitFailover(ctx, from.(N)))
}

// clusterOf is a Redis Cluster whose nodes are of type N.
type clusterOf[N node] interface {
	Addrs() []string
	Nodes() []N
	NodeTimeout() time.Duration
	Masters(ctx context.Context) ([]N, map[N][]N, error)
	KeySlot(ctx context.Context, key string) (int, error)
	MasterOf(ctx context.Context, key string) (N, error)
	WaitReady(ctx context.Context) error
	Kill(ctx context.Context, n N) error
	Restart(ctx context.Context, n N) error
	WaitPromoted(ctx context.Context, candidates []N) (N, error)
	WaitRejoined(ctx context.Context, n N) error
}

// Cluster adapts a Redis Cluster whose nodes are of type N to a
// RedisCluster: Cluster[*redisnode.Node](g).
func Cluster[N node, G clusterOf[N]](g G) RedisCluster { return cluster[N, G]{g} }

type cluster[N node, G clusterOf[N]] struct{ g G }

func (c cluster[N, G]) Addrs() []string            { return c.g.Addrs() }
func (c cluster[N, G]) Nodes() []RedisNode         { return redisNodes(c.g.Nodes()) }
func (c cluster[N, G]) NodeTimeout() time.Duration { return c.g.NodeTimeout() }
func (c cluster[N, G]) Masters(ctx context.Context) ([]RedisNode, map[RedisNode][]RedisNode, error) {
	masters, replicas, err := c.g.Masters(ctx)
	if err != nil {
		return nil, nil, err
	}
	out := make(map[RedisNode][]RedisNode, len(replicas))
	for m, rs := range replicas {
		out[m] = redisNodes(rs)
	}
	return redisNodes(masters), out, nil
}
func (c cluster[N, G]) KeySlot(ctx context.Context, key string) (int, error) {
	return c.g.KeySlot(ctx, key)
}
func (c cluster[N, G]) MasterOf(ctx context.Context, key string) (RedisNode, error) {
	return redisNode(c.g.MasterOf(ctx, key))
}
func (c cluster[N, G]) WaitReady(ctx context.Context) error { return c.g.WaitReady(ctx) }
func (c cluster[N, G]) Kill(ctx context.Context, n RedisNode) error {
	return c.g.Kill(ctx, n.(N))
}
func (c cluster[N, G]) Restart(ctx context.Context, n RedisNode) error {
	return c.g.Restart(ctx, n.(N))
}
func (c cluster[N, G]) WaitPromoted(ctx context.Context, candidates []RedisNode) (RedisNode, error) {
	ns := make([]N, len(candidates))
	for i, n := range candidates {
		ns[i] = n.(N)
	}
	return redisNode(c.g.WaitPromoted(ctx, ns))
}
func (c cluster[N, G]) WaitRejoined(ctx context.Context, n RedisNode) error {
	return c.g.WaitRejoined(ctx, n.(N))
}

// redisNodes is ns as RedisNodes.
func redisNodes[N node](ns []N) []RedisNode {
	out := make([]RedisNode, len(ns))
	for i, n := range ns {
		out[i] = n
	}
	return out
}

// redisNode is n as a RedisNode, nil with err.
func redisNode[N node](n N, err error) (RedisNode, error) {
	if err != nil {
		return nil, err
	}
	return n, nil
}
