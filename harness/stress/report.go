// The report of a run: the counts, the latencies and the first violation of
// each kind with the timeline before it, and the progress snapshots taken
// during the run.

package stress

import (
	"fmt"
	"maps"
	"sort"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
)

// Progress is a snapshot during a run. NodeFaults counts the node faults
// over and healed, not the one in progress.
type Progress struct {
	Elapsed       time.Duration
	Cycles        int64
	Violations    int64
	FenceRefusals int64
	NodeFaults    int
}

// Event is one line of the timeline around a violation.
type Event struct {
	At     time.Duration `json:"at_ns"`
	Client int           `json:"client"`
	What   string        `json:"what"`
}

// Violation is the first occurrence of one kind of violation.
type Violation struct {
	Kind     string        `json:"kind"`
	At       time.Duration `json:"at_ns"`
	Detail   string        `json:"detail"`
	Timeline []Event       `json:"timeline,omitempty"`
}

// Report is the outcome of a run.
type Report struct {
	Strategy   string        `json:"strategy"`
	Clients    int           `json:"clients"`
	TTL        time.Duration `json:"ttl_ns"`
	Elapsed    time.Duration `json:"elapsed_ns"`
	Cycles     int64         `json:"cycles"`
	Throughput float64       `json:"cycles_per_second"`
	AcquireP50 time.Duration `json:"acquire_p50_ns"`
	AcquireP99 time.Duration `json:"acquire_p99_ns"`
	// Errors counts the acquires that failed other than by the lock
	// being held (the store unreachable, a client that could not be
	// made), and FirstError is the first one's message.
	Errors     int64  `json:"errors"`
	FirstError string `json:"first_error,omitempty"`
	// Interrupted says the run's context ended (Ctrl-C) before its
	// duration or cycle count did.
	Interrupted   bool             `json:"interrupted,omitempty"`
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
	// Linearizability is porcupine's verdict on the run's history (see
	// linearizability.go), nil when Options.CheckTimeout is negative.
	Linearizability *Linearizability `json:"linearizability,omitempty"`

	// model and info are what Visualize draws.
	model porcupine.Model
	info  porcupine.LinearizationInfo
}

// KindLabel is kind as a text report writes it: "lost update".
func KindLabel(kind string) string { return strings.ReplaceAll(kind, "_", " ") }

// Violated reports whether any violation was seen, a history porcupine
// found not linearizable included (a check that timed out is not one).
func (r *Report) Violated() bool {
	return len(r.First) > 0 || (r.Linearizability != nil && r.Linearizability.Result == NotLinearizable)
}

// Idle says why the run shows nothing about the lock, "" when it does:
// no critical section completed, so no count of the report can be read as
// a pass. A liveness violation is a finding, not idleness.
func (r *Report) Idle() string {
	if r.Cycles > 0 || r.Liveness != "" {
		return ""
	}
	why := "no critical section completed"
	switch {
	case r.Errors == 1:
		why += "; 1 acquire failed: " + r.FirstError
	case r.Errors > 1:
		why += fmt.Sprintf("; %d acquires failed, the first: %s", r.Errors, r.FirstError)
	}
	return why
}

// Violation kinds: the keys of Report.Counts and Report.InFaults, and
// Violation.Kind. Words are joined by underscores, so that a kind is a
// plain JSON key; KindLabel spells it for people.
const (
	KindOverlap    = "overlapping_holds"
	KindLostUpdate = "lost_update"
	KindDeadlock   = "deadlock"
	KindStarvation = "starvation"
)

func (r *recorder) progress() Progress {
	r.mu.Lock()
	defer r.mu.Unlock()
	var v int64
	for _, n := range r.counts {
		v += n
	}
	return Progress{Elapsed: r.now(), Cycles: r.cycles.Load(), Violations: v, FenceRefusals: r.fenceRef, NodeFaults: len(r.nfaults)}
}

func (r *recorder) report() *Report {
	r.mu.Lock()
	defer r.mu.Unlock()
	el := r.now()
	rep := &Report{
		Strategy: r.o.Strategy, Clients: r.o.Clients, TTL: r.o.TTL, Elapsed: el,
		Cycles: r.cycles.Load(), Errors: r.errs.Load(), FirstError: r.firstErr,
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
	if r.o.CheckTimeout >= 0 {
		rep.Linearizability, rep.model, rep.info = r.linearizability(el)
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
