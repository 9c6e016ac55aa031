// The explorer: runs many schedules of a case, every one within the bounds
// (depth-first with preemption bounding: prefix.go) or a random sample, and
// keeps the shortest counterexample.

package harness

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/locklab/locklab/lockkit"
)

// ExploreOptions bound and steer an exploration.
type ExploreOptions struct {
	// Case is what to explore.
	Case Case
	// Nodes are the servers to run on (at least the scenario's count).
	Nodes []Node
	// Random samples Samples schedules at random from Seed instead of
	// enumerating them (Samples 0: the default 200).
	Random  bool
	Samples int
	Seed    uint64
	// Clients, when more than the scenario's own, adds contenders that run
	// the program of the scenario's last client (0: the scenario's own;
	// fewer than its own is refused).
	Clients int
	// MaxSteps bounds the steps of one schedule (0: the default 60).
	MaxSteps int
	// MaxPreemptions bounds how often a schedule switches away from a
	// client that could have gone on (0: the default 2; -1: none). A
	// multi-node client sending to a node other than its lowest
	// outstanding one counts too.
	MaxPreemptions int
	// MaxFaults bounds the fault events per schedule (0: the scenario's
	// own bound; -1: none).
	MaxFaults int
	// MaxSchedules stops the exploration after that many schedules
	// (0: the default 20000); the result is then not Complete.
	MaxSchedules int
	// Workers run schedules in parallel, each on its own database of the
	// nodes, or on a store other than Redis on a key of its own
	// (storeKeySuffix) (0: the default 1; at most 16; 1 when the scenario
	// needs node faults).
	Workers int
	// DB is the first database the workers use (worker w uses DB+w).
	DB int
	// NoReduction turns the reduction off (docs/reduction.md): no sleep
	// sets, and runs branch inside transactions too (runPrefix): every
	// schedule within the bounds runs, as in a plain enumeration.
	NoReduction bool
	// StopAtFirst ends the exploration at the first violation in the
	// walk's order: with several workers, as with one, the schedules run
	// and counted are those up to it, and it is the counterexample
	// (a random sample stops at the first one any worker finds).
	StopAtFirst bool
	// Progress, when set, is called about every 250ms and at the end.
	Progress func(ExploreProgress)
	// pool, when set, is the matrix's pool of runs (pool.go): the
	// exploration starts with one worker and takes more, up to Workers,
	// while the pool has room. poolFree: the first worker runs outside
	// the pool (a cell of a store other than Redis: its lane), the others
	// take room in it.
	pool     *workerPool
	poolFree bool
}

// observeRun, in the reduction's tests, sees every explored run's history
// as it ends, with a read of a key of the run's node 1 before the next run
// empties it.
var observeRun func(h *History, get func(key string) (any, error))

// ExploreProgress is what the progress callback sees.
type ExploreProgress struct {
	Schedules  int
	Violations int
	Elapsed    time.Duration
	PerSecond  float64
	Done       bool
}

// ExploreResult is what an exploration found.
type ExploreResult struct {
	Scenario string `json:"scenario"`
	Strategy string `json:"strategy"`
	// Schedules is the number of schedules run; Violations how many of
	// them failed the scenario's property.
	Schedules  int           `json:"schedules"`
	Violations int           `json:"violations"`
	Elapsed    time.Duration `json:"elapsed_ns"`
	PerSecond  float64       `json:"schedules_per_second"`
	// Skipped is how many alternatives the runs did not take because a
	// client was inside a transaction (runPrefix): each is a subtree of
	// schedules that the plain enumeration would run and that are
	// equivalent to schedules run. Naive is the number of schedules the
	// plain enumeration would run within the same bounds when it is known
	// without running it: Schedules, when nothing was skipped and the
	// exploration is complete; 0 otherwise.
	Skipped int   `json:"skipped"`
	Naive   int64 `json:"naive"`
	// Redundant is how many of the schedules run ended early, every step
	// they could take next being one whose schedules run elsewhere (the
	// sleep sets of docs/reduction.md). explore's text says it; its JSON
	// keeps its schema.
	Redundant int `json:"-"`
	// Traces is how many Mazurkiewicz traces the schedules run that did
	// not end early fall into (traces.go): the fewest schedules a
	// reduction by independence could run to cover them. explore's text
	// says it; its JSON keeps its schema.
	Traces int `json:"-"`
	traces map[uint64]bool
	// Commands is the number of Redis commands the clients sent in all.
	Commands int `json:"commands"`
	// Complete: every schedule within the bounds ran.
	Complete bool `json:"complete"`
	// Outcome is the kind of the failure, or SAFE when none of the
	// schedules run failed: safe within the bound only when Complete, which
	// Headline tells.
	Outcome Outcome `json:"outcome"`
	// Counterexample is the shortest failing run found.
	Counterexample *History `json:"counterexample,omitempty"`
}

type explorer struct {
	opts     ExploreOptions
	sc       *Scenario
	spec     runSpec
	alphabet []Step
	// after[k] is the fault alphabet[k] waits for (Scenario.FaultAfter).
	after   []string
	mu      sync.Mutex
	cond    *sync.Cond
	stack   []prefix
	busy    int
	res     ExploreResult
	stopped bool
	err     error
	start   time.Time
	atomic  bool // no branching inside transactions (runPrefix)
	// sleepSets: the runs keep sleep sets (sleep.go).
	sleepSets bool
	// The workers (worker): their context and nodes, the most that run,
	// which of their databases are in use, which of them hold room in
	// the pool, how many run, and the pool they take room in (nil: all
	// of them run from the start).
	ctx     context.Context
	nodes   []Node
	workers int
	inUse   []bool
	pooled  []bool
	running int
	wg      sync.WaitGroup
	pool    *workerPool
	// first is the place in the walk's order (prefix.order) of the first
	// violation found so far, under StopAtFirst; ran the runs counted
	// until then, to count those up to it at the end.
	first []int32
	ran   []ranRun
}

// ranRun is what a run of an exploration that stops at its first
// violation adds to the result, kept until the end says whether it
// counts (it does when it comes before the first violation).
type ranRun struct {
	order             []int32
	commands, skipped int
	redundant         bool
	trace             uint64
}

// Explore runs many schedules of a scenario on a strategy: all of them
// within the bounds (preemption bounding: schedules switch clients at most
// MaxPreemptions times beyond the natural order), or a random sample.
func Explore(ctx context.Context, opts ExploreOptions) (*ExploreResult, error) {
	if err := opts.check(); err != nil {
		return nil, err
	}
	if err := opts.Case.check(opts.Nodes); err != nil {
		return nil, err
	}
	sc, spec := opts.Case.Scenario, opts.Case.spec()
	if opts.MaxSteps > 0 {
		spec.maxSteps = opts.MaxSteps
	}
	if opts.Clients > 0 {
		if opts.Clients < len(spec.programs) {
			return nil, lockkit.Invalid("explore: Clients %d: scenario %s has %d clients; more can be added, none removed", opts.Clients, sc.Name, len(spec.programs))
		}
		progs := slices.Clone(spec.programs)
		for len(progs) < opts.Clients {
			progs = append(progs, progs[len(progs)-1])
		}
		spec.programs = progs
	}
	spec.stopEarly = true
	e := &explorer{opts: opts, sc: sc, spec: spec}
	e.cond = sync.NewCond(&e.mu)
	if e.opts.MaxPreemptions == 0 {
		e.opts.MaxPreemptions = 2
	}
	if e.opts.MaxPreemptions < 0 || sc.NoPreemption {
		e.opts.MaxPreemptions = 0
	}
	if sc.MaxPreemptions > 0 {
		e.opts.MaxPreemptions = min(e.opts.MaxPreemptions, sc.MaxPreemptions)
	}
	switch {
	case e.opts.MaxFaults == 0:
		e.opts.MaxFaults = sc.MaxFaults
	case e.opts.MaxFaults < 0:
		e.opts.MaxFaults = 0
	}
	if e.opts.MaxSchedules <= 0 {
		e.opts.MaxSchedules = 20000
	}
	if e.opts.Samples <= 0 {
		e.opts.Samples = 200
	}
	var err error
	if e.alphabet, err = sc.alphabet(); err != nil {
		return nil, err
	}
	e.after = make([]string, len(e.alphabet))
	for k, f := range e.alphabet {
		e.after[k] = sc.FaultAfter[f.String()]
	}
	e.atomic = !e.opts.NoReduction && e.ticksNegligible()
	e.sleepSets = e.atomic
	nodes := opts.Case.nodesFor(opts.Nodes)
	workers := min(max(opts.Workers, 1), MaxWorkers)
	if len(sc.Needs) > 0 {
		workers = 1
	}
	e.ctx, e.nodes, e.workers, e.pool = ctx, nodes, workers, opts.pool
	e.inUse, e.pooled = make([]bool, workers), make([]bool, workers)
	if e.pool != nil {
		// One worker to begin with, more as the pool has room (pool.go);
		// a cell whose nodes keep an append-only file for it runs one.
		if !opts.poolFree {
			if err := e.pool.acquire(ctx); err != nil {
				return nil, err
			}
			e.pooled[0] = true
		}
		if spec.appendFsync != "" {
			e.workers = 1
		}
		workers = 1
	}
	e.stack = []prefix{{used: make([]int, len(e.alphabet))}}
	e.start = time.Now()
	// The progress goroutine is waited for, not only told to stop: a call
	// it has begun ends before the last one (Done) and before Explore
	// returns, so the callback never runs concurrently with itself or
	// after its caller has moved on.
	stopProgress := make(chan struct{})
	var progressWG sync.WaitGroup
	if opts.Progress != nil {
		progressWG.Go(func() {
			t := time.NewTicker(250 * time.Millisecond)
			defer t.Stop()
			for {
				select {
				case <-stopProgress:
					return
				case <-t.C:
					opts.Progress(e.progress(false))
				}
			}
		})
	}
	e.mu.Lock()
	for w := 0; w < workers; w++ {
		e.inUse[w] = true
		e.running++
		e.wg.Add(1)
		go e.worker(w)
	}
	e.mu.Unlock()
	e.wg.Wait()
	close(stopProgress)
	progressWG.Wait()
	if e.err != nil {
		return nil, e.err
	}
	e.countToFirst()
	r := &e.res
	r.Scenario, r.Strategy = sc.Name, opts.Case.Strategy.Name
	r.Elapsed = time.Since(e.start)
	if r.Elapsed > 0 {
		r.PerSecond = float64(r.Schedules) / r.Elapsed.Seconds()
	}
	if r.Complete && !e.opts.Random && r.Skipped == 0 && !e.sleepSets {
		r.Naive = int64(r.Schedules)
	}
	r.Outcome = Safe
	if r.Counterexample != nil {
		r.Outcome = r.Counterexample.Verdict.Outcome
	}
	if opts.Progress != nil {
		opts.Progress(e.progress(true))
	}
	return r, nil
}

// MaxWorkers is the most ExploreOptions.Workers: a worker per database of
// a default redis-server.
const MaxWorkers = 16

// check refuses options out of their range with locklab.ErrInvalid, rather
// than running with a bound the caller did not ask for: the zero value of
// each bound is its default, -1 means none for MaxPreemptions and
// MaxFaults, and every other negative value is refused, as are more than
// MaxWorkers workers.
func (o ExploreOptions) check() error {
	return checkBounds("explore",
		bound{"Clients", o.Clients, 0, 0, "0 (the scenario's own) or more"},
		bound{"MaxSteps", o.MaxSteps, 0, 0, "0 (the default) or more"},
		bound{"MaxPreemptions", o.MaxPreemptions, -1, 0, "-1 (none), 0 (the default) or more"},
		bound{"MaxFaults", o.MaxFaults, -1, 0, "-1 (none), 0 (the scenario's) or more"},
		bound{"MaxSchedules", o.MaxSchedules, 0, 0, "0 (the default) or more"},
		bound{"Samples", o.Samples, 0, 0, "0 (the default) or more"},
		bound{"Workers", o.Workers, 0, MaxWorkers, fmt.Sprintf("0 (the default) to %d", MaxWorkers)},
		bound{"DB", o.DB, 0, 0, "0 or more"},
	)
}

// bound is an integer option, the least value it takes and the most (0:
// no most), and what a message says it takes.
type bound struct {
	field       string
	v           int
	least, most int
	want        string
}

// checkBounds refuses the first of bounds out of its range with
// lockkit.ErrInvalid, the message prefixed with what ("explore").
func checkBounds(what string, bounds ...bound) error {
	for _, b := range bounds {
		if b.v < b.least || (b.most > 0 && b.v > b.most) {
			return lockkit.Invalid("%s: %s %d: want %s", what, b.field, b.v, b.want)
		}
	}
	return nil
}

// Headline is the word a report of the result opens with: the outcome of
// the counterexample when one was found; SAFE when every schedule within
// the bounds ran without a violation; INCOMPLETE when no schedule run
// failed but not every schedule within the bounds ran (MaxSchedules was
// reached, the run was a random sample, or it stopped early). An
// incomplete search never reads SAFE.
func (r *ExploreResult) Headline() string {
	switch {
	case r.Counterexample != nil:
		return string(r.Outcome)
	case !r.Complete:
		return Incomplete
	}
	return string(Safe)
}

// Incomplete is the headline of a search that found no violation without
// running every schedule within its bounds.
const Incomplete = "INCOMPLETE"

func (e *explorer) progress(done bool) ExploreProgress {
	e.mu.Lock()
	defer e.mu.Unlock()
	el := time.Since(e.start)
	p := ExploreProgress{Schedules: e.res.Schedules, Violations: e.res.Violations, Elapsed: el, Done: done}
	if el > 0 {
		p.PerSecond = float64(p.Schedules) / el.Seconds()
	}
	return p
}

// next hands out the next prefix to run; ok=false when the exploration is
// over.
func (e *explorer) next(w int) (prefix, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for {
		if e.stopped || e.res.Schedules+e.busy >= e.limit() {
			e.stopped = true
			e.cond.Broadcast()
			return prefix{}, false
		}
		if e.opts.Random {
			e.busy++
			return prefix{}, true
		}
		if n := len(e.stack); n > 0 {
			p := e.stack[n-1]
			e.stack = e.stack[:n-1]
			if e.pastFirst(p.order) {
				continue
			}
			e.busy++
			return p, true
		}
		if e.pooled[w] && e.busy > 0 {
			// Nothing waits: the worker gives its room back to the pool,
			// and the one still running goes on (a busy worker comes
			// back here).
			return prefix{}, false
		}
		if e.busy == 0 {
			e.res.Complete = e.first == nil
			e.cond.Broadcast()
			return prefix{}, false
		}
		e.cond.Wait()
	}
}

func (e *explorer) limit() int {
	if e.opts.Random {
		return min(e.opts.Samples, e.opts.MaxSchedules)
	}
	return e.opts.MaxSchedules
}

func (e *explorer) work(ctx context.Context, sl *slot, w int) {
	for {
		p, ok := e.next(w)
		if !ok {
			return
		}
		e.mu.Lock()
		n := e.res.Schedules + e.busy
		e.mu.Unlock()
		spec := e.spec
		spec.seed = e.opts.Seed
		var h *History
		var children []prefix
		var skipped int
		var err error
		if e.opts.Random {
			rng := rand.New(rand.NewPCG(e.opts.Seed, uint64(n)))
			h, err = e.runRandom(ctx, spec, sl, rng)
		} else {
			h, children, skipped, err = e.runPrefix(ctx, spec, sl, p)
		}
		if err == nil && observeRun != nil {
			e.mu.Lock() // one call at a time
			observeRun(h, func(key string) (any, error) { return sl.store.Probe(ctx, 0, key) })
			e.mu.Unlock()
		}
		e.mu.Lock()
		e.busy--
		if err != nil {
			if e.err == nil && !errors.Is(err, context.Canceled) {
				e.err = err
			} else if e.err == nil {
				e.err = err
			}
			e.stopped = true
		} else {
			x := ranRun{order: p.order, commands: h.Commands(), skipped: skipped, redundant: h.redundant, trace: h.trace}
			e.res.add(x)
			// Children are pushed in reverse so the first alternative
			// runs first; each comes after its parent in the walk's
			// order, and before its next sibling.
			for i := len(children) - 1; i >= 0; i-- {
				children[i].order = append(slices.Clip(p.order), int32(i))
				e.stack = append(e.stack, children[i])
			}
			e.growLocked()
			switch {
			case e.opts.StopAtFirst && !e.opts.Random:
				e.ran = append(e.ran, x)
				if h.Verdict.Failed() && (e.first == nil || slices.Compare(p.order, e.first) < 0) {
					// The walk alone would have stopped here, unless a
					// run before it in its order fails too: the runs
					// after it stop, those before it go on.
					e.first = p.order
					e.res.Counterexample = h
				}
			case h.Verdict.Failed():
				e.res.Violations++
				if shorter(h, e.res.Counterexample) {
					e.res.Counterexample = h
				}
				if e.opts.StopAtFirst {
					e.stopped = true
				}
			}
		}
		e.cond.Broadcast()
		e.mu.Unlock()
		if ctx.Err() != nil {
			e.mu.Lock()
			e.stopped = true
			if e.err == nil {
				e.err = ctx.Err()
			}
			e.cond.Broadcast()
			e.mu.Unlock()
			return
		}
	}
}

// pastFirst reports whether a run at order comes after the first violation
// found in the walk's order, under StopAtFirst: the walk alone never
// runs it. The caller holds e.mu.
func (e *explorer) pastFirst(order []int32) bool {
	return e.first != nil && slices.Compare(order, e.first) > 0
}

// countToFirst makes the result of an exploration that stopped at its
// first violation the walk's alone: the runs up to it in the walk's order,
// whichever workers ran them and whatever ran after it meanwhile.
func (e *explorer) countToFirst() {
	if e.first == nil {
		return
	}
	r := &e.res
	r.Schedules, r.Skipped, r.Redundant, r.Commands, r.Violations = 0, 0, 0, 0, 1
	r.Traces, r.traces = 0, nil
	for _, x := range e.ran {
		if slices.Compare(x.order, e.first) <= 0 {
			r.add(x)
		}
	}
	r.Complete = false
}

// add counts run x in the result.
func (r *ExploreResult) add(x ranRun) {
	r.Schedules++
	r.Skipped += x.skipped
	r.Commands += x.commands
	if x.redundant {
		r.Redundant++
		return
	}
	if r.traces == nil {
		r.traces = map[uint64]bool{}
	}
	if !r.traces[x.trace] {
		r.traces[x.trace] = true
		r.Traces++
	}
}

// worker runs schedules on database DB+w of the nodes (on a store other
// than Redis, key suffix w: storeKeySuffix) until the exploration is
// over, or, when it holds room in a pool, until nothing waits for it.
func (e *explorer) worker(w int) {
	defer e.wg.Done()
	defer func() {
		e.mu.Lock()
		pooled := e.pooled[w]
		e.inUse[w], e.pooled[w] = false, false
		e.running--
		e.cond.Broadcast()
		e.mu.Unlock()
		if pooled {
			e.pool.release()
		}
	}()
	sl, err := newSlot(e.nodes, e.opts.DB+w, e.alphabet)
	if err != nil {
		e.fail(err)
		return
	}
	defer func() {
		if err := sl.close(); err != nil {
			e.fail(err)
		}
	}()
	if e.spec.appendFsync != "" && e.workers == 1 {
		off, err := sl.keepAppendOnly(e.ctx, e.spec.appendFsync)
		if err != nil {
			e.fail(err)
			return
		}
		defer func() {
			if err := off(); err != nil {
				e.fail(err)
			}
		}()
	}
	e.work(e.ctx, sl, w)
}

// fail ends the exploration with err, unless it ended with an error before.
func (e *explorer) fail(err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.err == nil {
		e.err = err
	}
	e.stopped = true
	e.cond.Broadcast()
}

// shorter orders counterexamples: fewer steps up to the violation, then
// the schedule text.
func shorter(a, b *History) bool {
	if b == nil {
		return true
	}
	if a.Verdict.Step != b.Verdict.Step {
		return a.Verdict.Step < b.Verdict.Step
	}
	return a.Schedule < b.Schedule
}

// ready reports whether fault alphabet[k] may be inserted into a schedule
// that has used the faults used counts: the fault it waits for, if any,
// is among them.
func (e *explorer) ready(k int, used []int) bool {
	if e.after[k] == "" {
		return true
	}
	for j, f := range e.alphabet {
		if used[j] > 0 && f.String() == e.after[k] {
			return true
		}
	}
	return false
}

// runRandom picks every step at random: a client step, or with some
// probability one of the faults still unused.
func (e *explorer) runRandom(ctx context.Context, spec runSpec, sl *slot, rng *rand.Rand) (*History, error) {
	used := make([]int, len(e.alphabet))
	faults := 0
	choose := func(r *run, enabled []Step) (Step, bool) {
		r.mu.Lock()
		defer r.mu.Unlock()
		if len(enabled) == 0 {
			return r.defaultStepLocked(enabled)
		}
		if faults < e.opts.MaxFaults && len(e.alphabet) > 0 && rng.IntN(4) == 0 {
			k := rng.IntN(len(e.alphabet))
			if used[k] < alphabetCount(e.alphabet, e.alphabet[k]) && e.ready(k, used) {
				used[k]++
				faults++
				return e.alphabet[k], true
			}
		}
		return enabled[rng.IntN(len(enabled))], true
	}
	r := newRun(ctx, spec, sl)
	return r.execute(choose)
}
