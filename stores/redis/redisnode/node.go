// A node: one redis-server of a cluster, the commands the harness runs on it,
// the faults it injects into it, and the pooled connections that a fault
// makes stale.

package redisnode

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/locklab/locklab/harness/fault"

	"github.com/gomodule/redigo/redis"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/internal/tooling/ttlclock"
)

// StoreName is the name of the store the nodes serve, as the harness's
// registry knows it.
const StoreName = "redis"

// ClientName is the name (CLIENT SETNAME) of every connection the harness
// opens to a node, its clients' included, as the server's CLIENT LIST
// shows it: a connection to the node named otherwise, or not at all, is
// someone else's (see the stores/redis package's connection audit).
const ClientName = "locklab"

// Node is one redis-server of a Cluster.
type Node struct {
	name    string
	idx     int
	cluster *Cluster
	srv     server
	pool    *redis.Pool
	// opts are the user, password, database and TLS clients use; their
	// Addr is not read (srv.addr() is).
	opts locklab.PoolOptions
	// gen counts the faults that cut connections (kill, restart,
	// partition, heal): a pooled connection from an earlier generation is
	// dropped on borrow instead of failing its first command.
	gen atomic.Uint64

	mu      sync.Mutex
	persist persistence
}

// Name returns the node's name: "n1".."nN", or "n1r1" for a replica.
func (n *Node) Name() string { return n.name }

// Store names the store the node serves, StoreName.
func (n *Node) Store() string { return StoreName }

// Addr returns the address clients dial, "host:port". It does not change
// over the node's life (restarts, partitions).
func (n *Node) Addr() string { return n.srv.addr() }

// DirectAddr returns an address that reaches the server past what
// Partition cuts: on the process backend the redis-server's own port, not
// its proxy's; elsewhere Addr. A client that dials it is not cut off by a
// partition, and is spared the proxy's hop (two more loopback transfers per
// command). Like Addr, it does not change over the node's life.
func (n *Node) DirectAddr() string {
	if d, ok := n.srv.(interface{ directAddr() string }); ok {
		return d.directAddr()
	}
	return n.Addr()
}

// Password returns the password clients must send, or "" for none.
func (n *Node) Password() string { return n.opts.Password }

// URL returns the node's address as a redis:// (rediss:// with TLS) URL,
// with the user, password and database clients need: what ParseAddr reads
// back, for clients in other processes.
func (n *Node) URL() string {
	o := n.opts
	o.Addr = n.srv.addr()
	return o.URL()
}

// PoolOptions returns what a client needs to reach the node: its address
// (Addr), and the user, password, database, TLS and timeouts of its URL.
func (n *Node) PoolOptions() locklab.PoolOptions {
	o := n.opts
	o.Addr = n.srv.addr()
	return o
}

// Shared reports whether the node is a server the harness does not own
// (the addrs backend): it may hold data of others, so a run there writes
// only keys of a namespace of its own, deletes only those, and changes
// no setting.
func (n *Node) Shared() bool {
	_, given := n.srv.(*addrServer)
	return given
}

// Pool returns the node's connection pool. It satisfies locklab.ConnSource.
// Connections have 2s connect, read and write timeouts.
func (n *Node) Pool() *redis.Pool { return n.pool }

// Dial opens a new connection to the node, with the user, password,
// database and TLS of its address if any, and 2s connect, read and write
// timeouts (or those its URL sets); ctx bounds the dial.
func (n *Node) Dial(ctx context.Context) (redis.Conn, error) { return n.dial(ctx) }

// dialWaiting is Dial without the read and write timeouts of
// PoolOptions (2 s by default, a user's pool's): a command on it waits as
// long as its ctx lets it (redis.DoContext). For the harness's own
// commands whose answers a loaded machine may hold back longer than that,
// with a deadline of their own.
func (n *Node) dialWaiting(ctx context.Context) (redis.Conn, error) {
	return n.dial(ctx, redis.DialReadTimeout(0), redis.DialWriteTimeout(0))
}

// dial is Dial with more options, which override the address's.
func (n *Node) dial(ctx context.Context, more ...redis.DialOption) (redis.Conn, error) {
	o := n.opts
	o.Addr = n.srv.addr()
	opts, err := o.DialOptions()
	if err != nil {
		return nil, err
	}
	return redis.DialContext(ctx, "tcp", o.Addr, append(opts, more...)...)
}

// do runs one command on a fresh connection bounded by ctx.
func (n *Node) do(ctx context.Context, cmd string, args ...any) (any, error) {
	return doOn(ctx, n.Dial, cmd, args...)
}

// Do runs one command on a fresh connection (not the pool), bounded by ctx.
func (n *Node) Do(ctx context.Context, cmd string, args ...any) (any, error) {
	return n.named(cmd)(n.do(ctx, cmd, args...))
}

// doWaiting is Do on a dialWaiting connection: bounded by ctx alone.
func (n *Node) doWaiting(ctx context.Context, cmd string, args ...any) (any, error) {
	return n.named(cmd)(doOn(ctx, n.dialWaiting, cmd, args...))
}

// doOn runs one command on a connection dial opens, closed after it.
func doOn(ctx context.Context, dial func(context.Context) (redis.Conn, error), cmd string, args ...any) (any, error) {
	c, err := dial(ctx)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	return redis.DoContext(c, ctx, cmd, args...)
}

// named returns a command's answer with its error, if any, naming the node
// and the command.
func (n *Node) named(cmd string) func(any, error) (any, error) {
	return func(v any, err error) (any, error) {
		if err != nil {
			return nil, fmt.Errorf("node %s: %s: %w", n.name, cmd, err)
		}
		return v, nil
	}
}

// Flush deletes every key of every database (FLUSHALL). A Shared node
// refuses: its keys are not the harness's.
func (n *Node) Flush(ctx context.Context) error {
	if n.Shared() {
		return unsupported("flush", n.name)
	}
	_, err := n.Do(ctx, "FLUSHALL")
	return err
}

// ExpireAll makes time pass on the node: every key of database 0 that has a
// TTL is removed now, as if its TTL had elapsed; keys without a TTL stay. It
// only sends commands (SCAN and a Lua script), so it works on every backend.
// Run it on masters: a replica refuses writes. A Shared node refuses: the
// TTLs of its keys are not the harness's to move.
func (n *Node) ExpireAll(ctx context.Context) error {
	if n.Shared() {
		return unsupported("expire the keys of", n.name)
	}
	c, err := n.Dial(ctx)
	if err != nil {
		return fmt.Errorf("node %s: ExpireAll: %w", n.name, err)
	}
	defer c.Close()
	if _, err := ttlclock.Advance(ctx, c, ttlclock.All); err != nil {
		return fmt.Errorf("node %s: ExpireAll: %w", n.name, err)
	}
	return nil
}

// SetAppendOnly switches the node's append-only file on or off now (CONFIG
// SET, waiting for the initial rewrite) with the fsync policy fsync
// ("always", "everysec", "no"; "" keeps "everysec"), and keeps the setting
// for later restarts.
func (n *Node) SetAppendOnly(ctx context.Context, on bool, fsync string) error {
	switch fsync {
	case "":
		fsync = "everysec"
	case "always", "everysec", "no":
	default:
		return fmt.Errorf("node %s: appendfsync %q: want always, everysec or no", n.name, fsync)
	}
	if n.Shared() {
		return unsupported("switch the append-only file of", n.name)
	}
	c, err := n.Dial(ctx)
	if err != nil {
		return fmt.Errorf("node %s: SetAppendOnly: %w", n.name, err)
	}
	defer c.Close()
	yes := "no"
	if on {
		yes = "yes"
	}
	if _, err := redis.DoContext(c, ctx, "CONFIG", "SET", "appendfsync", fsync, "appendonly", yes); err != nil {
		return fmt.Errorf("node %s: CONFIG SET appendonly %s: %w", n.name, yes, err)
	}
	if on {
		if err := waitAOF(ctx, c); err != nil {
			return fmt.Errorf("node %s: %w", n.name, err)
		}
	}
	p := persistence{appendOnly: on, fsync: fsync}
	if err := n.srv.persist(ctx, c, p); err != nil {
		return fmt.Errorf("node %s: %w", n.name, err)
	}
	n.mu.Lock()
	n.persist = p
	n.mu.Unlock()
	return nil
}

// waitAOF waits until a freshly enabled append-only file is in place.
func waitAOF(ctx context.Context, c redis.Conn) error {
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		info, err := redis.String(redis.DoContext(c, ctx, "INFO", "persistence"))
		if err != nil {
			return err
		}
		f := infoFields(info)
		if f["aof_enabled"] == "1" && f["aof_rewrite_in_progress"] == "0" && f["aof_rewrite_scheduled"] == "0" {
			return nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	return errors.New("append-only file not ready within 10s")
}

// Pause freezes the server (docker pause or SIGSTOP): connections stay open
// but nothing answers until Resume.
func (n *Node) Pause(ctx context.Context) error { return n.fault(ctx, "pause", n.srv.pause) }

// Resume thaws a paused server.
func (n *Node) Resume(ctx context.Context) error { return n.fault(ctx, "resume", n.srv.resume) }

// Kill stops the server at once (SIGKILL), without letting it save. Restart
// brings it back.
func (n *Node) Kill(ctx context.Context) error { return n.fault(ctx, "kill", n.srv.kill) }

// Restart kills the server if it runs and starts it again at the same
// address, waiting for PING. With keepData the server finds the files it
// wrote (so an append-only file brings its keys back; without append-only
// nothing was written and the node comes back empty); without keepData its
// files are wiped first, as if the machine had been replaced.
func (n *Node) Restart(ctx context.Context, keepData bool) error {
	return n.fault(ctx, "restart", func(ctx context.Context) error { return n.srv.restart(ctx, keepData) })
}

// CanFault reports whether the node's backend carries out the faults a
// Node has methods for (a failover needs a Replicated): the process and
// docker backends do, the addrs backend does not.
func (n *Node) CanFault(fault.Fault) bool { return !n.Shared() }

var (
	_ fault.Pauser      = (*Node)(nil)
	_ fault.Killer      = (*Node)(nil)
	_ fault.Restarter   = (*Node)(nil)
	_ fault.Partitioner = (*Node)(nil)
)

// Partition cuts the node off from the clients and from the other nodes:
// open connections and new ones get no answer (they time out) until Heal.
// Docker takes the container's network interface down (or, where the image
// has no ip command, disconnects the container from the cluster's network);
// the process backend blackholes the node's loopback proxy.
func (n *Node) Partition(ctx context.Context) error {
	return n.fault(ctx, "partition", n.srv.partition)
}

// Heal ends a partition: new connections reach the server again. On the
// process backend the connections held during the partition are closed; on
// docker, connections from before it may resume or fail with a timeout, as
// after a real network outage.
func (n *Node) Heal(ctx context.Context) error { return n.fault(ctx, "heal", n.srv.heal) }

// LogTail returns the last lines of the server's log.
func (n *Node) LogTail(lines int) string { return n.srv.logTail(lines) }

func (n *Node) fault(ctx context.Context, op string, f func(context.Context) error) error {
	err := f(ctx)
	if op != "pause" && op != "resume" {
		n.gen.Add(1) // the pool's connections from before are gone
	}
	if err != nil {
		if errors.Is(err, fault.ErrUnsupported) {
			return err
		}
		return fmt.Errorf("node %s: %s: %w", n.name, op, err)
	}
	return nil
}

func (n *Node) redisVersion(ctx context.Context) string {
	info, err := redis.String(n.do(ctx, "INFO", "server"))
	if err != nil {
		return "unknown"
	}
	if v := infoFields(info)["redis_version"]; v != "" {
		return v
	}
	return "unknown"
}

// infoFields parses an INFO reply into name/value pairs.
func infoFields(info string) map[string]string {
	m := make(map[string]string)
	for _, line := range strings.Split(info, "\n") {
		line = strings.TrimSpace(line)
		if k, v, ok := strings.Cut(line, ":"); ok && !strings.HasPrefix(line, "#") {
			m[k] = v
		}
	}
	return m
}

var errStaleConn = errors.New("connection from before a node fault")

// genConn is a pooled connection and the fault generation it was dialled
// in. It keeps the context and timeout methods of the connection redigo
// dialled, which the pool's callers use.
type genConn struct {
	redis.Conn
	gen uint64
}

func (c *genConn) DoContext(ctx context.Context, cmd string, args ...any) (any, error) {
	return redis.DoContext(c.Conn, ctx, cmd, args...)
}

func (c *genConn) ReceiveContext(ctx context.Context) (any, error) {
	return redis.ReceiveContext(c.Conn, ctx)
}

func (c *genConn) DoWithTimeout(d time.Duration, cmd string, args ...any) (any, error) {
	return redis.DoWithTimeout(c.Conn, d, cmd, args...)
}

func (c *genConn) ReceiveWithTimeout(d time.Duration) (any, error) {
	return redis.ReceiveWithTimeout(c.Conn, d)
}
