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
//   - Steps moved before the MULTI run a few ticks (stepTick) earlier on
//     the virtual clock, and nothing else moves: the transaction's client
//     reads no clock inside it, so every pair of clock readings keeps its
//     order. When every duration readings are compared with (the TTL,
//     "time" events, skews, sleeps) is a whole number of seconds and a
//     run's ticks add up to less than one (ticksNegligible; otherwise the
//     explorer branches everywhere), two readings differ by whole seconds
//     plus less than a second of ticks: a comparison the shift could turn
//     is one that the ticks decide, by the readings' order, which the
//     shift keeps.
//
// So the verdict of every cell, and the length of its shortest
// counterexample, are the plain enumeration's (TestReductionKeepsCounterexamples
// checks it on every cell of the matrix). The alternatives not taken are
// counted in skipped.
func (e *explorer) runPrefix(ctx context.Context, spec runSpec, sl *slot, p prefix) (*History, []prefix, int, error) {
	var children []prefix
	skipped := 0
	preem, faults := p.preem, p.faults
	used := slices.Clone(p.used)
	choose := func(r *run, enabled []Step) (Step, bool) {
		r.mu.Lock()
		defer r.mu.Unlock()
		i := len(r.steps)
		if i < len(p.steps) {
			return p.steps[i], true
		}
		def, ok := r.defaultStepLocked(enabled)
		if !ok || len(enabled) == 0 {
			return def, ok
		}
		atomic := false
		if tx := r.transactionLocked(); tx > 0 && e.atomic {
			for _, st := range enabled {
				if st.Client == tx {
					def, atomic = st, true
					break
				}
			}
		}
		var alts []prefix
		base := slices.Clone(r.steps)
		for _, alt := range enabled {
			if alt == def {
				continue
			}
			np := preem
			if preemptive(alt, r.last, enabled) {
				np++
			}
			if np > e.opts.MaxPreemptions {
				continue
			}
			alts = append(alts, prefix{steps: append(slices.Clone(base), alt), preem: np, faults: faults, used: slices.Clone(used)})
		}
		if faults < e.opts.MaxFaults {
			for k, f := range e.alphabet {
				if used[k] > 0 && alphabetCount(e.alphabet, f) <= used[k] || !e.ready(k, used) {
					continue
				}
				u := slices.Clone(used)
				u[k]++
				alts = append(alts, prefix{steps: append(slices.Clone(base), f), preem: preem, faults: faults + 1, used: u})
			}
		}
		if atomic {
			skipped += len(alts)
		} else {
			children = append(children, alts...)
		}
		if def.IsClient() && preemptive(def, r.last, enabled) {
			preem++
		}
		return def, true
	}
	r := newRun(ctx, spec, sl)
	h, err := r.execute(choose)
	if err != nil {
		return nil, nil, 0, fmt.Errorf("schedule %q: %w", p.steps, err)
	}
	return h, children, skipped, nil
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
