// What each step of a run did, as the explorer's reduction needs it: what
// its store says it touched, and what the harness saw happen before the
// next step (a clock read, a client taking or leaving the critical
// section, a write to the resource, a crash).

package harness

import (
	"slices"
	"strconv"
	"time"
)

// The names the harness adds to a step's Touch: the critical section
// (which clients hold the lock, the order in which they took it) and the
// protected resource.
const (
	touchHolders  = "harness:holders"
	touchResource = "harness:resource"
	touchClock    = "harness:clock"
	// touchRunning is whether some client has a step to come. A fault
	// is taken only at a choice, where some client has a step to run, so
	// the last client's last step disables every fault: a step after
	// which its client has no step to run writes it, and isolate, rejoin
	// and pause read it. Taken as independent of them, that step slept
	// across a rejoin that followed another client's last step, in favour
	// of the schedule that takes it first, where nothing can follow that
	// other client's last step; the trace with the rejoin between them
	// was lost (partitioned-holder-guarded on setnx-forever, whose waiter
	// gives up after one GET; TestReductionKeepsCounterexamples).
	touchRunning = "harness:running"
)

// touchNet names client id's reach: whether a partition cuts it off, or a
// pause stops it. Every step of the client reads it; isolate, rejoin and
// pause write it.
func touchNet(id int) string { return "harness:net:c" + strconv.Itoa(id) }

// stepEffect is what a step of a run did.
type stepEffect struct {
	// client is the step's client (0 for an event: an event conflicts
	// with every step, but an isolate, a rejoin or a pause, which writes
	// only its client's reach, and a time step its store says what it
	// touches of (timeTouch), and with another event always).
	client int
	// touch is what the step read and wrote, its store's declaration and
	// the harness's together; nil: everything.
	touch *Touch
	// enabledAfter: the step's client had a step to run right after it.
	enabledAfter bool
}

// independent reports whether steps that did a and b give the same
// outcome in either order, from any state both are enabled in: steps of
// two clients, or a step of a client and an event, that touch nothing the
// other writes. Two events are never independent: the scenario orders its
// faults (Scenario.FaultAfter), and the explorer keeps them in order.
func independent(a, b stepEffect) bool {
	if a.touch == nil || b.touch == nil || a.client == b.client {
		return false // two events, or two steps of one client
	}
	return !forgotten(a.touch).Conflicts(forgotten(b.touch))
}

// forget, in the reduction's tests, names a resource the reduction
// pretends no step touches: the dependency left out on purpose that the
// tests must see missed.
var forget func(name string) bool

// forgotten is t without what forget names.
func forgotten(t *Touch) *Touch {
	if forget == nil {
		return t
	}
	keep := func(ns []string) []string {
		var out []string
		for _, n := range ns {
			if !forget(n) {
				out = append(out, n)
			}
		}
		return out
	}
	return &Touch{Reads: keep(t.Reads), Writes: keep(t.Writes)}
}

// effectMarks are the run's counters at the start of a step, which the
// effect of the step compares with what they are when the step is over.
type effectMarks struct {
	clockReads, holderChanges, writes, crashes int
	inRelease                                  bool // the step's client was releasing
	// time is what a time step touches, said before it ran (timeTouch);
	// nil: everything, or not a time step.
	time *Touch
}

// markLocked records the counters as a step begins; c is the step's
// client (nil for an event).
func (r *run) markLocked(c *client) {
	r.marks = effectMarks{clockReads: r.clockReads, holderChanges: r.holderChanges,
		writes: len(r.hist.Writes), crashes: r.crashes, inRelease: c != nil && c.inRelease}
}

// noteEffectLocked records the effect of the run's last step, once every
// client has settled after it; enabled are the steps that can run next.
//
// Beyond what the store declared, a step:
//   - after which a client read its clock writes the clock: the clock
//     ticks once after each such step (run.clock), so the time a client
//     reads depends on the steps that read before it, which keep their
//     order;
//   - after which a client crashed touches everything too (a store ends a
//     crashed client's sessions);
//   - after which a client took the lock or left it writes the holders,
//     and one of a releasing client reads them (a wrongful release is one
//     that removes the lock of a client holding it);
//   - after which the resource took a write writes the resource;
//   - of a client reads its network (touchNet);
//   - after which its client has no step to run writes whether the run
//     has any (touchRunning).
//
// An event conflicts with every step, except an isolate, a rejoin or a
// pause after which nothing else happened (reachEvent), which writes its
// client's network and reads whether the run has steps to come, and a
// time step after which nothing else happened on a store that says what
// it touches (timeTouch).
func (r *run) noteEffectLocked(enabled []Step) {
	n := min(len(r.hist.Events), len(r.steps))
	for len(r.effects) < n-1 {
		// Steps whose end was not seen on its own: they touch
		// everything.
		r.effects = append(r.effects, stepEffect{})
	}
	i := len(r.effects)
	if i >= n {
		return
	}
	ev, st, m := r.hist.Events[i], r.steps[i], r.marks
	eff := stepEffect{}
	if st.IsClient() {
		eff.client = ev.Client
		for _, x := range enabled {
			eff.enabledAfter = eff.enabledAfter || x.Client == ev.Client
		}
		if ev.Touch != nil && r.crashes == m.crashes {
			// The declared names are the store's: the harness's are
			// added to copies.
			t := &Touch{Reads: slices.Clip(ev.Touch.Reads), Writes: slices.Clip(ev.Touch.Writes)}
			if r.clockReads != m.clockReads {
				t.Writes = append(t.Writes, touchClock)
			}
			if r.holderChanges != m.holderChanges {
				t.Writes = append(t.Writes, touchHolders)
			}
			if m.inRelease {
				t.Reads = append(t.Reads, touchHolders)
			}
			if len(r.hist.Writes) != m.writes {
				t.Writes = append(t.Writes, touchResource)
			}
			t.Reads = append(t.Reads, touchNet(ev.Client))
			if !eff.enabledAfter {
				t.Writes = append(t.Writes, touchRunning)
			}
			eff.touch = t
		}
	} else if reachEvent(st.Kind) && r.quietSince(m) {
		eff.touch = &Touch{Reads: []string{touchRunning}, Writes: []string{touchNet(st.Client)}}
	} else if st.Kind == StepTime && m.time != nil && r.quietSince(m) {
		eff.touch = m.time
	}
	r.effects = append(r.effects, eff)
}

// timeTouch is what a time step of d touches, asked before it runs: nil
// (everything) unless the store says (TimeToucher). Beside the store's
// names, the step
//   - writes the clock: every clock read after it is d later, so a step
//     after which a client reads its clock keeps its order with it (a step
//     that reads none commutes with it: the ticks depend on the steps
//     that read, not on the time steps between them, run.clock);
//   - writes the holders: a lease that ends on its holder's clock within d
//     leaves the critical section, so the holders after a step that takes
//     or leaves the lock, or the victim a release's check sees, depend on
//     which side of the time step it falls;
//   - writes the reach (touchNet) of each client whose steps the store
//     says it changes otherwise (their sessions end);
//   - reads whether the run has steps to come, as every fault does
//     (touchRunning).
//
// The store is not asked, and the step touches everything, where the run
// renews leases as time passes (renew.go: the renewals send requests of
// their own), or a client waits for an event of its store (Client.Wait),
// which what the step does may bring. And it touches everything where
// something else happened in it after all (quietSince, noteEffectLocked).
func (r *run) timeTouch(d time.Duration) *Touch {
	tt, ok := r.slot.store.(TimeToucher)
	if !ok || r.spec.renew {
		return nil
	}
	r.mu.Lock()
	waiting := slices.ContainsFunc(r.cls, func(c *client) bool { return c.waiting && !c.done && !c.crashed })
	r.mu.Unlock()
	if waiting {
		return nil
	}
	st, cut := tt.TimeTouch(d)
	if st == nil {
		return nil
	}
	t := r.unsuffixed(&Touch{Reads: slices.Clone(st.Reads), Writes: slices.Clone(st.Writes)})
	t.Reads = append(t.Reads, touchRunning)
	t.Writes = append(t.Writes, touchClock, touchHolders)
	for _, c := range cut {
		t.Writes = append(t.Writes, touchNet(c.ID()))
	}
	return t
}

// reachEvent reports whether an event of kind k changes only whether its
// client's steps run or reach the nodes: an isolate or a rejoin (its
// requests are cut off, or reach them again), a pause (it takes no step).
// Its client's own steps read that (touchNet); no other client's step
// does, and a store reads it only in Advance, at a time step, another
// event, as a renewal runs only there. A resume conflicts with every
// step: it is also the step the scheduler takes by default when nothing
// else can run (defaultStepLocked), which the argument for the faults
// that commute (docs/reduction.md) does not cover; taken as independent,
// it lost traces of the plain walk (TestReductionKeepsCounterexamples).
func reachEvent(k StepKind) bool {
	if pausesConflict && k == StepPause {
		return false
	}
	return k == StepIsolate || k == StepRejoin || k == StepPause
}

// pausesConflict, in the reduction's tests, takes pauses as conflicting
// with every step, as the harness did before reachEvent counted them: the
// walk the tests measure the saving against.
var pausesConflict bool

// quietSince reports whether nothing the harness watches happened since
// the marks m were taken: no clock read, no client taking or leaving the
// lock, no write to the resource, no crash.
func (r *run) quietSince(m effectMarks) bool {
	return r.clockReads == m.clockReads && r.holderChanges == m.holderChanges &&
		len(r.hist.Writes) == m.writes && r.crashes == m.crashes
}

// localTouch is what a client's local action touches on the store:
// nothing (what follows it, the harness's own effect included, is the
// step's effect), except a sleep, which moves the time of every node.
func localTouch(local string) *Touch {
	if len(local) >= 5 && local[:5] == "sleep" {
		return nil
	}
	return &Touch{}
}
