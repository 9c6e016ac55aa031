// The levels: the built-in challenges, each a scenario of the catalog on
// one strategy with a goal, and a custom level of any scenario on any
// strategy it applies to.

package play

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/locklab/locklab/harness"
	"github.com/locklab/locklab/harness/fault"
)

// Level is one challenge: a scenario of the catalog on one strategy, and a
// goal.
type Level struct {
	ID       string `json:"id"`
	Title    string `json:"title"`
	Goal     string `json:"goal"`
	Scenario string `json:"scenario"`
	Strategy string `json:"strategy"`
	// Property is what the scenario checks; breaking it solves the level.
	Property harness.Property `json:"property"`
	// Safe: the level cannot be broken; it is solved by playing it to the
	// end, and Why says why nothing broke.
	Safe bool   `json:"safe,omitempty"`
	Why  string `json:"why,omitempty"`
	// Docs is the documentation page of the strategy's family, relative to
	// the docs folder.
	Docs string `json:"docs"`
	// Story is the scenario's, unless the level tells its own (where the
	// scenario's is told for Redis).
	Story string `json:"story"`
	// Nodes is how many Redis servers the level runs on; Replica: the first
	// needs an asynchronous replica (failover).
	Nodes   int  `json:"nodes"`
	Replica bool `json:"replica,omitempty"`
	// Store is what the strategy locks on when it is not the harness's
	// Main store, Redis, whose servers play starts as the level's nodes (a
	// store registered with the harness: "etcd", a three-member cluster
	// that is one node of the harness; "postgres", a PostgreSQL server),
	// else "".
	Store string `json:"store,omitempty"`
	// Unavailable says why the level cannot be played here (its store's
	// servers are not installed); the server sets it, and refuses to start
	// the level.
	Unavailable string `json:"unavailable,omitempty"`
	// cs is the scenario on the strategy, resolved when the level is made.
	cs harness.Case
}

// levelDefs are the challenges on Redis, easiest first; the other
// stores' follow (harness.Driver.PlayLevels), store by store.
var levelDefs = []Level{
	{ID: "c1c2", Scenario: "stale-recovery", Strategy: "setnx-del", Docs: "setnx_getset.md",
		Title: "The C1/C2 race",
		Goal:  "Make C1 and C2 both hold the setnx-del lock. C3 holds it and will crash; let its TTL pass, then interleave C1 and C2."},
	{ID: "getset-skew", Scenario: "clock-skew", Strategy: "setnx-getset", Docs: "setnx_getset.md",
		Title: "GETSET and a fast clock",
		Goal:  "GETSET closed the C1/C2 race. Break setnx-getset anyway: two clients holding at once, with a clock that runs ahead."},
	{ID: "no-expire", Scenario: "crash-before-expire", Strategy: "setnx-expire", Docs: "setnxex.md",
		Title: "Locked out forever",
		Goal:  "Make setnx-expire refuse everyone, for ever: crash its holder at the right moment."},
	{ID: "wrong-release", Scenario: "release-after-expiry", Strategy: "set-nx-px-del", Docs: "setnxex.md",
		Title: "Releasing someone else's lock",
		Goal:  "Make C1's release delete C2's lock on set-nx-px-del (SET NX PX, released with a blind DEL)."},
	{ID: "set-nx-px", Scenario: "stale-recovery", Strategy: "set-nx-px", Docs: "setnxex.md", Safe: true,
		Title: "Break set-nx-px (you can't: why?)",
		Goal:  "The same three clients as the C1/C2 race, on SET NX PX with a token-checked release. Try every order you like, let time pass; then play the run to its end.",
		Why:   "One command, SET key token NX PX ttl, both tests and takes the lock, and Redis runs commands one at a time: there is no gap between a GET and a DEL for another client to slip into. The release is a script that deletes the key only if it still holds the client's own token."},
	{ID: "gc-pause", Scenario: "pause-past-ttl", Strategy: "set-nx-px", Docs: "fencing-and-watchdogs.md",
		Title: "A GC pause past the TTL",
		Goal:  "No fault to choose here: C1 sleeps past its TTL. Make C1 write to the resource after C2, its successor, has written."},
	{ID: "fenced", Scenario: "pause-past-ttl-fenced", Strategy: "set-nx-px-getdel", Docs: "fencing-and-watchdogs.md",
		Title: "A resource that checks fences, a lock that has none",
		Goal:  "The resource now refuses a fence number lower than one it has seen. set-nx-px-getdel hands out none: make the stale write go through."},
	{ID: "redlock-pause", Scenario: "redlock-pause", Strategy: "redlock", Docs: "redlock.md",
		Title: "Redlock's holder writes after its successor",
		Goal:  "Three Redis nodes. C1 wins a majority and then pauses past the TTL. Make C1 write after C2, its successor."},
	{ID: "redlock-restart", Scenario: "redlock-restart", Strategy: "redlock", Docs: "redlock.md",
		Title: "A Redlock node forgets",
		Goal:  "Make C1 and C2 both hold a majority: restart n2, without persistence, at the right moment."},
	{ID: "failover", Scenario: "failover-loses-lock", Strategy: "set-nx-px", Docs: "setnxex.md",
		Title: "The replica never saw it",
		Goal:  "n1 has an asynchronous replica. Make C1 and C2 both hold set-nx-px by failing over at the right moment."},
}

// Levels returns the challenges, each with its scenario's story and needs:
// resolved once, the first time they are asked for.
func Levels() []Level { return slices.Clone(builtin()) }

var builtin = sync.OnceValue(func() []Level {
	defs := slices.Clone(levelDefs)
	for _, d := range harness.Stores() {
		for _, pl := range d.PlayLevels {
			defs = append(defs, Level{ID: pl.ID, Title: pl.Title, Goal: pl.Goal, Scenario: pl.Scenario,
				Strategy: pl.Strategy, Safe: pl.Safe, Why: pl.Why, Docs: pl.Docs, Story: pl.Story})
		}
	}
	out := make([]Level, 0, len(defs))
	for _, l := range defs {
		cs, err := harness.Resolve(l.Scenario, l.Strategy)
		if err != nil {
			panic(fmt.Sprintf("level %s: %v", l.ID, err))
		}
		out = append(out, l.of(cs))
	}
	return out
})

// of is the level on its resolved case, with the scenario's story and needs.
func (l Level) of(cs harness.Case) Level {
	sc := cs.Scenario
	l.cs = cs
	l.Property, l.Nodes = sc.Property, sc.NodesNeeded()
	if d, err := harness.StrategyStore(cs.Strategy.Name); err == nil && !d.Main {
		l.Store = d.Name
	}
	if l.Story == "" {
		l.Story = sc.For(l.Store).Story
	}
	l.Replica = slices.Contains(sc.Needs, fault.Failover)
	return l
}

// level finds a level by id among the built-in ones.
func level(id string) (Level, bool) {
	return find(Levels(), id)
}

func find(ls []Level, id string) (Level, bool) {
	for _, l := range ls {
		if l.ID == id {
			return l, true
		}
	}
	return Level{}, false
}

// CustomLevel is a level of any scenario on any strategy it applies to:
// break the scenario's property. Its id is "scenario/strategy".
func CustomLevel(scenario, strategy string) (Level, error) {
	cs, err := harness.Resolve(scenario, strategy)
	if err != nil {
		return Level{}, err
	}
	sc, d := cs.Scenario, cs.Strategy
	if !sc.AppliesTo(d) {
		return Level{}, fmt.Errorf("scenario %s does not apply to %s (multi-node scenarios are for redlock, the others for single-node strategies)", scenario, strategy)
	}
	l := Level{ID: scenario + "/" + strategy, Scenario: scenario, Strategy: strategy, Docs: d.Family + ".md",
		Title: fmt.Sprintf("%s on %s", scenario, strategy),
		Goal:  fmt.Sprintf("%s. Break %s (%s) by choosing the steps.", capitalize(sc.Title), strategy, sc.Property)}
	return l.of(cs), nil
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// violation is the verdict a response shows: the failure of the level's
// property where one happened (what solves it), else the first property
// broken, live or final.
func (l Level) violation(st *harness.InteractiveState) (harness.Verdict, bool) {
	if !l.Safe {
		if st.Done && st.History != nil && st.History.Verdict.Failed() && st.History.Verdict.Property == l.Property {
			return st.History.Verdict, true
		}
		for _, v := range st.Live {
			if v.Failed() && v.Property == l.Property {
				return v, true
			}
		}
	}
	return st.Violation()
}

// solved reports whether st meets the level's goal.
func (l Level) solved(st *harness.InteractiveState) bool {
	if l.Safe {
		_, bad := st.Violation()
		return st.Done && !bad && st.Err == ""
	}
	v, bad := l.violation(st)
	return bad && v.Property == l.Property
}
