// A cluster: Start starts its nodes on one backend, and Close removes them
// with everything the backend created for them.

package redisnode

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gomodule/redigo/redis"

	"github.com/locklab/locklab/internal/tooling/backends"
)

// Cluster is a set of Redis nodes started together on one backend. Close
// removes every container, network and process it created.
type Cluster struct {
	be       backend
	opts     Options
	mu       sync.Mutex
	nodes    []*Node
	replicas []*Node
	// grouped are the nodes of the Sentinel groups, data nodes and
	// Sentinels, and of the Redis Clusters; a group's Close removes its
	// own.
	grouped []*Node
	// nextIdx numbers the next node started after n1..nN; docker derives
	// its fixed address from it.
	nextIdx int
	// groups and rclusters count the Sentinel groups and Redis Clusters
	// started, for their nodes' names.
	groups    int
	rclusters int
	version   string
	closed    bool
	// closing is closed when the first Close has removed everything;
	// later calls wait for it.
	closing chan struct{}
	// starting counts the nodes being started; Close waits for them after
	// cancelling their start (cancelStart).
	starting    sync.WaitGroup
	cancelStart context.CancelFunc
	closeErr    error
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
	case "", backends.Docker, backends.Process, backends.Addrs:
	default:
		return nil, fmt.Errorf("node: unknown backend %q: want %q, %q, %q or empty for automatic",
			opts.Backend, backends.Docker, backends.Process, backends.Addrs)
	}
	if opts.Backend == backends.Addrs && len(opts.Addrs) == 0 {
		return nil, fmt.Errorf("node: backend %q needs Addrs (host:port, password@host:port or a redis:// URL)", backends.Addrs)
	}
	if opts.Backend == backends.Addrs && opts.N == 0 {
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
	if len(opts.Addrs) > 0 && opts.Backend != backends.Addrs && opts.Backend != "" {
		return nil, fmt.Errorf("node: Addrs given with backend %q: use backend %q", opts.Backend, backends.Addrs)
	}
	if len(opts.Addrs) > 0 && opts.Backend == "" {
		opts.Backend = backends.Addrs
		if opts.N == 0 {
			opts.N = len(opts.Addrs)
		}
	}

	var (
		be  backend
		err error
	)
	switch opts.Backend {
	case backends.Docker:
		be, err = newDocker(ctx, opts)
	case backends.Process:
		be, err = newProcess(opts)
	case backends.Addrs:
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
	// Every connection the harness opens to the node says whose it is.
	n.opts.ClientName = ClientName
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
