// Redis in stress mode (harness/stress): a run of a Redis strategy on
// plain nodes (one, or several for a multi-node strategy such as
// Redlock), on a Sentinel group (stressfailover.go) or on a Redis Cluster
// (stresscluster.go), and their node faults: a node paused, restarted or
// partitioned, the Sentinel group's master failed over, the cluster's
// master of the key's slot failed over.

package redis

import (
	"context"
	"flag"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	"github.com/gomodule/redigo/redis"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/harness/fault"
	"github.com/locklab/locklab/harness/stress"
	"github.com/locklab/locklab/internal/tooling/namespace"
	"github.com/locklab/locklab/internal/tooling/redisaddr"
	"github.com/locklab/locklab/internal/tooling/wrapconn"
	"github.com/locklab/locklab/lockkit"
	"github.com/locklab/locklab/stores/redis/redisnode"
	"github.com/locklab/locklab/strategies"
)

// StressNodeFaults are the node faults of a stress run on plain nodes
// (StressServers.FaultNodes), each for FaultFor: a node paused, killed and
// started again without its files (fault.Restart) or with them
// (fault.RestartKeep), or partitioned.
var StressNodeFaults = []fault.Fault{fault.Pause, fault.Restart, fault.RestartKeep, fault.Partition}

// StressSentinelFaults are the node faults of a stress run on a Sentinel
// group (StressServers.Sentinels): a failover of its master.
var StressSentinelFaults = []fault.Fault{fault.Failover}

// StressClusterFaults are the node faults of a stress run on a Redis
// Cluster (StressServers.Cluster): a failover of the master of the key's
// slot.
var StressClusterFaults = []fault.Fault{fault.ClusterFailover}

// stressDriver is the store's part of stress mode (its Driver's Stress).
var stressDriver = &stress.StoreDriver{
	Families: families,
	Faults:   slices.Concat(StressNodeFaults, StressSentinelFaults, StressClusterFaults),
	Start:    startStress,
	Worker:   stressWorker,
}

// StressFaultNode is a Redis node a stress run may fault.
// *redisnode.Node satisfies it; on the addrs backend its faults fail with
// fault.ErrUnsupported.
type StressFaultNode interface {
	Name() string
	fault.Pauser
	fault.Killer
	fault.Restarter
	fault.Partitioner
}

// StressServers are the Redis servers a stress run locks on
// (stress.Options.Store), which the caller starts and closes: plain
// nodes, a Sentinel group or a Redis Cluster.
type StressServers struct {
	// Nodes are the plain nodes: the first is used by single-node
	// strategies, all of them by multi-node ones.
	Nodes []locklab.ConnSource
	// Addrs are the addresses of Nodes, in the same order, as
	// "host:port", "password@host:port" or a redis:// URL
	// (redisaddr.Parse; Node.URL gives one), for the worker processes to
	// dial. Required with stress.Options.Processes.
	Addrs []string
	// FaultNodes are the nodes that the node faults of StressNodeFaults
	// may hit, one drawn from the run's seed for each fault; a
	// *redisnode.Node is one. Those faults need FaultNodes.
	FaultNodes []StressFaultNode

	// Sentinels, when set, is the Sentinel group the lock lives on: the
	// clients (each worker process, or each goroutine) find its master
	// through a locklab.SentinelPool of their own, and Nodes, Addrs and
	// FaultNodes stay empty. Its node fault is fault.Failover, which cuts
	// the master off until the Sentinels promote a replica (see
	// stressfailover.go). A Sentinel group has one master: multi-node
	// strategies are refused.
	Sentinels *redisnode.SentinelGroup
	// SentinelRefresh is how often each client of a run on a Sentinel
	// group asks the Sentinels again which server is the master (its
	// SentinelPool's Refresh); the clients' questions are spread over one
	// period. After a promotion, the clients that have not yet asked take
	// the lock on the old master, the others on the new one: a longer
	// period is a longer while with two masters. Default
	// locklab.DefaultSentinelRefresh (1s).
	SentinelRefresh time.Duration

	// Cluster, when set, is the Redis Cluster the lock lives on: the
	// clients (each worker process, or each goroutine) reach it through a
	// locklab.ClusterPool of their own, and Nodes, Addrs and FaultNodes
	// stay empty. Its node fault is fault.ClusterFailover, which kills the
	// master of the key's slot once its replica has fallen behind for
	// FaultFor, lets the cluster elect the replica and starts the old
	// master again as a replica (see stresscluster.go). Strategies that
	// cannot run on a cluster (strategies.Description.NoCluster) are
	// refused.
	Cluster *redisnode.RedisCluster
}

// Store names the store: Redis's Name.
func (*StressServers) Store() string { return Name }

// check refuses servers and options that do not go together (see
// StressServers), for a run of o whose strategy is desc.
func (s *StressServers) check(o stress.Options, desc strategies.Description) error {
	if s.Sentinels != nil {
		return s.checkSentinels(o, desc)
	}
	if s.Cluster != nil {
		return s.checkCluster(o, desc)
	}
	if slices.Contains(o.Faults, fault.Failover) {
		return lockkit.Invalid("node fault %s needs a Sentinel group (StressServers.Sentinels)", fault.Failover)
	}
	if slices.Contains(o.Faults, fault.ClusterFailover) {
		return lockkit.Invalid("node fault %s needs a Redis Cluster (StressServers.Cluster)", fault.ClusterFailover)
	}
	if len(s.Nodes) == 0 {
		return lockkit.Invalid("no Redis nodes")
	}
	if o.Processes && len(s.Addrs) != len(s.Nodes) {
		return lockkit.Invalid("process mode needs the address of each of the %d nodes, got %d", len(s.Nodes), len(s.Addrs))
	}
	if len(o.Faults) > 0 && len(s.FaultNodes) == 0 {
		return lockkit.Invalid("node faults need nodes to fault")
	}
	return nil
}

// stressRun is a stress run's side of Redis's servers: the sources the
// run itself reads (the plain nodes, or a pool of its own on the Sentinel
// group's master or the cluster), and, on a Sentinel group or a cluster,
// each client's pool, which it keeps across its incarnations.
type stressRun struct {
	s       *StressServers
	o       stress.Options
	multi   bool
	refresh time.Duration
	sources []locklab.ConnSource
	closers []func()

	mu      sync.Mutex
	clients map[int]locklab.ConnSource
}

// startStress starts a run of o on servers, a *StressServers.
func startStress(ctx context.Context, servers stress.StoreServers, o stress.Options) (stress.StoreRun, error) {
	s, ok := servers.(*StressServers)
	if !ok {
		return nil, fmt.Errorf("stress on Redis: the servers are a %T, not StressServers", servers)
	}
	desc, err := strategies.Info(o.Strategy)
	if err != nil {
		return nil, err
	}
	if err := s.check(o, desc); err != nil {
		return nil, err
	}
	r := &stressRun{s: s, o: o, multi: desc.Properties.MultiNode, refresh: s.SentinelRefresh, clients: map[int]locklab.ConnSource{}}
	if r.refresh == 0 {
		r.refresh = locklab.DefaultSentinelRefresh
	}
	switch {
	case s.Sentinels != nil:
		err = r.startSentinels(ctx)
	case s.Cluster != nil:
		err = r.startCluster(ctx)
	default:
		r.sources = s.Nodes
	}
	if err != nil {
		r.Close()
		return nil, err
	}
	return r, nil
}

// Empty empties every node so a run starts from a clean key space; a
// cluster was emptied when the run started, master by master.
func (r *stressRun) Empty(ctx context.Context) error {
	if r.s.Cluster != nil {
		return nil
	}
	for i, n := range r.sources {
		c, err := n.GetContext(ctx)
		if err != nil {
			return fmt.Errorf("node %d: %w", i+1, err)
		}
		_, err = c.Do("FLUSHALL")
		c.Close()
		if err != nil {
			return fmt.Errorf("node %d: FLUSHALL: %w", i+1, err)
		}
	}
	return nil
}

// Sweep deletes the keys of a Shared run's namespace, and nothing else.
func (r *stressRun) Sweep() error { return namespace.SweepAll(r.o.Namespace(), r.sources) }

// Connect gives cfg client id's sources, the nodes or its own pool on a
// Sentinel group or a cluster, through the crasher's hook: once the
// client has crashed, no connection opens and no command is sent; after
// each command the client may crash.
func (r *stressRun) Connect(ctx context.Context, id int, c stress.Crasher, cfg *locklab.Config) (func(), error) {
	srcs := r.sources
	if r.s.Sentinels != nil || r.s.Cluster != nil {
		src, err := r.client(ctx, id)
		if err != nil {
			return nil, err
		}
		srcs = []locklab.ConnSource{src}
	}
	if r.multi {
		for _, n := range srcs {
			cfg.Nodes = append(cfg.Nodes, crashing(c, n))
		}
	} else {
		cfg.Pool = crashing(c, srcs[0])
	}
	return func() {}, nil
}

// client is client id's pool on a Sentinel group or a cluster, made at
// its first incarnation: each client asks the Sentinels on its own, after
// its stagger, or finds the cluster's masters on its own, as separate
// programs would.
func (r *stressRun) client(ctx context.Context, id int) (locklab.ConnSource, error) {
	r.mu.Lock()
	src := r.clients[id]
	r.mu.Unlock()
	if src != nil {
		return src, nil
	}
	var err error
	if r.s.Sentinels != nil {
		src, err = r.sentinelPool()
	} else {
		src, err = newClusterPool(r.s.Cluster.Addrs())
	}
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	r.clients[id] = src
	r.mu.Unlock()
	if r.s.Sentinels != nil {
		sleepCtx(ctx, r.stagger(id))
	}
	return src, nil
}

// crashing gives the connections of a client to src c's hook.
func crashing(c stress.Crasher, src locklab.ConnSource) locklab.ConnSource {
	hooks := wrapconn.Hooks{Do: func(ctx context.Context, _ wrapconn.Call, send wrapconn.Send) (any, error) {
		if c.Crashed() {
			return nil, stress.ErrCrashed
		}
		v, err := send(ctx)
		c.Roll()
		return v, err
	}}
	return &wrapconn.Source{Src: src, Open: func(context.Context) (wrapconn.Hooks, error) {
		if c.Crashed() {
			return hooks, stress.ErrCrashed
		}
		return hooks, nil
	}}
}

// Stuck says what a lock nobody takes is: a key without TTL never frees
// itself (deadlock); one with a TTL that keeps being pushed forward is
// starved.
func (r *stressRun) Stuck(ctx context.Context, key string) (string, bool) {
	c, err := r.sources[0].GetContext(ctx)
	if err != nil {
		return "", false
	}
	defer c.Close()
	pttl, err := redis.Int64(c.Do("PTTL", key))
	if err != nil {
		return "", false
	}
	if pttl == -1 {
		return stress.KindDeadlock, true
	}
	return stress.KindStarvation, true
}

// faultWhat says what a fault does to a node, in the timeline.
var faultWhat = map[fault.Fault]string{
	fault.Pause:       "paused",
	fault.Partition:   "partitioned",
	fault.Restart:     "killed, to restart without its data",
	fault.RestartKeep: "killed, to restart with its data",
}

// Fault strikes the servers with s.Kind: a failover of the Sentinel
// group's master or of the cluster's, or a node fault on one of the
// FaultNodes that s picks, healed after s.For.
func (r *stressRun) Fault(ctx context.Context, s *stress.Strike) error {
	switch kind := s.Kind(); kind {
	case fault.Failover:
		r.failover(ctx, s)
		return nil
	case fault.ClusterFailover:
		r.clusterFailover(ctx, s)
		return nil
	default:
		n := r.s.FaultNodes[s.Pick(len(r.s.FaultNodes))]
		bg := context.WithoutCancel(ctx)
		return s.Run(ctx, n.Name(), "node "+n.Name(), fmt.Sprintf("%s for %v", faultWhat[kind], s.For()),
			func() error { return fault.Begin(bg, n, kind) }, func() error { return fault.End(bg, n, kind) })
	}
}

// WorkerArgs are the flags of client id's worker process, for
// stressWorker: the nodes' addresses, or the Sentinel group's (and the
// client's stagger), or the cluster's.
func (r *stressRun) WorkerArgs(id int) []string {
	var args []string
	if r.multi {
		args = append(args, "-multi-node")
	}
	for _, a := range r.s.Addrs {
		args = append(args, "-addr="+a)
	}
	if g := r.s.Sentinels; g != nil {
		args = append(args, "-master-name="+g.MasterName(), "-stagger="+r.stagger(id).String(),
			"-sentinel-refresh="+r.refresh.String())
		for _, a := range g.Addrs() {
			args = append(args, "-sentinel="+a)
		}
	}
	if g := r.s.Cluster; g != nil {
		for _, a := range g.Addrs() {
			args = append(args, "-cluster="+a)
		}
	}
	return args
}

// Close closes the clients' pools and the run's own.
func (r *stressRun) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, src := range r.clients {
		if c, ok := src.(io.Closer); ok {
			c.Close()
		}
	}
	r.clients = map[int]locklab.ConnSource{}
	for i := len(r.closers) - 1; i >= 0; i-- {
		r.closers[i]()
	}
	r.closers = nil
	return nil
}

// workerFlags are the flags of a worker process, as WorkerArgs gives
// them.
type workerFlags struct {
	multi              bool
	addrs              []string
	sentinels, cluster []string
	masterName         string
	stagger, refresh   time.Duration
}

func parseStressWorker(args []string) (*workerFlags, error) {
	w := &workerFlags{}
	fs := flag.NewFlagSet("redis worker", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.BoolVar(&w.multi, "multi-node", false, "")
	fs.Func("addr", "", func(s string) error { w.addrs = append(w.addrs, s); return nil })
	fs.Func("sentinel", "", func(s string) error { w.sentinels = append(w.sentinels, s); return nil })
	fs.Func("cluster", "", func(s string) error { w.cluster = append(w.cluster, s); return nil })
	fs.StringVar(&w.masterName, "master-name", "", "")
	fs.DurationVar(&w.stagger, "stagger", 0, "")
	fs.DurationVar(&w.refresh, "sentinel-refresh", 0, "")
	if err := fs.Parse(args); err != nil {
		return nil, fmt.Errorf("worker: --store-arg: %w", err)
	}
	switch {
	case len(w.addrs) == 0 && len(w.sentinels) == 0 && len(w.cluster) == 0:
		return nil, fmt.Errorf("worker: no addr, sentinel or cluster among the --store-arg values")
	case len(w.sentinels) > 0 && (len(w.addrs) > 0 || w.multi):
		return nil, fmt.Errorf("worker: sentinel takes a single-node strategy and no addr")
	case len(w.cluster) > 0 && (len(w.addrs) > 0 || len(w.sentinels) > 0):
		return nil, fmt.Errorf("worker: cluster takes no addr and no sentinel")
	}
	return w, nil
}

// stressWorker gives a worker process's cfg its pools, from args
// (WorkerArgs): on the nodes, on the Sentinel group's master, after the
// client's stagger, or on the cluster.
func stressWorker(ctx context.Context, args []string, cfg *locklab.Config) (_ func(), err error) {
	w, err := parseStressWorker(args)
	if err != nil {
		return nil, err
	}
	var closers []func()
	closeAll := func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}
	defer func() {
		if err != nil {
			closeAll()
		}
	}()
	switch {
	case len(w.sentinels) > 0:
		sp, err := sentinelPool(w.masterName, w.sentinels, w.refresh)
		if err != nil {
			return nil, err
		}
		closers = append(closers, func() { sp.Close() })
		cfg.Pool = sp
	case len(w.cluster) > 0:
		cp, err := newClusterPool(w.cluster)
		if err != nil {
			return nil, err
		}
		closers = append(closers, func() { cp.Close() })
		cfg.Pool = cp
	}
	for _, a := range w.addrs {
		o, err := redisaddr.Parse(a)
		if err != nil {
			return nil, err
		}
		p, err := locklab.NewPoolOptions(o)
		if err != nil {
			return nil, err
		}
		closers = append(closers, func() { p.Close() })
		cfg.Nodes = append(cfg.Nodes, p)
	}
	if !w.multi && len(cfg.Nodes) > 0 {
		cfg.Pool, cfg.Nodes = cfg.Nodes[0], nil
	}
	sleepCtx(ctx, w.stagger)
	return closeAll, nil
}
