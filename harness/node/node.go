package node

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gomodule/redigo/redis"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/internal/ttlclock"
)

// Backend names accepted in Options.Backend and $LOCKLAB_BACKEND.
const (
	BackendDocker  = "docker"
	BackendProcess = "process"
	BackendAddrs   = "addrs"
)

// ErrUnsupported is wrapped by the error of a fault that the cluster's
// backend cannot inject: the addrs backend talks to servers it does not
// control, so it cannot pause, kill, restart or partition them, nor start
// replicas.
var ErrUnsupported = errors.New("node: operation not supported on this backend")

// Options configure Start. The zero value (apart from N) starts N
// redis-servers without persistence on the automatically chosen backend.
type Options struct {
	// Backend is "docker", "process", "addrs" or "" for automatic: the value
	// of $LOCKLAB_BACKEND if set, else docker when a Docker engine answers
	// quickly, else process when redis-server is installed, else an error
	// that says how to install either.
	Backend string
	// N is the number of nodes, at least 1. With the addrs backend, 0 means
	// one node per address.
	N int
	// Image is the Docker image to run. Default: $LOCKLAB_REDIS_IMAGE, else
	// "redis:7". When it is not present locally and cannot be pulled within
	// a few seconds, an image is built locally from the host's redis-server.
	Image string
	// Addrs are the servers of the addrs backend: "host:port",
	// "password@host:port", or a redis:// or rediss:// URL with an ACL
	// user, a database and TLS (see ParseAddr).
	Addrs []string
	// AppendOnly turns on the append-only file on every node, with the fsync
	// policy AppendFsync ("always", "everysec" or "no"; default "everysec").
	// Node.SetAppendOnly changes it for one node.
	AppendOnly  bool
	AppendFsync string
	// Label names the cluster in container names and labels (for example the
	// test name); it may be empty.
	Label string
	// StartTimeout bounds the wait for each node's first PONG. Default 10s.
	StartTimeout time.Duration
}

// persistence is the append-only configuration of one node.
type persistence struct {
	appendOnly bool
	fsync      string
}

// server is one backend's control over a redis-server.
type server interface {
	// addr is what clients dial.
	addr() string
	// peerAddr is how the other nodes of the cluster (replicas) reach it.
	peerAddr() string
	pause(ctx context.Context) error
	resume(ctx context.Context) error
	kill(ctx context.Context) error
	restart(ctx context.Context, keepData bool) error
	partition(ctx context.Context) error
	heal(ctx context.Context) error
	// persist records the append-only setting for later restarts; c is a
	// connection to the server, already switched with CONFIG SET.
	persist(ctx context.Context, c redis.Conn, p persistence) error
	logTail(n int) string
	close() error
}

// backend starts servers.
type backend interface {
	name() string
	// describe names what runs the servers, e.g. "process /usr/bin/redis-server".
	describe() string
	start(ctx context.Context, idx int, name string, p persistence) (server, error)
	// startSentinel starts a redis-server in Sentinel mode with the
	// sentinel directives conf (one per line).
	startSentinel(ctx context.Context, idx int, name, conf string) (server, error)
	close() error
}

// Cluster is a set of Redis nodes started together on one backend. Close
// removes every container, network and process it created.
type Cluster struct {
	be       backend
	opts     Options
	mu       sync.Mutex
	nodes    []*Node
	replicas []*Node
	// grouped are the nodes of the Sentinel groups, data nodes and
	// Sentinels; a group's Close removes its own.
	grouped []*Node
	// nextIdx numbers the next node started after n1..nN; docker derives
	// its fixed address from it.
	nextIdx int
	groups  int
	version string
	closed  bool
	// closing is closed when the first Close has removed everything;
	// later calls wait for it.
	closing chan struct{}
	// starting counts the nodes being started; Close waits for them after
	// cancelling their start (cancelStart).
	starting    sync.WaitGroup
	cancelStart context.CancelFunc
	closeErr    error
}

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

// Start starts a cluster of opts.N nodes named n1..nN and waits until each
// answers PING. A node that does not come up is an error naming it, with the
// tail of its log; the nodes already started are then removed.
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	if opts.Backend == "" {
		opts.Backend = os.Getenv("LOCKLAB_BACKEND")
	}
	opts.Backend = strings.ToLower(strings.TrimSpace(opts.Backend))
	switch opts.Backend {
	case "", BackendDocker, BackendProcess, BackendAddrs:
	default:
		return nil, fmt.Errorf("node: unknown backend %q: want %q, %q, %q or empty for automatic",
			opts.Backend, BackendDocker, BackendProcess, BackendAddrs)
	}
	if opts.Backend == BackendAddrs && len(opts.Addrs) == 0 {
		return nil, fmt.Errorf("node: backend %q needs Addrs (host:port, password@host:port or a redis:// URL)", BackendAddrs)
	}
	if opts.Backend == BackendAddrs && opts.N == 0 {
		opts.N = len(opts.Addrs)
	}
	if opts.N < 1 {
		return nil, fmt.Errorf("node: N must be at least 1, got %d", opts.N)
	}
	switch opts.AppendFsync {
	case "":
		opts.AppendFsync = "everysec"
	case "always", "everysec", "no":
	default:
		return nil, fmt.Errorf("node: AppendFsync %q: want always, everysec or no", opts.AppendFsync)
	}
	if opts.StartTimeout <= 0 {
		opts.StartTimeout = 10 * time.Second
	}
	if len(opts.Addrs) > 0 && opts.Backend != BackendAddrs && opts.Backend != "" {
		return nil, fmt.Errorf("node: Addrs given with backend %q: use backend %q", opts.Backend, BackendAddrs)
	}
	if len(opts.Addrs) > 0 && opts.Backend == "" {
		opts.Backend = BackendAddrs
		if opts.N == 0 {
			opts.N = len(opts.Addrs)
		}
	}

	var (
		be  backend
		err error
	)
	switch opts.Backend {
	case BackendDocker:
		be, err = newDocker(ctx, opts)
	case BackendProcess:
		be, err = newProcess(opts)
	case BackendAddrs:
		be, err = newAddrs(opts)
	default:
		be, err = autoBackend(ctx, opts)
	}
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	c := &Cluster{be: be, opts: opts, closing: make(chan struct{}), cancelStart: cancel, nextIdx: opts.N}
	track(c)
	p := persistence{appendOnly: opts.AppendOnly, fsync: opts.AppendFsync}
	errs := make([]error, opts.N)
	var wg sync.WaitGroup
	for i := range opts.N {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = c.startNode(ctx, i, "n"+strconv.Itoa(i+1), p, nil, func(n *Node) {
				c.nodes = append(c.nodes, n)
			})
		}()
	}
	wg.Wait()
	c.mu.Lock()
	slices.SortFunc(c.nodes, func(a, b *Node) int { return a.idx - b.idx })
	c.mu.Unlock()
	if err := errors.Join(errs...); err != nil {
		c.Close()
		return nil, err
	}
	c.version = c.nodes[0].redisVersion(ctx)
	return c, nil
}

// autoBackend picks docker when an engine answers, else process.
func autoBackend(ctx context.Context, opts Options) (backend, error) {
	dbe, derr := newDocker(ctx, opts)
	if derr == nil {
		return dbe, nil
	}
	if !errors.Is(derr, errNoEngine) {
		return nil, derr
	}
	pbe, perr := newProcess(opts)
	if perr == nil {
		return pbe, nil
	}
	return nil, fmt.Errorf("node: no backend available.\n"+
		"  docker: %v\n"+
		"    install Docker (https://docs.docker.com/engine/install/) and make sure the engine runs and $DOCKER_HOST (or /var/run/docker.sock) reaches it;\n"+
		"  process: %v\n"+
		"  or give the addresses of running servers with backend %q (Options.Addrs)", derr, perr, BackendAddrs)
}

// errClosed is the error of a start cut short by Close.
var errClosed = errors.New("node: cluster closed")

// startNode starts one server (with launch, or else the backend's start) and,
// under c.mu, hands it to attach, which files it in the cluster. When Close
// runs meanwhile, it cancels the start and waits for it; a server that came
// up all the same is removed here.
func (c *Cluster) startNode(ctx context.Context, idx int, name string, p persistence,
	launch func(ctx context.Context) (server, error), attach func(*Node)) (*Node, error) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, errClosed
	}
	c.starting.Add(1)
	c.mu.Unlock()
	defer c.starting.Done()
	if launch == nil {
		launch = func(ctx context.Context) (server, error) { return c.be.start(ctx, idx, name, p) }
	}
	srv, err := launch(ctx)
	if err != nil {
		return nil, err
	}
	n := &Node{name: name, idx: idx, cluster: c, srv: srv, persist: p}
	if a, ok := srv.(*addrServer); ok {
		n.opts = a.opts
	}
	n.pool = &redis.Pool{
		MaxIdle:     16,
		IdleTimeout: time.Minute,
		DialContext: func(ctx context.Context) (redis.Conn, error) {
			gen := n.gen.Load()
			c, err := n.Dial(ctx)
			if err != nil {
				return nil, err
			}
			return &genConn{Conn: c, gen: gen}, nil
		},
		TestOnBorrowContext: func(_ context.Context, c redis.Conn, _ time.Time) error {
			if g, ok := c.(*genConn); ok && g.gen != n.gen.Load() {
				return errStaleConn
			}
			return nil
		},
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		n.pool.Close()
		srv.close()
		return nil, fmt.Errorf("node %s: %w", name, errClosed)
	}
	attach(n)
	return n, nil
}

// Backend returns the name of the backend that runs the nodes: "docker",
// "process" or "addrs".
func (c *Cluster) Backend() string { return c.be.name() }

// Describe says what runs the nodes and which Redis version answers, e.g.
// "docker image locklab/redis:7.0.15 (Redis 7.0.15)".
func (c *Cluster) Describe() string {
	return fmt.Sprintf("%s (Redis %s)", c.be.describe(), c.version)
}

// Nodes returns the N nodes Start started, n1..nN. Replicas added later are
// not among them (see Replicas).
func (c *Cluster) Nodes() []*Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*Node(nil), c.nodes...)
}

// Replicas returns the replicas added with AddReplica, in order.
func (c *Cluster) Replicas() []*Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*Node(nil), c.replicas...)
}

// Close stops every node and removes every container, network, process and
// directory the cluster created, cutting short the starts under way. It is
// safe to call more than once and from several goroutines (a signal handler
// and the program): every call returns once everything is removed, with the
// first call's error.
func (c *Cluster) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		<-c.closing
		return c.closeErr
	}
	c.closed = true
	c.mu.Unlock()
	c.cancelStart()
	c.starting.Wait()
	c.mu.Lock()
	all := append(append(append([]*Node(nil), c.nodes...), c.replicas...), c.grouped...)
	c.grouped = nil
	c.mu.Unlock()
	errs := []error{closeNodes(all)}
	if err := c.be.close(); err != nil {
		errs = append(errs, err)
	}
	untrack(c)
	c.closeErr = errors.Join(errs...)
	close(c.closing)
	return c.closeErr
}

// ExpireAll makes time pass on every node of Nodes() (see Node.ExpireAll).
// It goes on past a node that fails and returns every failure.
func (c *Cluster) ExpireAll(ctx context.Context) error {
	var errs []error
	for _, n := range c.Nodes() {
		if err := n.ExpireAll(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// AddReplica starts a new node that replicates master, named after it
// ("n1r1", "n1r2", ...), and waits until it has synchronized. The replica
// reaches the master the way the cluster's nodes reach each other, so a
// partition of the master also cuts replication. Not supported on the addrs
// backend.
func (c *Cluster) AddReplica(ctx context.Context, master *Node) (*Node, error) {
	return c.addReplica(ctx, master, "", func(r *Node) { c.replicas = append(c.replicas, r) })
}

// addReplica starts a replica of master named name ("" for the next
// "<master>rK") and files it with attach.
func (c *Cluster) addReplica(ctx context.Context, master *Node, name string, attach func(*Node)) (*Node, error) {
	if master == nil || master.cluster != c {
		return nil, errors.New("node: AddReplica: master is not a node of this cluster")
	}
	if c.be.name() == BackendAddrs {
		return nil, unsupported("add a replica", master.name)
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, errors.New("node: AddReplica on a closed cluster")
	}
	if name == "" {
		k := 1
		for _, r := range c.replicas {
			if strings.HasPrefix(r.name, master.name+"r") {
				k++
			}
		}
		name = master.name + "r" + strconv.Itoa(k)
	}
	idx := c.nextIdx
	c.nextIdx++
	c.mu.Unlock()
	master.mu.Lock()
	p := master.persist
	master.mu.Unlock()
	r, err := c.startNode(ctx, idx, name, p, nil, attach)
	if err != nil {
		return nil, err
	}
	// Start the full sync at once instead of waiting for more replicas.
	if _, err := master.do(ctx, "CONFIG", "SET", "repl-diskless-sync-delay", "0"); err != nil {
		return nil, fmt.Errorf("node %s: %w", master.name, err)
	}
	host, port, _ := net.SplitHostPort(master.srv.peerAddr())
	if _, err := r.do(ctx, "REPLICAOF", host, port); err != nil {
		return nil, fmt.Errorf("node %s: REPLICAOF %s %s: %w", name, host, port, err)
	}
	if err := r.waitSynced(ctx, master, 10*time.Second, 20*time.Millisecond); err != nil {
		return nil, fmt.Errorf("node %s: replica of %s did not sync: %w\n%s", name, master.name, err, r.srv.logTail(10))
	}
	return r, nil
}

// Failover plays the classic lost-write failover: it stops replica's
// replication link, runs write (the writes the replica will miss; nil for
// none) while master still accepts them, kills master and promotes replica
// to a master. Afterwards replica answers as a master without the writes
// made by write.
func (c *Cluster) Failover(ctx context.Context, master, replica *Node, write func(ctx context.Context) error) error {
	if err := replica.StopReplication(ctx); err != nil {
		return err
	}
	if write != nil {
		if err := write(ctx); err != nil {
			return fmt.Errorf("node: Failover: writes on %s: %w", master.name, err)
		}
	}
	if err := master.Kill(ctx); err != nil {
		return err
	}
	return replica.Promote(ctx)
}

// Name returns the node's name: "n1".."nN", or "n1r1" for a replica.
func (n *Node) Name() string { return n.name }

// Addr returns the address clients dial, "host:port". It does not change
// over the node's life (restarts, partitions).
func (n *Node) Addr() string { return n.srv.addr() }

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

// Pool returns the node's connection pool. It satisfies locklab.ConnSource.
// Connections have 2s connect, read and write timeouts.
func (n *Node) Pool() *redis.Pool { return n.pool }

// Dial opens a new connection to the node, with the user, password,
// database and TLS of its address if any, and 2s connect, read and write
// timeouts (or those its URL sets); ctx bounds the dial.
func (n *Node) Dial(ctx context.Context) (redis.Conn, error) {
	o := n.opts
	o.Addr = n.srv.addr()
	opts, err := o.DialOptions()
	if err != nil {
		return nil, err
	}
	return redis.DialContext(ctx, "tcp", o.Addr, opts...)
}

// do runs one command on a fresh connection bounded by ctx.
func (n *Node) do(ctx context.Context, cmd string, args ...any) (any, error) {
	c, err := n.Dial(ctx)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	return redis.DoContext(c, ctx, cmd, args...)
}

// Do runs one command on a fresh connection (not the pool), bounded by ctx.
func (n *Node) Do(ctx context.Context, cmd string, args ...any) (any, error) {
	v, err := n.do(ctx, cmd, args...)
	if err != nil {
		return nil, fmt.Errorf("node %s: %s: %w", n.name, cmd, err)
	}
	return v, nil
}

// Flush deletes every key of every database (FLUSHALL).
func (n *Node) Flush(ctx context.Context) error {
	_, err := n.Do(ctx, "FLUSHALL")
	return err
}

// ExpireAll makes time pass on the node: every key of database 0 that has a
// TTL is removed now, as if its TTL had elapsed; keys without a TTL stay. It
// only sends commands (SCAN and a Lua script), so it works on every backend.
// Run it on masters: a replica refuses writes.
func (n *Node) ExpireAll(ctx context.Context) error {
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

// StopReplication cuts a replica's link to its master while keeping its data:
// it points the replica at an address where nothing listens, so it stops
// receiving writes but stays a read-only replica until Promote.
func (n *Node) StopReplication(ctx context.Context) error {
	if _, err := n.Do(ctx, "REPLICAOF", "127.0.0.1", "1"); err != nil {
		return err
	}
	return nil
}

// Promote turns a replica into a master (REPLICAOF NO ONE), keeping the data
// it has.
func (n *Node) Promote(ctx context.Context) error {
	_, err := n.Do(ctx, "REPLICAOF", "NO", "ONE")
	return err
}

// Role returns "master" or "slave" as INFO replication reports it.
func (n *Node) Role(ctx context.Context) (string, error) {
	info, err := redis.String(n.Do(ctx, "INFO", "replication"))
	if err != nil {
		return "", err
	}
	return infoFields(info)["role"], nil
}

// waitSynced waits until replica n has the link to master up and has
// applied everything master sent: a PUBLISH on master (replicated, but
// touching no key) moves the replication offset, and n must reach it.
func (n *Node) waitSynced(ctx context.Context, master *Node, timeout, poll time.Duration) error {
	deadline := time.Now().Add(timeout)
	var last string
	for time.Now().Before(deadline) {
		if _, err := master.do(ctx, "PUBLISH", "__locklab_sync", "1"); err != nil {
			return err
		}
		minfo, err := redis.String(master.do(ctx, "INFO", "replication"))
		if err != nil {
			return err
		}
		want, _ := strconv.ParseInt(infoFields(minfo)["master_repl_offset"], 10, 64)
		info, err := redis.String(n.do(ctx, "INFO", "replication"))
		if err != nil {
			return err
		}
		f := infoFields(info)
		got, _ := strconv.ParseInt(f["slave_repl_offset"], 10, 64)
		if f["master_link_status"] == "up" && f["master_sync_in_progress"] == "0" && got >= want && want > 0 {
			return nil
		}
		last = fmt.Sprintf("master_link_status=%s, offset %d of %d", f["master_link_status"], got, want)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(poll):
		}
	}
	return fmt.Errorf("not synced within %v (%s)", timeout, last)
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

// Partition cuts the node off from the clients and from the other nodes:
// open connections and new ones get no answer (they time out) until Heal.
// Docker disconnects the container from the cluster's network; the process
// backend blackholes the node's loopback proxy.
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
		if errors.Is(err, ErrUnsupported) {
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

func unsupported(op, name string) error {
	return fmt.Errorf("%w: cannot %s node %s: the addrs backend talks to servers it does not control; "+
		"use the docker or process backend for faults", ErrUnsupported, op, name)
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

// closeNodes closes the pools and stops the servers of nodes, all at once,
// and joins their errors.
func closeNodes(nodes []*Node) error {
	var errs []error
	var emu sync.Mutex
	var wg sync.WaitGroup
	for _, n := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n.pool.Close()
			if err := n.srv.close(); err != nil {
				emu.Lock()
				errs = append(errs, fmt.Errorf("node %s: %w", n.name, err))
				emu.Unlock()
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}
