// What an exploration is given and what it returns: its options and the
// checks that refuse them, its progress, its result and headline, and the
// runs it counts.

package harness

import (
	"context"
	"fmt"
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
	// needs node faults, unless the matrix lends each worker servers of
	// its own).
	Workers int
	// DB is the first database the workers use (worker w uses DB+w).
	DB int
	// NoReduction turns the reduction off (docs/reduction.md): no sleep
	// sets, and runs branch inside transactions too (runPrefix): every
	// schedule within the bounds runs, as in a plain enumeration.
	NoReduction bool
	// NoSymmetry explores clients that run the same program as if they
	// differed (symmetry.go); NoReduction implies it.
	NoSymmetry bool
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
	// moreNodes, when set, lends a worker other than the first nodes of
	// its own, for a scenario that faults them (the first runs on Nodes):
	// none when ok is false, and the worker does not start. give gives
	// them back once the worker's runs are over.
	moreNodes func(ctx context.Context) (nodes []Node, give func() error, ok bool, err error)
}

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
	// Mirrored is how many alternatives the runs left to their mirror
	// image, the same step of an interchangeable client (symmetry.go):
	// each a subtree of schedules equal to others run up to the clients'
	// names. explore's text says it; its JSON keeps its schema.
	Mirrored int `json:"-"`
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

// ranRun is what a run of an exploration that stops at its first
// violation adds to the result, kept until the end says whether it
// counts (it does when it comes before the first violation).
type ranRun struct {
	order             []int32
	commands, skipped int
	mirrored          int
	redundant         bool
	trace             uint64
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

// add counts run x in the result.
func (r *ExploreResult) add(x ranRun) {
	r.Schedules++
	r.Skipped += x.skipped
	r.Mirrored += x.mirrored
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
