// The explorer: runs many schedules of a case, every one within the bounds
// (depth-first with preemption bounding: prefix.go) or a random sample, and
// keeps the shortest counterexample.

package harness

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/locklab/locklab/lockkit"
)

// observeRun, in the reduction's tests, sees every explored run's history
// as it ends, with a read of a key of the run's node 1 before the next run
// empties it.
var observeRun func(h *History, get func(key string) (any, error))

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
	// twin[i] is the lowest-numbered client interchangeable with client
	// i (symmetry.go), i itself where none is; nil: no symmetry.
	twin []int
	// The workers (worker): their context and nodes, the most that run,
	// which of their databases are in use, which of them hold room in
	// the pool, which run on servers lent to them alone (moreNodes) in
	// its stead, how many run, and the pool they take room in (nil: all
	// of them run from the start).
	ctx     context.Context
	nodes   []Node
	workers int
	inUse   []bool
	pooled  []bool
	lent    []bool
	running int
	wg      sync.WaitGroup
	pool    *workerPool
	// first is the place in the walk's order (prefix.order) of the first
	// violation found so far, under StopAtFirst; ran the runs counted
	// until then, to count those up to it at the end.
	first []int32
	ran   []ranRun
}

// Explore runs many schedules of a scenario on a strategy: all of them
// within the bounds (preemption bounding: schedules switch clients at most
// MaxPreemptions times beyond the natural order), or a random sample.
func Explore(ctx context.Context, opts ExploreOptions) (*ExploreResult, error) {
	e, err := newExplorer(opts)
	if err != nil {
		return nil, err
	}
	workers, err := e.placeWorkers(ctx)
	if err != nil {
		return nil, err
	}
	e.stack = []prefix{{used: make([]int, len(e.alphabet))}}
	e.start = time.Now()
	e.runWorkers(workers)
	if e.err != nil {
		return nil, e.err
	}
	e.countToFirst()
	r := &e.res
	r.Scenario, r.Strategy = e.sc.Name, opts.Case.Strategy.Name
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

// newExplorer checks opts and makes the explorer of its case: the runs'
// spec with opts' clients and steps, the bounds with their defaults (the
// scenario's where it sets them), the fault alphabet, and the reductions
// that apply.
func newExplorer(opts ExploreOptions) (*explorer, error) {
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
	if e.sleepSets && !opts.NoSymmetry && opts.Case.Symmetric {
		e.twin = twins(spec, e.alphabet)
	}
	return e, nil
}

// placeWorkers sets the explorer's context, nodes and worker slots, and
// returns how many workers start at once: opts.Workers (one where the
// scenario needs nodes that no moreNodes lends), or one on a pool, which
// it takes a place of unless the first worker runs outside it (poolFree).
func (e *explorer) placeWorkers(ctx context.Context) (int, error) {
	opts := e.opts
	nodes := opts.Case.nodesFor(opts.Nodes)
	workers := min(max(opts.Workers, 1), MaxWorkers)
	if len(e.sc.Needs) > 0 && opts.moreNodes == nil {
		workers = 1
	}
	e.ctx, e.nodes, e.workers, e.pool = ctx, nodes, workers, opts.pool
	e.inUse, e.pooled, e.lent = make([]bool, workers), make([]bool, workers), make([]bool, workers)
	if e.pool != nil {
		// One worker to begin with, more as the pool has room (pool.go);
		// a cell whose nodes keep an append-only file for it runs one.
		if !opts.poolFree {
			if err := e.pool.acquire(ctx); err != nil {
				return 0, err
			}
			e.pooled[0] = true
		}
		if e.spec.appendFsync != "" {
			e.workers = 1
		}
		workers = 1
	}
	return workers, nil
}

// runWorkers starts workers workers and waits for every worker to end,
// calling opts.Progress meanwhile about four times a second.
func (e *explorer) runWorkers(workers int) {
	// The progress goroutine is waited for, not only told to stop: a call
	// it has begun ends before the last one (Done) and before Explore
	// returns, so the callback never runs concurrently with itself or
	// after its caller has moved on.
	stopProgress := make(chan struct{})
	var progressWG sync.WaitGroup
	if progress := e.opts.Progress; progress != nil {
		progressWG.Go(func() {
			t := time.NewTicker(250 * time.Millisecond)
			defer t.Stop()
			for {
				select {
				case <-stopProgress:
					return
				case <-t.C:
					progress(e.progress(false))
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
}

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
		if (e.pooled[w] || e.lent[w]) && e.busy > 0 {
			// Nothing waits: the worker gives its room in the pool (or
			// its server) back, and the one still running goes on (a
			// busy worker comes back here).
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
			x := ranRun{order: p.order, commands: h.Commands(), skipped: skipped, mirrored: h.mirrored, redundant: h.redundant, trace: h.trace}
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
	r.Schedules, r.Skipped, r.Mirrored, r.Redundant, r.Commands, r.Violations = 0, 0, 0, 0, 0, 1
	r.Traces, r.traces = 0, nil
	for _, x := range e.ran {
		if slices.Compare(x.order, e.first) <= 0 {
			r.add(x)
		}
	}
	r.Complete = false
}

// worker runs schedules on database DB+w of the nodes (on a store other
// than Redis, key suffix w: storeKeySuffix) until the exploration is
// over, or, when it holds room in a pool, until nothing waits for it.
func (e *explorer) worker(w int) {
	defer e.wg.Done()
	defer func() {
		e.mu.Lock()
		pooled := e.pooled[w]
		e.inUse[w], e.pooled[w], e.lent[w] = false, false, false
		e.running--
		e.cond.Broadcast()
		e.mu.Unlock()
		if pooled {
			e.pool.release()
		}
	}()
	nodes := e.nodes
	if w > 0 && e.lendsServers() {
		// A fault strikes every run on its server: this worker's runs
		// have servers of their own, or it does not start.
		more, give, ok, err := e.opts.moreNodes(e.ctx)
		if err != nil {
			e.fail(err)
			return
		}
		if !ok {
			return // none free now: a later grow asks again
		}
		defer func() {
			if err := give(); err != nil {
				e.fail(err)
			}
		}()
		nodes = e.opts.Case.nodesFor(more)
	}
	sl, err := newSlot(nodes, e.opts.DB+w, e.opts.Case.Strategy.Name, e.alphabet)
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
