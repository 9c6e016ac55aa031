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
	// CrashProb is the chance, after each request a client sends,
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
	// (internal/tooling/namespace: "{locklab:<random id>}:" + Key,
	// Namespace), writes no other key, and at the end has the store delete
	// the keys of that namespace and nothing else (Sweeper), where owned
	// servers are emptied first (StoreRun.Empty).
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

	// Faults are the node faults a run injects, among those of its store
	// (StoreDriver.Faults): every FaultEvery [2s] one kind is drawn from
	// Seed and struck at the store's servers (StoreRun.Fault), lasting
	// FaultFor [5 x TTL] before they are healed.
	Faults     []fault.Fault
	FaultEvery time.Duration
	FaultFor   time.Duration

	// Store holds the servers of the store that the strategy locks on (see
	// store.go), which the caller starts and closes: a harness.StoreNode
	// of the store, or what its package gives. The store's StoreDriver,
	// registered by its folder under stores/, connects each client (each
	// goroutine incarnation, or each worker process) on its own, empties
	// the servers of what would disturb the run (StoreRun.Empty), and
	// strikes them with its node faults (StoreDriver.Faults). The TTL
	// defaults to the store's lease granularity where it has one
	// (StoreDriver.Lease). Required.
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
	if o.Store != nil {
		if o.sd = LookupStore(o.Store.Store()); o.sd == nil {
			return lockkit.Invalid("stress: no store %q is registered (import its package under stores/)", o.Store.Store())
		}
	}
	if o.Clients <= 0 {
		o.Clients = 8
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
	if o.Processes && len(o.WorkerCommand) == 0 {
		return lockkit.Invalid("process mode needs a worker command")
	}
	var err error
	if o.desc, o.factory, err = strategies.Lookup(o.Strategy); err != nil {
		return err
	}
	if err := o.checkStore(); err != nil {
		return err
	}
	return o.faultDefaults()
}

// checkStore refuses a run without its store's servers, servers with a
// strategy of another store, a TTL the store's leases cannot be, and the
// node faults a run on it does not inject (saying which store's servers
// the store's own faults strike, StoreDriver.Own).
func (o *Options) checkStore() error {
	own, err := storeOf(o.desc.Family)
	if err != nil {
		return lockkit.Invalid("stress: strategy %s: %v", o.Strategy, err)
	}
	d := o.sd
	if d == nil {
		if own == nil {
			return lockkit.Invalid("stress: strategy %s (family %s, which no registered store claims) locks on the store whose servers Options.Store gives: Options.Store is required", o.Strategy, o.desc.Family)
		}
		return lockkit.Invalid("stress: strategy %s locks on %s: Options.Store is required", o.Strategy, own.Title)
	}
	if own == nil {
		// A lock of one's own: the store of the servers given.
		own = d
	}
	if own != d {
		return lockkit.Invalid("stress: strategy %s does not lock on %s", o.Strategy, d.Title)
	}
	if d.Lease > 0 && (o.TTL < d.Lease || o.TTL%d.Lease != 0) {
		return lockkit.Invalid("stress: TTL %v: %s's leases are %s, at least %v", o.TTL, d.Title, d.LeaseWords(), d.Lease)
	}
	for _, f := range o.Faults {
		if slices.Contains(d.Faults, f) {
			continue
		}
		var says []string
		for _, other := range Stores() {
			if other.Own[f] != "" && slices.Contains(other.Faults, f) {
				says = append(says, other.Own[f])
			}
		}
		if len(says) > 0 {
			return lockkit.Invalid("stress: node fault %v %s", f, strings.Join(says, ", or "))
		}
		return lockkit.Invalid("stress: node fault %v is not one a run on %s injects (want %s)", f, d.Title, fault.Join(d.Faults))
	}
	return nil
}

// Namespace is the namespace of a Shared run, which its Key is in, once
// the run resolved its options (the Options a StoreDriver's Start gets);
// the zero Namespace otherwise.
func (o Options) Namespace() namespace.Namespace { return o.ns }

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
