// The explorer's depth-first walk: each run follows a prefix, then the
// default order, and hands back the prefixes that branch off it within the
// bounds (preemptions, faults); with the reduction, a run does not branch
// while a client is inside a transaction.

package harness

import (
	"context"
	"fmt"
	"slices"
	"time"
)

// prefix is the start of a schedule for a run to replay, with the
// preemptions and faults it has spent.
type prefix struct {
	steps  Schedule
	preem  int
	faults int
	used   []int // uses of each fault of the alphabet
	// sleep are the steps asleep where the prefix's last step was chosen,
	// before that step: the run keeps those its last step is independent
	// of (sleep.go).
	sleep []sleeper
	// order is the prefix's place in the walk's order: the indexes of the
	// alternatives that lead to it from the first run (a run comes before
	// its alternatives, the first of them before the second).
	order []int32
}

// preemptive reports whether choosing st after client last, with enabled
// steps, is a preemption.
func preemptive(st Step, last int, enabled []Step) bool {
	if !st.IsClient() {
		return false
	}
	lastEnabled := false
	for _, x := range enabled {
		if x.Client == last {
			lastEnabled = true
		}
	}
	if lastEnabled && st.Client != last {
		return true
	}
	// Within one client, a node other than its first outstanding one.
	for _, x := range enabled {
		if x.Client == st.Client {
			return x.Node != st.Node
		}
	}
	return false
}

// runPrefix runs p, then the default schedule, and returns the prefixes
// that branch off the default schedule within the bounds.
//
// Unless NoReduction is set (or ticksNegligible fails: e.atomic is then
// false), a run does not branch while a client is inside
// a transaction (after a MULTI that succeeded, up to its EXEC or DISCARD):
// that client's next command runs. Every schedule that would branch there
// is equivalent to one the explorer runs, of the same length or shorter,
// within the same bounds:
//
//   - The queued commands change nothing another client or the checkers
//     can see: Redis answers QUEUED and applies them all at EXEC. A step of
//     another client, or an event, taken inside the transaction has the
//     effect it has when taken just before the MULTI, and the transaction
//     then has the effect it had. Moving those steps before the MULTI
//     keeps the schedule's length and its faults, and adds no preemption:
//     the switch away from the transaction's client becomes a switch away
//     from whoever ran before the MULTI, or none.
//   - A fault that reaches the transaction's own connection (the client
//     crashes or is cut off, its node goes down or fails over) fails the
//     transaction, which then changed nothing: the same as the fault just
//     before the MULTI, where the client's attempt fails at its first
//     command, in as many steps or fewer.
//   - Steps moved before the MULTI read the clock as they did: the clock
//     ticks only after steps after which a client reads it (run.clock),
//     and the transaction's client reads none inside it, so every read
//     keeps the steps that read before it. Lease ends are decided by
//     whole seconds (ticksNegligible; otherwise the explorer branches
//     everywhere): the ticks a run adds stay below the margin between a
//     lease's end and the next whole second of virtual time.
//
// Beside it, the runs keep sleep sets (sleep.go, docs/reduction.md): a
// step taken where another was left to an alternative's run sleeps in
// that run until a step that depends on it runs.
//
// So the verdict of every cell, and the length of its shortest
// counterexample, are the plain enumeration's (TestReductionKeepsCounterexamples
// checks it on every cell of the matrix). The alternatives not taken are
// counted in skipped.
func (e *explorer) runPrefix(ctx context.Context, spec runSpec, sl *slot, p prefix) (*History, []prefix, int, error) {
	pr := &prefixRun{e: e, p: p, preem: p.preem, faults: p.faults, used: slices.Clone(p.used)}
	r := newRun(ctx, spec, sl)
	h, err := r.execute(pr.choose)
	if err != nil {
		return nil, nil, 0, fmt.Errorf("schedule %q: %w", p.steps, err)
	}
	r.mu.Lock()
	h.trace = traceKey(r.steps, r.effects, pr.chosen)
	h.mirrored = pr.mirrored
	r.mu.Unlock()
	return h, pr.children, pr.skipped, nil
}

// prefixRun is what runPrefix's chooser keeps along one run of prefix p:
// the alternatives it leaves (children, skipped, mirrored), the bounds
// used so far, and the sleep sets.
type prefixRun struct {
	e                 *explorer
	p                 prefix
	children          []prefix
	skipped, mirrored int
	preem, faults     int
	used              []int
	// The sleep set (sleep.go): the steps this run does not take where it
	// stands, and the alternatives of the last choice, which learn what
	// the step taken there did once it is over.
	asleep     []sleeper
	lastAlts   []pendingAlt
	lastFaults []pendingFault
	lastTaken  Step
	chosen     int // the steps this choose took, the prefix's included
}

// choose is the run's chooser: p's steps, then the default schedule's,
// leaving the alternatives within the bounds to children.
func (pr *prefixRun) choose(r *run, enabled []Step) (st Step, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	i := len(r.steps)
	defer func() { pr.chosen = i + b2i(ok) }()
	if pr.e.sleepSets && i > 0 && i > len(pr.p.steps)-1 {
		pr.learnLocked(r, i, enabled)
	}
	pr.lastAlts, pr.lastFaults = nil, nil
	if i < len(pr.p.steps) {
		return pr.p.steps[i], true
	}
	if len(enabled) == 0 {
		return r.defaultStepLocked(enabled)
	}
	def, ok, defCost := pr.branchLocked(r, enabled)
	if !ok {
		// Every step this run could take here has its schedules run
		// elsewhere: the run ends, its alternatives kept.
		r.redundant = true
		return Step{}, false
	}
	pr.preem += defCost
	pr.lastTaken = def
	return def, true
}

// learnLocked updates the sleep sets once step i-1 is over, its effects
// known: at the end of p, the sleepers p inherited that it wakes; past
// it, the last choice's alternatives and faults in whose runs the step
// taken sleeps, and the sleepers it wakes.
func (pr *prefixRun) learnLocked(r *run, i int, enabled []Step) {
	eff := r.effects[i-1]
	if i == len(pr.p.steps) {
		pr.asleep = awake(pr.p.sleep, eff)
		return
	}
	// The faults this run left where it took lastTaken: it
	// sleeps in their runs when this run branches to the same
	// faults right here, after it (faultsHere).
	faultsHere := len(enabled) > 0 && !(pr.e.atomic && r.transactionLocked() > 0)
	sleepIn := func(child int, keeps bool) {
		if keeps {
			pr.children[child].sleep = append(pr.children[child].sleep, sleeper{step: pr.lastTaken, eff: eff})
		}
	}
	for _, a := range pr.lastAlts {
		sleepIn(a.child, a.keeps(pr.lastTaken, eff, enabled))
	}
	for _, f := range pr.lastFaults {
		sleepIn(f.child, faultsHere && f.keeps(pr.lastTaken, eff, enabled))
	}
	pr.asleep = awake(pr.asleep, eff)
}

// branchLocked picks the default step among enabled (the transaction's
// client's where one is open and the reduction applies), and keeps as
// children the alternatives within the bounds, awake and not mirrored,
// client steps and faults; inside a transaction they are only counted
// in skipped. It returns the default step, whether there is one to take,
// and its preemption cost.
func (pr *prefixRun) branchLocked(r *run, enabled []Step) (Step, bool, int) {
	e, preem := pr.e, pr.preem
	cost := func(st Step) int {
		if st.IsClient() && preemptive(st, r.last, enabled) {
			return 1
		}
		return 0
	}
	awakeSteps := enabled
	if len(pr.asleep) > 0 {
		awakeSteps = slices.DeleteFunc(slices.Clone(enabled), func(st Step) bool { return isAsleep(pr.asleep, st) })
	}
	def, ok := e.continuation(r, enabled, awakeSteps, preem)
	atomic := false
	if tx := r.transactionLocked(); tx > 0 && e.atomic {
		for _, st := range enabled {
			if st.Client == tx {
				def, ok, atomic = st, !isAsleep(pr.asleep, st), true
				break
			}
		}
	}
	var alts []prefix
	var infos []pendingAlt
	base := slices.Clone(r.steps)
	for _, alt := range awakeSteps {
		if ok && alt == def {
			continue
		}
		if e.mirrored(alt, r.steps, def, ok, awakeSteps, cost, e.opts.MaxPreemptions-preem) {
			pr.mirrored++
			continue
		}
		c := cost(alt)
		np := preem + c
		if np > e.opts.MaxPreemptions {
			continue
		}
		infos = append(infos, pendingAlt{child: len(alts), step: alt, cost: c, taken: cost(def), nodeCost: b2i(nodePreemptive(alt, enabled))})
		alts = append(alts, prefix{steps: append(slices.Clone(base), alt), preem: np, faults: pr.faults, used: slices.Clone(pr.used), sleep: slices.Clone(pr.asleep)})
	}
	faultAlts, faultInfos := e.faultAlternatives(base, enabled, def, ok, cost, pr.asleep, preem, pr.faults, pr.used)
	for i := range faultInfos {
		faultInfos[i].child += len(alts)
	}
	alts = append(alts, faultAlts...)
	if atomic {
		pr.skipped += len(alts)
	} else {
		for _, a := range infos {
			a.child += len(pr.children)
			pr.lastAlts = append(pr.lastAlts, a)
		}
		for _, f := range faultInfos {
			f.child += len(pr.children)
			pr.lastFaults = append(pr.lastFaults, f)
		}
		pr.children = append(pr.children, alts...)
	}
	return def, ok, cost(def)
}

// faultAlternatives returns the prefixes that take, after base, each fault
// the bounds and the scenario's order still allow at a choice where the
// run takes def (when ok) with asleep asleep, and the pendingFault of each
// (child: its index among them), which learns whether def sleeps in it.
//
// The steps asleep at the choice stay asleep after the fault, if it turns
// out independent of them (an isolate, a rejoin or a pause of another
// client, a time step that touches none of what they did: effect.go):
// the fault costs no preemption and leaves the last client as
// it was, so keeps' argument holds with it among the steps taken before
// the sleeper.
func (e *explorer) faultAlternatives(base Schedule, enabled []Step, def Step, ok bool, cost func(Step) int, asleep []sleeper, preem, faults int, used []int) ([]prefix, []pendingFault) {
	if faults >= e.opts.MaxFaults {
		return nil, nil
	}
	var others []pendingAlt // every step another client than def's could take here
	for _, st := range enabled {
		if ok && st.Client != def.Client {
			others = append(others, pendingAlt{step: st, cost: cost(st), taken: cost(def), nodeCost: b2i(nodePreemptive(st, enabled))})
		}
	}
	var alts []prefix
	var infos []pendingFault
	for k, f := range e.alphabet {
		if used[k] > 0 && alphabetCount(e.alphabet, f) <= used[k] || !e.ready(k, used) {
			continue
		}
		u := slices.Clone(used)
		u[k]++
		if ok {
			infos = append(infos, pendingFault{child: len(alts), others: others})
		}
		alts = append(alts, prefix{steps: append(slices.Clone(base), f), preem: preem, faults: faults + 1, used: u, sleep: slices.Clone(asleep)})
	}
	return alts, infos
}

// ticksNegligible reports whether the condition of the reduction's last
// point holds (runPrefix): every duration of the case is a whole number of
// seconds, and a run's ticks, the liveness probe's included (400 steps at
// most), add up to less than one.
func (e *explorer) ticksNegligible() bool {
	whole := func(d time.Duration) bool { return d%time.Second == 0 }
	if !whole(e.spec.ttl) || time.Duration(e.spec.maxSteps+400)*stepTick >= time.Second {
		return false
	}
	for _, f := range e.alphabet {
		if !whole(f.Dur) {
			return false
		}
	}
	for _, p := range e.spec.programs {
		for _, op := range p {
			if !whole(op.Dur) {
				return false
			}
		}
	}
	return true
}

// transactionLocked returns the client whose next command is inside a
// transaction (0: none).
func (r *run) transactionLocked() int {
	for _, c := range r.cls {
		if c.done || c.crashed {
			continue
		}
		for _, q := range c.pending {
			if q.owner != nil && q.owner.multi {
				return c.id
			}
		}
	}
	return 0
}

func alphabetCount(a []Step, f Step) int {
	n := 0
	for _, x := range a {
		if x == f {
			n++
		}
	}
	return n
}
