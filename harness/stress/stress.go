// Package stress runs a lock under real concurrency and real time: many
// clients loop acquire, critical section, release against real Redis
// servers with millisecond TTLs, while clients pause past their TTL, crash
// between two commands, or run on skewed clocks. The critical section is a
// Jepsen-style read-modify-write of a shared register, so the damage a broken
// lock does is measured, not guessed:
//
//   - overlapping holds: two clients inside the critical section at once,
//     from intervals read on one monotonic clock;
//   - lost updates: increments the register does not show at the end;
//   - stale accesses refused by the register's fence check, for strategies
//     whose leases carry fence numbers (a refusal is the fence doing its job);
//   - liveness: a stretch of time in which clients keep trying and nobody
//     acquires, classified as a deadlock (the key has no TTL) or starvation
//     (the key has a TTL that failed attempts keep pushing forward).
//
// # Process mode
//
// With Options.Processes every client is a separate OS process (the hidden
// "locklab worker" command, or any program that calls Worker), so a pause is
// a real SIGSTOP of the whole process, continued with SIGCONT PauseFor later,
// and a crash is a real SIGKILL, after which a replacement process is
// started. Workers run the lock against the servers' addresses themselves
// and report each step as a JSON line on stdout; the parent stamps each line
// on its own monotonic clock as it arrives. Workers are killed when the run
// ends, when ctx is done, and by the kernel if the parent dies (Pdeathsig);
// a worker whose stdin closes exits too.
//
// The register stays in the parent: a worker's two accesses (the read when
// it enters the critical section, the write when it leaves) are requests on
// its stdout that the parent answers on its stdin, after checking the fence
// and the overlap exactly as for goroutine clients. Keeping it in the parent
// rather than under a key on the first node means node faults (a restart
// that wipes the node, a pause, a partition) hit only the lock, never the
// measuring instrument, and one checker serves both modes.
//
// What the timing means: the interval the parent checks for overlaps runs
// from the register's read to its write, both performed by the parent under
// one mutex, so the order it sees is the order in which the resource was
// accessed. Each such interval lies inside the worker's real hold (the read
// is requested after the acquire returned; the release is sent after the
// write was answered), so pipe latency narrows the measured intervals
// rather than widening them: an overlap reported is a real overlap of two
// holds (at the moment of the second read, both were holding), but two
// holds that overlapped by less than the pipe round trip, without
// interleaving their register accesses, are not reported. Those are
// overlaps that did no damage at the resource. The timeline's event times,
// "acquires" and "releases" included, are arrival times and lag the
// workers' real steps by the pipe latency (plus any scheduling delay of the
// parent).
//
// # Node faults
//
// Options.Faults injects node faults during a run, in goroutine or process
// mode, one at a time, drawn from the seed: a node paused, killed and
// restarted with or without its data, or partitioned, for FaultFor, then
// resumed, started again or healed. Each fault is in Report.NodeFaults and
// in the timelines (as client NodeFaultClient).
//
// # Sentinel failover
//
// With Options.Sentinels the lock lives on the master of a Redis Sentinel
// group (a master, its asynchronous replicas and the Sentinels watching
// them), found through a locklab.SentinelPool, and the node fault
// node.Failover freezes that master (SIGSTOP, docker pause) while clients
// hold and take the lock on it. The Sentinels promote a replica; the old
// master is then thawed and, until the Sentinels demote it to a replica
// (some 8s later), still answers as a master whoever reaches it: the
// clients whose requests waited for it, and those that have not yet asked
// the Sentinels again. For that while two masters grant the lock, each to
// its own clients, and the register counts what that does.
package stress

import (
	"context"
	"fmt"
	"maps"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gomodule/redigo/redis"

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
	// freezes the master until the Sentinels promote a replica (see
	// "Sentinel failover" in the package documentation). A Sentinel group
	// has one master: multi-node strategies are refused.
	Sentinels *node.SentinelGroup
}

// Progress is a snapshot during a run.
type Progress struct {
	Elapsed    time.Duration
	Cycles     int64
	Violations int64
}

// Event is one line of the timeline around a violation.
type Event struct {
	At     time.Duration `json:"at"`
	Client int           `json:"client"`
	What   string        `json:"what"`
}

// Violation is the first occurrence of one kind of violation.
type Violation struct {
	Kind     string        `json:"kind"`
	At       time.Duration `json:"at"`
	Detail   string        `json:"detail"`
	Timeline []Event       `json:"timeline,omitempty"`
}

// Report is the outcome of a run.
type Report struct {
	Strategy      string           `json:"strategy"`
	Clients       int              `json:"clients"`
	TTL           time.Duration    `json:"ttl"`
	Elapsed       time.Duration    `json:"elapsed"`
	Cycles        int64            `json:"cycles"`
	Throughput    float64          `json:"cycles_per_second"`
	AcquireP50    time.Duration    `json:"acquire_p50"`
	AcquireP99    time.Duration    `json:"acquire_p99"`
	Errors        int64            `json:"errors"`
	Pauses        int64            `json:"pauses"`
	Crashes       int64            `json:"crashes"`
	Overlaps      int64            `json:"overlapping_holds"`
	LostUpdates   int64            `json:"lost_updates"`
	FenceRefusals int64            `json:"fence_refusals"`
	Liveness      string           `json:"liveness,omitempty"`
	NodeFaults    []NodeFault      `json:"node_faults,omitempty"`
	Counts        map[string]int64 `json:"violations"`
	First         []Violation      `json:"first"`
	// InFaults counts, by kind, the violations seen while a node fault
	// was in progress (from its beginning until it was healed), and
	// FirstInFaults is the first of each kind among them.
	InFaults      map[string]int64 `json:"violations_in_faults,omitempty"`
	FirstInFaults []Violation      `json:"first_in_faults,omitempty"`
}

// Violated reports whether any violation was seen.
func (r *Report) Violated() bool { return len(r.First) > 0 }

// Violation kinds.
const (
	KindOverlap    = "overlapping holds"
	KindLostUpdate = "lost update"
	KindDeadlock   = "deadlock"
	KindStarvation = "starvation"
)

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
	if err := o.checkSentinels(); err != nil {
		return err
	}
	if err := o.faultDefaults(); err != nil {
		return err
	}
	if o.PauseProb > 1 || o.CrashProb > 1 {
		return locklab.Invalid("probabilities must be at most 1")
	}
	_, err := strategies.Info(o.Strategy)
	return err
}

// Run stresses the strategy until the duration or cycle count is reached, a
// liveness violation ends the run, or ctx is done. A violation is a result,
// not an error.
func Run(ctx context.Context, o Options) (*Report, error) {
	if err := o.defaults(); err != nil {
		return nil, err
	}
	if o.Sentinels != nil {
		if err := addClientUser(ctx, o.Sentinels); err != nil {
			return nil, err
		}
		sp, err := o.sentinelPool()
		if err != nil {
			return nil, err
		}
		defer sp.Close()
		o.Nodes = []locklab.ConnSource{sp}
	}
	desc, _ := strategies.Info(o.Strategy)
	if err := flush(ctx, o.Nodes); err != nil {
		return nil, err
	}
	r := newRecorder(o)
	ctx, cancel := context.WithTimeout(ctx, o.Duration)
	defer cancel()
	r.stop = cancel

	var wg sync.WaitGroup
	if len(o.Faults) > 0 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.faults(ctx)
		}()
	}
	for i := 0; i < o.Clients; i++ {
		wg.Add(1)
		go func(id int) {
			defer wg.Done()
			if o.Processes {
				r.worker(ctx, cancel, id)
			} else {
				r.client(ctx, cancel, id, desc)
			}
		}(i)
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
loop:
	for {
		select {
		case <-done:
			break loop
		case <-tick.C:
			if o.Progress != nil {
				o.Progress(r.progress())
			}
			if kind, ok := r.stuck(ctx, desc); ok {
				r.violate(kind, fmt.Sprintf("nobody acquired %q for %v while clients kept trying", o.Key, o.Stuck))
				r.liveness = kind
				cancel()
			}
		}
	}
	if err := r.fatalErr(); err != nil {
		return nil, err
	}
	return r.report(), nil
}

// flush empties every node so a run starts from a clean key space.
func flush(ctx context.Context, nodes []locklab.ConnSource) error {
	for i, n := range nodes {
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

// recorder holds the shared state of a run: the register, the intervals of
// the critical sections, the counters and the recent events.
type recorder struct {
	o     Options
	start time.Time
	stop  context.CancelFunc

	cycles, errs, pauses, crashes atomic.Int64
	lastAcquire                   atomic.Int64 // ns since start
	workerReady                   atomic.Int64 // ns since start: the latest worker process up
	workersUp                     atomic.Int64 // worker processes up and trying
	// faulting is set while a node fault is injected; faultEnded is when
	// the last one ended (ns since start). Liveness is not judged during a
	// fault, and the stuck window starts again when it ends.
	faulting   atomic.Bool
	faultEnded atomic.Int64

	mu       sync.Mutex
	inside   map[int]time.Duration // clients in the critical section, since when
	value    int64                 // the register
	maxFence int64
	writes   int64 // accepted writes
	overlaps int64
	fenceRef int64
	latency  []time.Duration
	counts   map[string]int64
	first    []Violation
	inFaults map[string]int64
	firstIn  []Violation
	recent   []Event // ring of the last events
	liveness string
	nfaults  []NodeFault
	fatal    error
}

// fail ends the run with an error rather than a report.
func (r *recorder) fail(err error) {
	r.mu.Lock()
	if r.fatal == nil {
		r.fatal = err
	}
	r.mu.Unlock()
	r.stop()
}

func (r *recorder) fatalErr() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.fatal
}

func newRecorder(o Options) *recorder {
	return &recorder{o: o, start: time.Now(), inside: map[int]time.Duration{}, counts: map[string]int64{}, inFaults: map[string]int64{}}
}

func (r *recorder) now() time.Duration { return time.Since(r.start) }

const recentEvents = 16

// event records a timeline line; the caller holds r.mu.
func (r *recorder) event(client int, what string) {
	e := Event{At: r.now(), Client: client, What: what}
	if len(r.recent) == recentEvents {
		copy(r.recent, r.recent[1:])
		r.recent = r.recent[:recentEvents-1]
	}
	r.recent = append(r.recent, e)
}

// violateLocked counts n violations of a kind and keeps the first of each
// kind with the events before it; the caller holds r.mu.
func (r *recorder) violateLocked(kind string, n int64, detail string) {
	var v *Violation
	keep := func() Violation {
		if v == nil {
			v = &Violation{Kind: kind, At: r.now(), Detail: detail, Timeline: append([]Event(nil), r.recent...)}
		}
		return *v
	}
	if r.counts[kind] == 0 {
		r.first = append(r.first, keep())
	}
	r.counts[kind] += n
	if r.faulting.Load() {
		if r.inFaults[kind] == 0 {
			r.firstIn = append(r.firstIn, keep())
		}
		r.inFaults[kind] += n
	}
	if r.o.StopOnViolation && r.stop != nil {
		r.stop()
	}
}

func (r *recorder) violate(kind string, detail string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.violateLocked(kind, 1, detail)
}

// stuck reports a liveness violation: nobody acquired for o.Stuck, not
// counting the time spent inside an injected node fault (a lock that a
// fault alone makes unobtainable is no violation until the fault is over)
// nor the time before the latest worker process was up (starting one takes
// a while on a loaded machine; a crashed worker's successor is not kept
// from the lock before it tries).
func (r *recorder) stuck(ctx context.Context, desc strategies.Description) (string, bool) {
	if r.liveness != "" || ctx.Err() != nil || r.faulting.Load() || (r.o.Processes && r.workersUp.Load() == 0) {
		return "", false
	}
	last := time.Duration(max(r.lastAcquire.Load(), r.faultEnded.Load(), r.workerReady.Load()))
	if r.now()-last < r.o.Stuck {
		return "", false
	}
	// A key without TTL never frees itself: deadlock. One with a TTL that
	// keeps being pushed forward: starvation.
	c, err := r.o.Nodes[0].GetContext(ctx)
	if err != nil {
		return "", false
	}
	defer c.Close()
	pttl, err := redis.Int64(c.Do("PTTL", r.o.Key))
	if err != nil {
		return "", false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if pttl == -1 {
		return KindDeadlock, true
	}
	return KindStarvation, true
}

func (r *recorder) progress() Progress {
	r.mu.Lock()
	defer r.mu.Unlock()
	var v int64
	for _, n := range r.counts {
		v += n
	}
	return Progress{Elapsed: r.now(), Cycles: r.cycles.Load(), Violations: v}
}

func (r *recorder) report() *Report {
	r.mu.Lock()
	defer r.mu.Unlock()
	el := r.now()
	rep := &Report{
		Strategy: r.o.Strategy, Clients: r.o.Clients, TTL: r.o.TTL, Elapsed: el,
		Cycles: r.cycles.Load(), Errors: r.errs.Load(),
		Pauses: r.pauses.Load(), Crashes: r.crashes.Load(),
		Overlaps: r.overlaps, LostUpdates: r.counts[KindLostUpdate], FenceRefusals: r.fenceRef,
		Liveness: r.liveness, Counts: map[string]int64{}, First: append([]Violation(nil), r.first...),
		NodeFaults: append([]NodeFault(nil), r.nfaults...),
	}
	for k, v := range r.counts {
		rep.Counts[k] = v
	}
	if len(r.inFaults) > 0 {
		rep.InFaults = maps.Clone(r.inFaults)
		rep.FirstInFaults = append([]Violation(nil), r.firstIn...)
	}
	if el > 0 {
		rep.Throughput = float64(rep.Cycles) / el.Seconds()
	}
	if n := len(r.latency); n > 0 {
		l := append([]time.Duration(nil), r.latency...)
		sort.Slice(l, func(i, j int) bool { return l[i] < l[j] })
		rep.AcquireP50 = l[n/2]
		rep.AcquireP99 = l[min(n-1, n*99/100)]
	}
	return rep
}
