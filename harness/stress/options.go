// The options of a run: what each one means, its default, and the checks
// that refuse a run before it starts.

package stress

import (
	"crypto/rand"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/harness/fault"
	"github.com/locklab/locklab/internal/tooling/namespace"
	"github.com/locklab/locklab/lockkit"
	"github.com/locklab/locklab/strategies"
)

// Options configure a run. Zero values pick the defaults in brackets. A
// negative count or duration, a TTL under 1ms and a probability above 1
// are refused with locklab.ErrInvalid when the run starts, never replaced
// by a default; a negative probability turns its fault off.
type Options struct {
	Strategy string
	// Nodes are the Redis servers: the first is used by single-node
	// strategies, all of them by multi-node ones.
	Nodes []locklab.ConnSource
	// Clients is the number of concurrent clients [8].
	Clients int
	// Duration bounds the run [10s]; Cycles, when positive, ends it after
	// that many completed critical sections (clients inside a cycle then
	// finish it, so the report may count up to Clients-1 more).
	Duration time.Duration
	Cycles   int64
	// TTL of every lease [100ms].
	TTL time.Duration
	// HoldMax bounds the random wait inside the critical section, between
	// the read and the write of the register [2ms].
	HoldMax time.Duration
	// PauseProb is the chance that a holder pauses inside its critical
	// section for PauseFor [3 x TTL], as a GC pause or a stopped VM would.
	// Negative disables pauses; 0 picks the default [0.02].
	PauseProb float64
	PauseFor  time.Duration
	// CrashProb is the chance, after each Redis command a client sends,
	// that the client crashes there: it sends nothing more and never
	// releases; a fresh client takes its place. Negative disables; 0 picks
	// the default [0.005].
	CrashProb float64
	// Skew, when positive, gives each client a clock offset drawn from
	// [-Skew, +Skew] [0: none].
	Skew time.Duration
	// Fence makes the register check fence numbers [true]: an access
	// carrying a smaller fence than one already seen is refused.
	NoFence bool
	// Stuck is how long clients may keep trying without anybody acquiring
	// before the run reports a liveness violation [max(20 x TTL, 1s)].
	// Time inside an injected node fault does not count: the window
	// starts again when the fault ends.
	Stuck time.Duration
	// Seed makes pauses, crashes, skews and holds repeatable in kind (real
	// concurrency is never repeatable in order).
	Seed uint64
	// Key is the lock key ["locklab:stress"].
	Key string
	// Shared says the servers hold data of others (the addrs backend): the
	// run then locks Key inside a fresh namespace of its own
	// (internal/tooling/namespace: "{locklab:<random id>}:" + Key), writes no
	// other key, and at the end deletes the keys of that namespace and
	// nothing else, where an owned server is emptied with FLUSHALL first.
	Shared bool
	// CheckTimeout bounds porcupine's linearizability check of the run's
	// history [10s]; past it the result is Unknown. Negative skips the
	// check.
	CheckTimeout time.Duration
	// StopOnViolation ends the run at the first violation.
	StopOnViolation bool
	// Progress, if set, is called about every 250ms.
	Progress func(Progress)

	// Processes runs each client as a separate OS process (see "Process
	// mode" in the package documentation): pauses become SIGSTOP/SIGCONT
	// and crashes SIGKILL.
	Processes bool
	// WorkerCommand is the program and leading arguments that start one
	// worker, for example {"/usr/local/bin/locklab", "worker"}; the run
	// appends the worker's flags. Required with Processes.
	WorkerCommand []string
	// Addrs are the addresses of Nodes, in the same order, as "host:port",
	// "password@host:port" or a redis:// URL (redisaddr.Parse; Node.URL
	// gives one), for the workers to dial. Required with Processes.
	Addrs []string

	// FaultNodes are the nodes that node faults may hit; a *redisnode.Node is
	// one. Faults picks the kinds among FaultKinds (fault.Pause,
	// fault.Restart, fault.RestartKeep, fault.Partition); every FaultEvery [2s] one kind and
	// one node are drawn from Seed and the fault lasts FaultFor [5 x TTL]
	// before the node is resumed, started again or healed. Faults need
	// FaultNodes.
	FaultNodes []FaultNode
	Faults     []fault.Fault
	FaultEvery time.Duration
	FaultFor   time.Duration

	// Sentinels, when set, is the Sentinel group the lock lives on: the
	// clients (each worker process, or the goroutines together) find its
	// master through a locklab.SentinelPool, and Nodes, Addrs and
	// FaultNodes stay empty. Its node fault is fault.Failover, which
	// cuts the master off until the Sentinels promote a replica (see
	// "Sentinel failover" in the package documentation). A Sentinel group
	// has one master: multi-node strategies are refused. A group of
	// stores/redis/redisnode's is one through Sentinels.
	Sentinels SentinelGroup
	// SentinelRefresh is how often each client of a run on a Sentinel
	// group asks the Sentinels again which server is the master (its
	// SentinelPool's Refresh); the clients' questions are spread over one
	// period. After a promotion, the clients that have not yet asked take
	// the lock on the old master, the others on the new one: a longer
	// period is a longer while with two masters. Default
	// locklab.DefaultSentinelRefresh (1s).
	SentinelRefresh time.Duration

	// RedisCluster, when set, is the Redis Cluster the lock lives on: the
	// clients (each worker process, or each goroutine) reach it through a
	// locklab.ClusterPool of their own, and Nodes, Addrs and FaultNodes
	// stay empty. Its node fault is fault.ClusterFailover, which kills the
	// master of Key's slot once its replica has fallen behind for
	// FaultFor, lets the cluster elect the replica and starts the old
	// master again as a replica (see "Redis Cluster failover" in the
	// package documentation). Strategies that cannot run on a cluster
	// (strategies.Description.NoCluster) are refused. A cluster of
	// stores/redis/redisnode's is one through Cluster.
	RedisCluster RedisCluster

	// Store, when set, holds the servers of the store other than Redis
	// that the strategy locks on (see store.go): a harness.StoreNode of
	// the store, which the caller starts and closes. The store's
	// StoreDriver, registered by its folder under stores/, connects each
	// client (each goroutine incarnation, or each worker process) on its
	// own, empties the servers of what would disturb the run
	// (StoreRun.Empty), and strikes them with its node faults
	// (StoreDriver.Faults); Nodes, Addrs and FaultNodes stay empty.
	// The TTL defaults to the store's lease granularity where it has one
	// (StoreDriver.Lease).
	Store StoreServers

	// desc and factory are Strategy resolved, once, by defaults: every
	// client's Locker is built by factory; sd is the StoreDriver of Store.
	desc    strategies.Description
	factory strategies.Factory
	sd      *StoreDriver
	// ns is the namespace of a Shared run.
	ns namespace.Namespace
}

// check refuses values out of their range (see Options).
func (o *Options) check() error {
	for _, c := range []struct {
		name string
		v    int64
	}{{"Clients", int64(o.Clients)}, {"Cycles", o.Cycles}} {
		if c.v < 0 {
			return lockkit.Invalid("stress: %s %d: want 0 (the default) or more", c.name, c.v)
		}
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"Duration", o.Duration}, {"TTL", o.TTL}, {"HoldMax", o.HoldMax}, {"PauseFor", o.PauseFor},
		{"Skew", o.Skew}, {"Stuck", o.Stuck}, {"FaultEvery", o.FaultEvery}, {"FaultFor", o.FaultFor}} {
		if d.v < 0 {
			return lockkit.Invalid("stress: %s %v: want 0 (the default) or more", d.name, d.v)
		}
	}
	if o.TTL > 0 && o.TTL < time.Millisecond {
		return lockkit.Invalid("stress: TTL %v: want at least 1ms, the resolution of a lease", o.TTL)
	}
	for _, p := range []struct {
		name string
		v    float64
	}{{"PauseProb", o.PauseProb}, {"CrashProb", o.CrashProb}} {
		if math.IsNaN(p.v) || p.v > 1 {
			return lockkit.Invalid("stress: %s %v: want a probability up to 1 (0: the default; negative: never)", p.name, p.v)
		}
	}
	return nil
}

func (o *Options) defaults() error {
	if o.Strategy == "" {
		return lockkit.Invalid("no strategy")
	}
	if err := o.check(); err != nil {
		return err
	}
	if len(o.Nodes) == 0 && o.Sentinels == nil && o.RedisCluster == nil && o.Store == nil {
		return lockkit.Invalid("no Redis nodes")
	}
	if o.Store != nil {
		if o.sd = LookupStore(o.Store.Store()); o.sd == nil {
			return lockkit.Invalid("stress: no store %q is registered (import its package under stores/)", o.Store.Store())
		}
	}
	if o.Clients <= 0 {
		o.Clients = 8
	}
	if o.SentinelRefresh < 0 {
		return lockkit.Invalid("SentinelRefresh must not be negative, got %v", o.SentinelRefresh)
	}
	if o.SentinelRefresh == 0 {
		o.SentinelRefresh = locklab.DefaultSentinelRefresh
	}
	if o.Duration <= 0 {
		o.Duration = 10 * time.Second
	}
	if o.TTL <= 0 {
		o.TTL = 100 * time.Millisecond
		if o.sd != nil && o.sd.Lease > 0 {
			o.TTL = o.sd.Lease
		}
	}
	if o.HoldMax <= 0 {
		o.HoldMax = 2 * time.Millisecond
	}
	if o.PauseProb == 0 {
		o.PauseProb = 0.02
	}
	if o.PauseFor <= 0 {
		o.PauseFor = 3 * o.TTL
	}
	if o.CrashProb == 0 {
		o.CrashProb = 0.005
	}
	if o.CheckTimeout == 0 {
		o.CheckTimeout = 10 * time.Second
	}
	if o.Stuck <= 0 {
		o.Stuck = max(20*o.TTL, time.Second)
	}
	if o.Key == "" {
		o.Key = "locklab:stress"
	}
	if o.Shared && o.ns.IsZero() {
		o.ns = namespace.New()
		o.Key = o.ns.Key(o.Key)
	}
	if o.Processes {
		if len(o.WorkerCommand) == 0 {
			return lockkit.Invalid("process mode needs a worker command")
		}
		if o.Sentinels == nil && o.RedisCluster == nil && o.Store == nil && len(o.Addrs) != len(o.Nodes) {
			return lockkit.Invalid("process mode needs the address of each of the %d nodes, got %d", len(o.Nodes), len(o.Addrs))
		}
	}
	var err error
	if o.desc, o.factory, err = strategies.Lookup(o.Strategy); err != nil {
		return err
	}
	if err := o.checkSentinels(); err != nil {
		return err
	}
	if err := o.checkRedisCluster(); err != nil {
		return err
	}
	if err := o.checkStore(); err != nil {
		return err
	}
	return o.faultDefaults()
}

// checkStore refuses a strategy of a registered store without its
// servers, servers with a strategy of another store, a TTL the store's
// leases cannot be, and the node faults a run on it does not inject; on
// Redis, the faults that strike a store's servers alone.
func (o *Options) checkStore() error {
	own := LookupStore(o.desc.Family)
	if own != o.sd {
		if o.sd == nil {
			return lockkit.Invalid("stress: strategy %s locks on %s: Options.Store is required", o.Strategy, own.Title)
		}
		return lockkit.Invalid("stress: strategy %s does not lock on %s", o.Strategy, o.sd.Title)
	}
	if d := o.sd; d != nil {
		if d.Lease > 0 && (o.TTL < d.Lease || o.TTL%d.Lease != 0) {
			return lockkit.Invalid("stress: TTL %v: %s's leases are %s, at least %v", o.TTL, d.Title, d.LeaseWords(), d.Lease)
		}
		for _, f := range o.Faults {
			if !slices.Contains(d.Faults, f) {
				return lockkit.Invalid("stress: node fault %v is not one a run on %s injects (want %s)", f, d.Title, fault.Join(d.Faults))
			}
		}
		return nil
	}
	for _, f := range o.Faults {
		var says []string
		for _, d := range Stores() {
			if d.Own[f] != "" && slices.Contains(d.Faults, f) {
				says = append(says, d.Own[f])
			}
		}
		if len(says) > 0 {
			return lockkit.Invalid("stress: node fault %v %s", f, strings.Join(says, ", or "))
		}
	}
	return nil
}

// lockConfig is the Config a stress client's locker starts from, before
// its servers are added: retries a millisecond apart at first, up to a
// quarter of the TTL, and the clock and token source the defaults name,
// set, so that a lock of one's own that reads Config.Clock or Config.Rand
// itself runs here as it does in the race harness.
func lockConfig(ttl time.Duration) locklab.Config {
	return locklab.Config{
		Retry: locklab.RetryPolicy{Initial: time.Millisecond, Max: ttl / 4},
		Clock: locklab.SystemClock,
		Rand:  rand.Reader,
	}
}
