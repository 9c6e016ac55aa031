// Sleep sets under the preemption bound: the explorer's reduction by
// independence (docs/reduction.md argues it).
//
// Where a run takes step v and leaves alternative a to another run, the
// schedules of a's run that take v later, after steps all independent of
// v, are schedules of this run's subtree in another order: a's run keeps
// v asleep until it takes a step that depends on v, and never takes v
// before. Sleep sets alone (Godefroid 1996) are sound for an unbounded
// search; under a preemption bound they are not (Coons, Musuvathi and
// McKinley 2013): the schedule that covers a pruned one may switch
// clients more often than the bound allows. So v goes to sleep in a's run
// only when the covering schedule costs no more preemptions than any it
// covers (pendingAlt.keeps).

package harness

import "slices"

// sleeper is a step asleep in a run, with what it did where it was taken
// (which is what it does wherever it is still asleep: every step taken
// since is independent of it).
type sleeper struct {
	step Step
	eff  stepEffect
}

// awake returns the sleepers that stay asleep after a step that did eff:
// those independent of it.
func awake(sleep []sleeper, eff stepEffect) []sleeper {
	var out []sleeper
	for _, s := range sleep {
		if independent(s.eff, eff) {
			out = append(out, s)
		}
	}
	return out
}

// isAsleep reports whether st is among sleep.
func isAsleep(sleep []sleeper, st Step) bool {
	return slices.ContainsFunc(sleep, func(s sleeper) bool { return s.step == st })
}

// pendingAlt is an alternative a run left at a choice, which learns what
// the step the run took there did once that step is over.
type pendingAlt struct {
	child int  // its index among the run's children
	step  Step // the alternative's step
	// cost is what choosing the alternative there cost (1: a
	// preemption), taken what the step the run took cost, and nodeCost
	// what the alternative costs right after a step of a client that
	// cannot go on (its own client's choice of node).
	cost, taken, nodeCost int
}

// keeps reports whether the step v the run took, which did eff and after
// which enabled could run, goes to sleep in the alternative's run.
//
// A schedule of that run that takes v late, x·a·w·v·z (w independent of
// v), is covered by x·v·a·w·z in this run's subtree, which takes the same
// faults and steps. Its cost differs only where the two choose v, a, and
// z's first step: the cover pays taken + c(a after v) + c(z₁ after w's
// last), the pruned schedule cost + c(v after w's last) + c(z₁ after v).
// When w's last client can go on, c(v after it) is 1 and c(z₁ after it)
// at most 1; when it cannot, both are their own clients' node costs,
// the second at most c(z₁ after v). Either way the cover costs no more
// than the pruned schedule when taken + c(a after v) <= cost, where c(a
// after v) is 1 if v's client can go on, else a's node cost. v and a are
// steps of two clients (independent steps always are).
func (a pendingAlt) keeps(v Step, eff stepEffect, enabled []Step) bool {
	if !v.IsClient() || v.Client == a.step.Client {
		return false
	}
	after := a.nodeCost
	if eff.enabledAfter {
		after = 1
	}
	return a.taken+after <= a.cost
}

// pendingFault is a fault a run left to another run at a choice, where
// it took a client's step v instead.
//
// The fault's run may keep v asleep when v is independent of the fault:
// a schedule x·f·w·v·z it prunes (w independent of v, so of other clients
// than v's, and free of v) is covered by x·v·f·w·z in this run's subtree,
// which branches to f right after v (the caller sees that it does: a
// choice follows v, outside a transaction) with the same faults and
// steps. A fault costs no preemption and leaves the last client as it
// was, so the two costs differ only where they choose v, w's first client
// step w₁, and z's first (as in pendingAlt.keeps): the cover pays c(v
// after x) + c(w₁ after v), the pruned schedule c(w₁ after x) and, as in
// keeps, no less than the cover for z's first. The cover costs no more
// when pendingAlt.keeps holds for v against w₁ as an alternative at the
// choice, for every w₁ that could be: the steps of the other clients
// there (others).
type pendingFault struct {
	child  int          // its index among the run's children
	others []pendingAlt // the other clients' steps at the choice, as alternatives
}

// keeps reports whether the step v the run took, which did eff and after
// which enabled could run, goes to sleep in the fault's run.
func (f pendingFault) keeps(v Step, eff stepEffect, enabled []Step) bool {
	if !v.IsClient() {
		return false
	}
	for _, a := range f.others {
		if !a.keeps(v, eff, enabled) {
			return false
		}
	}
	return true
}

// nodePreemptive reports whether choosing st is a preemption within its
// own client: a node other than the client's first outstanding one.
func nodePreemptive(st Step, enabled []Step) bool {
	for _, x := range enabled {
		if x.Client == st.Client {
			return x.Node != st.Node
		}
	}
	return false
}

// continuation is the step a run takes where it is not following a
// prefix: the default order's step (the client that ran last, else the
// lowest), or when that one is asleep the first awake step the bound
// allows, a step that costs nothing first. ok is false when there is
// none: every schedule from here that begins with an awake step within
// the bound is an alternative, and the others run elsewhere.
func (e *explorer) continuation(r *run, enabled, awakeSteps []Step, preem int) (Step, bool) {
	def, ok := r.defaultStepLocked(enabled)
	if ok && slices.Contains(awakeSteps, def) {
		return def, true
	}
	for _, limit := range []bool{false, true} {
		for _, st := range awakeSteps {
			pre := preemptive(st, r.last, enabled)
			if pre == limit && (!pre || preem+1 <= e.opts.MaxPreemptions) {
				return st, true
			}
		}
	}
	return Step{}, false
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
