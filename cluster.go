package locklab

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gomodule/redigo/redis"
	"github.com/mna/redisc"

	"github.com/locklab/locklab/internal/adapt"
	"github.com/locklab/locklab/internal/lockerr"
)

// ClusterOptions describe a Redis Cluster for NewClusterPool.
type ClusterOptions struct {
	// Addrs are "host:port" addresses of some of the cluster's nodes, the
	// seeds the slot map is first read from (CLUSTER SLOTS). Required.
	Addrs []string
	// Node says how to reach every node: user, password, TLS, timeouts
	// and each node's pool size. Its Addr is not read; its DB must be 0,
	// the only database of a Redis Cluster.
	Node PoolOptions
}

// ClusterRefreshEvery bounds how often a ClusterPool reads the slot map
// again after a node failed to answer.
const ClusterRefreshEvery = 100 * time.Millisecond

// ClusterPool is a ConnSource on a Redis Cluster, for the strategies whose
// commands and scripts touch keys of one hash slot (strategies.Description
// NoCluster says which cannot). It is built on redisc
// (github.com/mna/redisc), a Redis Cluster client for redigo: the
// strategies keep speaking redigo's redis.Conn, every node gets a redigo
// pool of its own, and locklab's core module keeps redigo as its only
// Redis client, where go-redis's or rueidis's cluster clients would bring a
// second one into every program that imports locklab (those clients are
// for the adapters modules, adapters/goredis and adapters/rueidis).
//
// A connection is bound to the master of the slot of its first command's
// key (the key of an EVAL or EVALSHA, not its script), follows MOVED and
// ASK redirections, and keeps its commands on one server, as WATCH, MULTI
// ... EXEC and WAIT need; a MULTI sent before any key waits for the first
// keyed command to be bound. redisc reads the slot map again on a MOVED;
// ClusterPool reads it again, at most every ClusterRefreshEvery, when a
// node does not answer or the cluster says it is down, so that after a
// failover the clients find the promoted replica without one.
type ClusterPool struct {
	c           *redisc.Cluster
	refreshing  atomic.Bool
	mu          sync.Mutex
	lastRefresh time.Time
}

var (
	_ ConnSource            = (*ClusterPool)(nil)
	_ redis.ConnWithContext = (*clusterConn)(nil)
)

// NewClusterPool returns a ClusterPool on the cluster o describes. It reads
// the slot map from the first seed that answers; with none answering it
// is ErrUnavailable, and bad options are ErrInvalid.
func NewClusterPool(o ClusterOptions) (*ClusterPool, error) {
	if len(o.Addrs) == 0 {
		return nil, lockerr.Invalid("ClusterOptions.Addrs is empty")
	}
	if o.Node.DB != 0 {
		return nil, lockerr.Invalid("ClusterOptions.Node.DB %d: a Redis Cluster has database 0 only", o.Node.DB)
	}
	node := o.Node
	node.Addr = o.Addrs[0]
	node, err := node.withDefaults()
	if err != nil {
		return nil, err
	}
	for _, a := range o.Addrs {
		n := node
		n.Addr = a
		if _, err := n.withDefaults(); err != nil {
			return nil, err
		}
	}
	c := &redisc.Cluster{
		StartupNodes: append([]string(nil), o.Addrs...),
		DialOptions:  node.dialOptions(),
		CreatePool: func(addr string, opts ...redis.DialOption) (*redis.Pool, error) {
			return &redis.Pool{
				MaxIdle:     node.MaxIdle,
				MaxActive:   node.MaxActive,
				Wait:        node.MaxActive > 0,
				IdleTimeout: node.IdleTimeout,
				DialContext: func(ctx context.Context) (redis.Conn, error) {
					return redis.DialContext(ctx, "tcp", addr, opts...)
				},
				TestOnBorrowContext: pingIfIdle,
			}, nil
		},
	}
	if err := c.Refresh(); err != nil {
		c.Close()
		return nil, lockerr.Unavailable(fmt.Errorf("reading the Redis Cluster's slot map from %v: %w", o.Addrs, err))
	}
	return &ClusterPool{c: c}, nil
}

// RedisCluster reports true: the strategies that cannot run on a Redis
// Cluster refuse a ClusterPool (strategies.ClusterSource).
func (p *ClusterPool) RedisCluster() bool { return true }

// GetContext returns a connection not yet bound to a node: its first
// command binds it. It fails only when ctx is done or the pool is closed.
func (p *ClusterPool) GetContext(ctx context.Context) (redis.Conn, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	c := p.c.Get()
	if err := c.Err(); err != nil {
		c.Close()
		return nil, err
	}
	rc, err := redisc.RetryConn(c, 4, 20*time.Millisecond)
	if err != nil {
		c.Close()
		return nil, err
	}
	return &clusterConn{p: p, c: c, rc: rc}, nil
}

// Close closes every node's pool.
func (p *ClusterPool) Close() error { return p.c.Close() }

// refreshSoon reads the slot map again in the background, unless that was
// done within ClusterRefreshEvery or is under way.
func (p *ClusterPool) refreshSoon() {
	p.mu.Lock()
	if time.Since(p.lastRefresh) < ClusterRefreshEvery {
		p.mu.Unlock()
		return
	}
	p.lastRefresh = time.Now()
	p.mu.Unlock()
	if !p.refreshing.CompareAndSwap(false, true) {
		return
	}
	go func() {
		defer p.refreshing.Store(false)
		p.c.Refresh()
	}()
}

// clusterConn is a connection of a ClusterPool: a redisc connection, bound
// at its first keyed command (or Stick) to the master of that key's slot,
// through a RetryConn that follows redirections.
type clusterConn struct {
	p     *ClusterPool
	c     redis.Conn // *redisc.Conn
	rc    redis.Conn // RetryConn over c
	bound bool
	// multi is a MULTI sent before the connection was bound: it is sent
	// once the first keyed command binds it.
	multi bool
}

// Stick binds the connection to the master of key's slot now, if its
// first command has not already bound it: set-nx-px-wait's WAIT then
// follows its script on one server.
func (c *clusterConn) Stick(_ context.Context, key string) error {
	if c.bound {
		return nil
	}
	if _, err := c.check(nil, redisc.BindConn(c.c, key)); err != nil {
		return err
	}
	c.bound = true
	return nil
}

func (c *clusterConn) Do(cmd string, args ...any) (any, error) {
	return c.DoContext(context.Background(), cmd, args...)
}

func (c *clusterConn) DoWithTimeout(_ time.Duration, cmd string, args ...any) (any, error) {
	return c.Do(cmd, args...)
}

// DoContext sends one command. ctx is checked before it is sent; the
// command itself is bounded by the read and write timeouts of
// ClusterOptions.Node (redisc's connections take no context).
func (c *clusterConn) DoContext(ctx context.Context, cmd string, args ...any) (any, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	name := strings.ToUpper(cmd)
	if !c.bound {
		if from, to := adapt.KeyRange(name, args); to > from {
			if _, err := c.check(nil, redisc.BindConn(c.c, adapt.String(args[from]))); err != nil {
				return nil, err
			}
			c.bound = true
		} else if name == "MULTI" {
			c.multi = true
			return "OK", nil
		}
	}
	if c.multi {
		c.multi = false
		if _, err := c.check(c.rc.Do("MULTI")); err != nil {
			return nil, err
		}
	}
	v, err := c.check(c.rc.Do(cmd, args...))
	if cmd != "" {
		c.bound = true
	}
	return v, err
}

// check has the slot map read again when a node did not answer or the
// cluster says it is down.
func (c *clusterConn) check(v any, err error) (any, error) {
	var re redis.Error
	switch {
	case err == nil:
	case !errors.As(err, &re):
		c.p.refreshSoon()
	case strings.HasPrefix(string(re), "CLUSTERDOWN"):
		c.p.refreshSoon()
	}
	return v, err
}

func (c *clusterConn) Send(cmd string, args ...any) error { return c.c.Send(cmd, args...) }
func (c *clusterConn) Flush() error                       { return c.c.Flush() }
func (c *clusterConn) Receive() (any, error)              { return c.check(c.c.Receive()) }

func (c *clusterConn) ReceiveContext(ctx context.Context) (any, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return c.Receive()
}
func (c *clusterConn) Err() error   { return c.c.Err() }
func (c *clusterConn) Close() error { return c.c.Close() }
