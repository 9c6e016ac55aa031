package harness

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/locklab/locklab/internal/tooling/redistest"
)

// TestRenewalAsUsersGetIt: hash-reentrant runs with its watchdog, which
// the run plays on the virtual clock. A holder that is alive and connected
// keeps its lock while time passes, and the contender is refused; one cut
// off, or paused in a sleep step, renews nothing and loses it.
func TestRenewalAsUsersGetIt(t *testing.T) {
	nodes := nodesOf(redistest.Start(t, 1))
	for _, tc := range []struct {
		scenario, schedule string
		want               Outcome
		renewed            bool
	}{
		{"partitioned-holder", "c1 time c2 c2 c1", Safe, true},
		{"partitioned-holder", "c1 isolate(c1) time c2 c2 c1", Violated, false},
		{"pause-past-ttl", "c1 c1 c2 c2 c1", Violated, false},
	} {
		h, err := Run(context.Background(), RunOptions{Case: mustCase(t, tc.scenario, "hash-reentrant"), Nodes: nodes, Schedule: tc.schedule})
		if err != nil {
			t.Fatal(err)
		}
		renewed := noted(h, "c1's watchdog renewed")
		if h.Verdict.Outcome != tc.want || renewed != tc.renewed {
			t.Errorf("%s %q: %v, renewed %v; want %s, renewed %v", tc.scenario, tc.schedule, h.Verdict, renewed, tc.want, tc.renewed)
		}
	}
	// set-nx-px renews nothing by default: time alone loses its lock.
	h, err := Run(context.Background(), RunOptions{Case: mustCase(t, "partitioned-holder", "set-nx-px"), Nodes: nodes, Schedule: "c1 time c2 c2 c1"})
	if err != nil || h.Verdict.Outcome != Violated {
		t.Errorf("set-nx-px, time alone: %v (%v), want VIOLATED", h.Verdict, err)
	}
}

// TestFaultAfter: partitioned-holder's time passes only once the holder
// is cut off, in every schedule the explorer runs.
func TestFaultAfter(t *testing.T) {
	nodes := nodesOf(redistest.Start(t, 1))
	res, err := Explore(context.Background(), ExploreOptions{Case: mustCase(t, "partitioned-holder", "set-nx-px"), Nodes: nodes})
	if err != nil {
		t.Fatal(err)
	}
	if res.Counterexample == nil {
		t.Fatal("no counterexample")
	}
	s := res.Counterexample.Schedule
	iso, tm := strings.Index(s, "isolate(c1)"), strings.Index(s, "time")
	if iso < 0 || tm < iso {
		t.Errorf("counterexample %q: time before the cut", s)
	}
}

// noted reports whether a note of one of h's events begins with prefix.
func noted(h *History, prefix string) bool {
	for _, e := range h.Events {
		if slices.ContainsFunc(e.Notes, func(n string) bool { return strings.HasPrefix(n, prefix) }) {
			return true
		}
	}
	return false
}
