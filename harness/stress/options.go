// The options of a run: what each one means, its default, and the checks
// that refuse a run before it starts.

package stress

import (
	"time"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/harness/node"
	"github.com/locklab/locklab/strategies"
)

// Options configure a run. Zero values pick the defaults in brackets.
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
	// [-Skew, +Skew].
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
	// "password@host:port" or a redis:// URL (node.ParseAddr; Node.URL
	// gives one), for the workers to dial. Required with Processes.
	Addrs []string

	// FaultNodes are the nodes that node faults may hit; a *node.Node is
	// one. Faults picks the kinds among FaultKinds (node.Pause,
	// node.Restart, node.RestartKeep, node.Partition); every FaultEvery [2s] one kind and
	// one node are drawn from Seed and the fault lasts FaultFor [5 x TTL]
	// before the node is resumed, started again or healed. Faults need
	// FaultNodes.
	FaultNodes []FaultNode
	Faults     []node.Fault
	FaultEvery time.Duration
	FaultFor   time.Duration

	// Sentinels, when set, is the Sentinel group the lock lives on: the
	// clients (each worker process, or the goroutines together) find its
	// master through a locklab.SentinelPool, and Nodes, Addrs and
	// FaultNodes stay empty. Its node fault is node.Failover, which
	// cuts the master off until the Sentinels promote a replica (see
	// "Sentinel failover" in the package documentation). A Sentinel group
	// has one master: multi-node strategies are refused.
	Sentinels *node.SentinelGroup

	// desc and factory are Strategy resolved, once, by defaults: every
	// client's Locker is built by factory.
	desc    strategies.Description
	factory strategies.Factory
}

func (o *Options) defaults() error {
	if o.Strategy == "" {
		return locklab.Invalid("no strategy")
	}
	if len(o.Nodes) == 0 && o.Sentinels == nil {
		return locklab.Invalid("no Redis nodes")
	}
	if o.Clients <= 0 {
		o.Clients = 8
	}
	if o.Duration <= 0 {
		o.Duration = 10 * time.Second
	}
	if o.TTL <= 0 {
		o.TTL = 100 * time.Millisecond
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
	if o.Stuck <= 0 {
		o.Stuck = max(20*o.TTL, time.Second)
	}
	if o.Key == "" {
		o.Key = "locklab:stress"
	}
	if o.Processes {
		if len(o.WorkerCommand) == 0 {
			return locklab.Invalid("process mode needs a worker command")
		}
		if o.Sentinels == nil && len(o.Addrs) != len(o.Nodes) {
			return locklab.Invalid("process mode needs the address of each of the %d nodes, got %d", len(o.Nodes), len(o.Addrs))
		}
	}
	var err error
	if o.desc, o.factory, err = strategies.Lookup(o.Strategy); err != nil {
		return err
	}
	if err := o.checkSentinels(); err != nil {
		return err
	}
	if err := o.faultDefaults(); err != nil {
		return err
	}
	if o.PauseProb > 1 || o.CrashProb > 1 {
		return locklab.Invalid("probabilities must be at most 1")
	}
	return nil
}
