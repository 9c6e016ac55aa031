// The run: one schedule of a case on its store, emptied. Run sets up the
// clients (client.go), whose operations their store submits as steps
// (store.go: Client.Send, Conn); the scheduler (scheduler.go) grants them one step at a time,
// events (events.go) change the world between steps, and at the end the
// checkers (check.go) judge the history (history.go).

package harness

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/locklab/locklab/harness/fault"
	"github.com/locklab/locklab/strategies"
)

// RunOptions describe one run of a scenario on a strategy.
type RunOptions struct {
	Case  Case
	Nodes []Node
	// Schedule overrides the scenario's schedule; after it runs out the
	// default order continues (the client that ran last goes on, else the
	// lowest-numbered one).
	Schedule string
	// Seed seeds the clients' token sources.
	Seed uint64
	// NoRecord skips reading the lock key on every node after every step
	// (which the timeline shows), to run faster.
	NoRecord bool
	// DB is the database to use on every node (default 0).
	DB int
}

// Run runs one schedule of a scenario on a strategy on fresh Redis state
// and returns its history, with the verdict of the scenario's property.
func Run(ctx context.Context, o RunOptions) (*History, error) {
	if err := o.Case.check(o.Nodes); err != nil {
		return nil, err
	}
	sc, spec := o.Case.Scenario, o.Case.spec()
	text := o.Schedule
	if text == "" {
		text = sc.Schedule
	}
	sched, err := ParseSchedule(text)
	if err != nil {
		return nil, err
	}
	spec.seed = o.Seed
	spec.record = !o.NoRecord
	sl, err := newSlot(o.Case.nodesFor(o.Nodes), o.DB, o.Case.Strategy.Name, sched)
	if err != nil {
		return nil, err
	}
	r := newRun(ctx, spec, sl)
	h, err := r.execute(explicit(sched))
	if cerr := sl.close(); cerr != nil && err == nil {
		return nil, cerr
	}
	return h, err
}

// explicit follows sched, skipping client steps that name a client with
// nothing to do, then continues in the default order.
func explicit(sched Schedule) chooser {
	i := 0
	return func(r *run, enabled []Step) (Step, bool) {
		r.mu.Lock()
		defer r.mu.Unlock()
		for i < len(sched) {
			st := sched[i]
			i++
			if !st.IsClient() || r.pickLocked(st) != nil {
				return st, true
			}
			r.hist.Skipped = append(r.hist.Skipped, fmt.Sprintf("step %d of the schedule (%s): nothing to run", i, st))
		}
		return r.defaultStepLocked(enabled)
	}
}

// stepTick is the virtual time the clock moves after a step after which a
// client reads it (run.clock).
const stepTick = time.Millisecond

// Epoch is where every virtual clock starts: runs do not depend on the
// wall clock.
var Epoch = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

// Factory builds the Locker under test from a Config the harness wraps:
// the registry's own factory type, so a resolved strategy's is used as is.
type Factory = strategies.Factory

var (
	errCrashed     = errors.New("client crashed")
	errStopped     = errors.New("run over")
	errUnreachable = errors.New("node unreachable")
)

// runSpec is everything one run needs.
type runSpec struct {
	strategy string
	scenario string
	factory  Factory
	multi    bool
	programs []Program
	key      string
	ttl      time.Duration
	seed     uint64
	record   bool
	fenced   bool
	// guarded: the resource is the store's, written with guarded writes
	// (Scenario.Guarded).
	guarded  bool
	property Property
	waiter   int
	maxSteps int
	// quiet is how long a multi-node client must stay unchanged before the
	// scheduler takes its outstanding commands as all there is.
	quiet time.Duration
	// stopEarly ends the run at the first safety violation.
	stopEarly bool
	// prepare: call the nodes' Prepare before each run (failover
	// scenarios: a replica in sync, then cut off).
	prepare bool
	// appendFsync: the nodes write an append-only file with this fsync
	// policy during the run.
	appendFsync string
	// noWatchdog: the strategy runs a watchdog unless told not to
	// (Config.NoWatchdog); the harness tells it. A watchdog renews on the
	// machine's clock, not the run's virtual one, and its extends would be
	// commands no schedule chose.
	noWatchdog bool
	// renew: the run renews the holders' leases as the strategy's default
	// watchdog would (renew.go), on a store that can.
	renew bool
}

// run is one execution of a runSpec in a slot: its clients, the steps taken
// and the virtual clock, the nodes it has taken down or faulted, and the
// history it records. execute drives it one chosen step at a time; mu
// guards its state.
type run struct {
	spec runSpec
	// stopping: the run is over, stop ends the clients still running.
	stopping bool
	// sealed: finish has judged the history; eventLocked writes no more.
	sealed bool
	slot   *slot
	ctx    context.Context
	mu     sync.Mutex
	wake   chan struct{}
	now    time.Duration // virtual time since Epoch
	hist   *History
	cls    []*client
	steps  Schedule
	down   []bool // node unreachable (killed, paused, partitioned)
	// faulted is the fault each node is under (0 for none): what the run
	// ends when it is over, so the next run finds every node up.
	faulted    []fault.Fault
	reqs       int
	acqs       int
	maxFence   int64
	lastWriter int // acquisition seq of the newest holder that wrote
	wg         sync.WaitGroup
	last       int // client of the previous client step
	err        error
	// What the steps did (effect.go): counters a step's effect compares,
	// the counters as the last step began, and each step's effect.
	clockReads, holderChanges, crashes int
	tickedAt                           int // the steps run when the clock last ticked
	marks                              effectMarks
	effects                            []stepEffect
	// redundant: the explorer ended the run where every step it could
	// take was one whose schedules run elsewhere (prefix.go).
	redundant bool
}

func newRun(ctx context.Context, spec runSpec, sl *slot) *run {
	shown := spec.key
	spec.key = sl.store.Key(spec.key + sl.keySuffix)
	if sl.keySuffix == "" {
		shown = spec.key // a Redis namespace's tag shows
	}
	r := &run{spec: spec, slot: sl, ctx: ctx, wake: make(chan struct{}, 1),
		down: make([]bool, len(sl.nodes)), faulted: make([]fault.Fault, len(sl.nodes)), tickedAt: -1}
	r.hist = &History{Strategy: spec.strategy, Scenario: spec.scenario, Key: shown, TTL: spec.ttl}
	for _, n := range sl.nodes {
		r.hist.Nodes = append(r.hist.Nodes, n.Name())
	}
	return r
}

func (r *run) notify() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// recordKeys stores the lock key's value on every node in the last event.
func (r *run) recordKeys() {
	r.mu.Lock()
	if len(r.hist.Events) == 0 {
		r.mu.Unlock()
		return
	}
	idx := len(r.hist.Events) - 1
	down := slices.Clone(r.down)
	r.mu.Unlock()
	keys := make([]string, len(r.slot.nodes))
	for i := range r.slot.nodes {
		if down[i] {
			keys[i] = "(down)"
			continue
		}
		v, err := r.probeKey(i + 1)
		switch {
		case err != nil:
			keys[i] = "?"
		case v == nil:
			keys[i] = "-"
		default:
			keys[i] = fmtValue(v)
		}
	}
	r.mu.Lock()
	r.hist.Events[idx].Keys = keys
	r.mu.Unlock()
}

// execute performs the run, asking choose for every step.
func (r *run) execute(choose chooser) (h *History, rerr error) {
	defer func() {
		r.stop()
		if err := r.endFaults(); err != nil && rerr == nil {
			h, rerr = nil, err
		}
	}()
	if r.spec.prepare {
		for i, n := range r.slot.nodes {
			if p, ok := n.(interface{ Prepare(context.Context) error }); ok {
				if err := p.Prepare(r.ctx); err != nil {
					return nil, fmt.Errorf("preparing %s: %w", n.Name(), err)
				}
				r.slot.store.Reconnect(i)
			}
		}
	}
	if r.spec.appendFsync != "" && r.slot.appendFsync != r.spec.appendFsync {
		if err := r.slot.appendOnly(r.ctx, true, r.spec.appendFsync); err != nil {
			return nil, err
		}
		defer func() {
			if err := r.slot.appendOnly(context.WithoutCancel(r.ctx), false, r.spec.appendFsync); err != nil && rerr == nil {
				h, rerr = nil, err
			}
		}()
	}
	if err := r.slot.store.Empty(r.ctx); err != nil {
		return nil, err
	}
	if r.spec.guarded {
		gs, ok := r.slot.store.(Guarded)
		if !ok {
			return nil, fmt.Errorf("scenario %s needs a guarded write, which the store of %s does not offer", r.spec.scenario, r.spec.strategy)
		}
		if err := gs.PrepareGuarded(r.ctx, r.spec.key); err != nil {
			return nil, err
		}
	}
	for _, p := range r.spec.programs {
		if _, err := r.addClient(p, false); err != nil {
			return nil, err
		}
	}
	if err := r.loopSteps(choose, r.spec.maxSteps); err != nil {
		return nil, err
	}
	if (r.spec.property == NoDeadlock || r.spec.property == NoStarvation) && !r.redundant {
		if err := r.livenessProbe(); err != nil {
			return nil, err
		}
	}
	r.stop()
	r.finish()
	return r.hist, nil
}

func (r *run) loopSteps(choose chooser, maxSteps int) error {
	for {
		if err := r.settle(); err != nil {
			return err
		}
		if r.spec.record {
			r.recordKeys()
		}
		r.mu.Lock()
		if len(r.hist.Events) > 0 {
			r.hist.Events[len(r.hist.Events)-1].Holders = r.holdersLocked()
		}
		n := len(r.hist.Events)
		enabled := r.enabledLocked()
		r.noteEffectLocked(enabled)
		r.mu.Unlock()
		if r.spec.stopEarly && r.violatedSoFar() {
			return nil
		}
		if n >= maxSteps {
			r.mu.Lock()
			more := len(enabled) > 0
			r.mu.Unlock()
			r.hist.Truncated = more
			return nil
		}
		st, ok := choose(r, enabled)
		if !ok {
			return nil
		}
		if st.IsClient() {
			if !r.grant(st) && !r.grantLate(st) {
				return fmt.Errorf("step %d (%s): nothing to run (enabled: %s)", n+1, st, Schedule(enabled))
			}
			continue
		}
		if err := r.event(st); err != nil {
			return err
		}
	}
}

// violatedSoFar checks the run's safety property on the history so far.
func (r *run) violatedSoFar() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch r.spec.property {
	case MutualExclusion:
		return checkMutualExclusion(r.hist).Failed()
	case ReleaseSafety:
		return len(r.hist.WrongRelease) > 0
	case Fencing:
		return checkFencing(r.hist).Failed()
	}
	return false
}

// livenessProbe lets every client finish, lets the TTL pass with nobody
// trying, and asks a fresh client to acquire once. A refused probe is not
// yet a deadlock: its own failed try may have changed the lock (a
// setnx-expire-always probe gives an orphaned key the TTL it lacked), so
// the TTL passes once more and a second fresh client tries. Only a lock
// that refuses both is reported as gone for ever.
func (r *run) livenessProbe() error {
	def := func(r *run, enabled []Step) (Step, bool) {
		r.mu.Lock()
		defer r.mu.Unlock()
		return r.defaultStepLocked(enabled)
	}
	if err := r.loopSteps(def, len(r.hist.Events)+200); err != nil {
		return err
	}
	for try := 1; try <= probeTries; try++ {
		if err := r.event(Step{Kind: StepTime, Dur: 2*r.spec.ttl + 2*time.Second}); err != nil {
			return err
		}
		p, err := r.addClient(Program{{Kind: OpAcquire, Attempts: 1}}, true)
		if err != nil {
			return err
		}
		if err := r.loopSteps(def, len(r.hist.Events)+200); err != nil {
			return err
		}
		r.mu.Lock()
		got := p.info.Acquired > 0
		r.hist.Probe = &got
		r.hist.ProbeTries = try
		r.mu.Unlock()
		if got {
			return nil
		}
	}
	return nil
}

// probeTries is how many fresh clients the liveness probe sends, each after
// a quiet TTL, before it calls the lock unobtainable.
const probeTries = 2

// stop ends every client still running and waits for their loops.
func (r *run) stop() {
	r.mu.Lock()
	r.stopping = true
	for _, c := range r.cls {
		if !c.done {
			for _, q := range c.pending {
				q.err = errStopped
				close(q.done)
			}
			c.pending = nil
			c.done = true
			c.cancel()
		}
	}
	r.mu.Unlock()
	r.wg.Wait()
}

func (r *run) finish() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sealed = true
	r.hist.Schedule = r.steps.String()
	for _, c := range r.cls {
		c.info.Crashed = c.crashed
		r.hist.Clients = append(r.hist.Clients, c.info)
	}
	v := checkProperty(r.hist, r.spec.property, r.spec.waiter)
	if r.redundant && (r.spec.property == NoDeadlock || r.spec.property == NoStarvation) {
		// A run the explorer ended early has no end state to judge
		// liveness on: the schedules that reach its end run elsewhere.
		v = Verdict{Outcome: Safe, Property: r.spec.property}
	}
	r.hist.Verdict = v
	r.hist.redundant = r.redundant
	markViolation(r.hist, v)
}

// markViolation marks the event where a failed verdict shows.
func markViolation(h *History, v Verdict) {
	if v.Failed() && v.Step > 0 && v.Step <= len(h.Events) && h.Events[v.Step-1].Violation == "" {
		h.Events[v.Step-1].Violation = string(v.Property)
	}
}
