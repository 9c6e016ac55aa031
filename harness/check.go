// The checkers: each property (mutual exclusion, release safety, fencing,
// deadlock and starvation freedom) judged on a history, and the verdict
// they reach.

package harness

import (
	"fmt"
)

// Outcome is the verdict of a property on a run, or of a strategy on a
// scenario within the explored bound.
type Outcome string

// The outcomes.
const (
	Safe       Outcome = "SAFE"
	Violated   Outcome = "VIOLATED"
	Deadlock   Outcome = "DEADLOCK"
	Starvation Outcome = "STARVATION"
	NA         Outcome = "n/a"
	Error      Outcome = "ERROR"
)

// Property is what a checker verifies.
type Property string

// The properties the checkers verify.
const (
	// MutualExclusion: never two clients inside the critical section.
	MutualExclusion Property = "mutual-exclusion"
	// ReleaseSafety: no release removes a lock its client did not hold.
	ReleaseSafety Property = "release"
	// Fencing: the protected resource never accepts a write from a holder
	// that was superseded by one whose write it already accepted, nor a
	// fence number smaller than one it accepted.
	Fencing Property = "fencing"
	// NoDeadlock: once every holder has crashed and the TTL has passed, a
	// new client can acquire.
	NoDeadlock Property = "deadlock-freedom"
	// NoStarvation: a client that keeps trying while the holder is gone
	// eventually gets the lock.
	NoStarvation Property = "starvation-freedom"
)

// Verdict is what the checkers concluded about a run.
type Verdict struct {
	Outcome  Outcome  `json:"outcome"`
	Property Property `json:"property,omitempty"`
	// Step is where the violation shows (0 for none).
	Step    int    `json:"step,omitempty"`
	Message string `json:"message,omitempty"`
}

// Failed reports whether the verdict is a violation of some kind.
func (v Verdict) Failed() bool {
	return v.Outcome == Violated || v.Outcome == Deadlock || v.Outcome == Starvation
}

func (v Verdict) String() string {
	if v.Message == "" {
		return string(v.Outcome)
	}
	return fmt.Sprintf("%s (%s): %s", v.Outcome, v.Property, v.Message)
}

// checkMutualExclusion fails at the first step after which two clients are
// inside the critical section at once.
func checkMutualExclusion(h *History) Verdict {
	for _, e := range h.Events {
		if len(e.Holders) >= 2 {
			return Verdict{Outcome: Violated, Property: MutualExclusion, Step: e.Step,
				Message: fmt.Sprintf("clients %s hold the lock at once after step %d (%s)", clientList(e.Holders), e.Step, e.Label)}
		}
	}
	return Verdict{Outcome: Safe, Property: MutualExclusion}
}

// checkRelease fails when a release removed the lock of another client that
// was inside its critical section.
func checkRelease(h *History) Verdict {
	if len(h.WrongRelease) == 0 {
		return Verdict{Outcome: Safe, Property: ReleaseSafety}
	}
	w := h.WrongRelease[0]
	return Verdict{Outcome: Violated, Property: ReleaseSafety, Step: w.Step,
		Message: fmt.Sprintf("c%d's release deleted c%d's lock on n%d at step %d", w.Client, w.Victim, w.Node, w.Step)}
}

// releaseProbe is what was seen around one command of a release that ran
// while another client (the victim) held the lock: whether the victim's
// hold was the lock on the node before and after the command.
type releaseProbe struct {
	client, victim, node  int
	heldBefore, heldAfter bool
	victimHolds           bool // the victim still held its lease after the command
}

// checkReleaseStep is the wrongful-release check of one step of h: when
// the command of event ended the victim's hold of the lock while the
// victim held it, it records a WrongRelease, which checkRelease then
// reports, and notes it in the event.
func checkReleaseStep(h *History, event int, p releaseProbe) bool {
	if !p.heldBefore || p.heldAfter || !p.victimHolds {
		return false
	}
	e := &h.Events[event]
	h.WrongRelease = append(h.WrongRelease, WrongRelease{Client: p.client, Victim: p.victim, Step: e.Step, Node: p.node})
	e.Notes = append(e.Notes, fmt.Sprintf("c%d deleted c%d's lock", p.client, p.victim))
	return true
}

// tokenHolds reports whether v, what a store's Probe read of the lock key,
// is the hold whose Lease.Token is token.
func tokenHolds(v any, token string) bool {
	switch x := v.(type) {
	case string:
		return x == token
	case []byte:
		return string(x) == token
	}
	return false
}

// checkFencing fails when the resource accepted a write carrying a smaller
// fence than one it had accepted, or accepted a write from a holder whose
// successor had already written.
func checkFencing(h *History) Verdict {
	var max int64
	for _, w := range h.Writes {
		if !w.Accepted {
			continue
		}
		if w.Fence < max {
			return Verdict{Outcome: Violated, Property: Fencing, Step: w.Step,
				Message: fmt.Sprintf("resource accepted c%d's fence %d after fence %d", w.Client, w.Fence, max)}
		}
		if w.Stale {
			return Verdict{Outcome: Violated, Property: Fencing, Step: w.Step,
				Message: fmt.Sprintf("resource accepted a stale write from c%d (fence %d) after its successor wrote", w.Client, w.Fence)}
		}
		max = w.Fence
	}
	return Verdict{Outcome: Safe, Property: Fencing}
}

// checkDeadlock fails when the liveness probe, run after every client
// finished and the TTL passed, could not acquire, neither at its first try
// nor at a second one a TTL after it. A lock that refused the first probe
// and took the second came back by itself (the refused try repaired it):
// that is a delay, not a deadlock, and the verdict says so.
func checkDeadlock(h *History) Verdict {
	if h.Probe != nil && !*h.Probe {
		return Verdict{Outcome: Deadlock, Property: NoDeadlock, Step: len(h.Events),
			Message: "after every holder was gone and the TTL passed, a new client could not acquire, nor could a second one a TTL later"}
	}
	if h.Probe != nil && h.ProbeTries > 1 {
		return Verdict{Outcome: Safe, Property: NoDeadlock,
			Message: "the first probe was refused, and a second acquired a TTL later: the lock came back by itself"}
	}
	return Verdict{Outcome: Safe, Property: NoDeadlock}
}

// checkStarvation fails when client waiter never acquired although the lock
// was free for the taking once the holders were gone (the liveness probe
// acquired it after a quiet TTL).
func checkStarvation(h *History, waiter int) Verdict {
	for _, c := range h.Clients {
		if c.ID != waiter {
			continue
		}
		if c.Acquired == 0 && c.Attempts > 0 && (h.Probe == nil || *h.Probe) && !c.Crashed {
			return Verdict{Outcome: Starvation, Property: NoStarvation, Step: len(h.Events),
				Message: fmt.Sprintf("c%d tried %d times and never got the lock, yet it was free once nobody tried", waiter, c.Attempts)}
		}
	}
	return Verdict{Outcome: Safe, Property: NoStarvation}
}

// checkProperty runs the checker of p on h.
func checkProperty(h *History, p Property, waiter int) Verdict {
	switch p {
	case MutualExclusion:
		return checkMutualExclusion(h)
	case ReleaseSafety:
		return checkRelease(h)
	case Fencing:
		return checkFencing(h)
	case NoDeadlock:
		return checkDeadlock(h)
	case NoStarvation:
		if v := checkDeadlock(h); v.Failed() {
			return v
		}
		return checkStarvation(h, waiter)
	}
	return Verdict{Outcome: Error, Property: p, Message: "unknown property"}
}

func clientList(ids []int) string {
	s := ""
	for i, id := range ids {
		if i > 0 {
			s += " and "
		}
		s += fmt.Sprintf("c%d", id)
	}
	return s
}
