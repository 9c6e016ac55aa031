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
	"github.com/locklab/locklab/strategies"
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
	// Nodes is how many servers of the Main store the level runs on (one
	// node of another store's, see Store); Replica: the first
	// needs an asynchronous replica (failover).
	Nodes   int  `json:"nodes"`
	Replica bool `json:"replica,omitempty"`
	// Store is what the strategy locks on when it is not the harness's
	// Main store, Redis, whose servers play starts as the level's nodes (a
	// store registered with the harness: "etcd", a three-member cluster
	// that is one node of the harness; "postgres", a PostgreSQL server),
	// else "".
	Store string `json:"store,omitempty"`
	// Servers says what the level plays on, in the store's words
	// (harness.Driver.PlayServers): "a three-member etcd cluster".
	Servers string `json:"servers"`
	// Unavailable says why the level cannot be played here (its store's
	// servers are not installed); the server sets it, and refuses to start
	// the level.
	Unavailable string `json:"unavailable,omitempty"`
	// cs is the scenario on the strategy, resolved when the level is made.
	cs harness.Case
	// answer is a schedule known to break the level (harness.PlayLevel's
	// Answer), kept from the page.
	answer string
}

// Levels returns the challenges, each with its scenario's story and needs:
// the registered stores' (harness.Driver.PlayLevels), store by store in
// their Rank's order, resolved once, the first time they are asked for.
func Levels() []Level { return slices.Clone(builtin()) }

var builtin = sync.OnceValue(func() []Level {
	var defs []Level
	for _, d := range harness.Stores() {
		for _, pl := range d.PlayLevels {
			defs = append(defs, Level{ID: pl.ID, Title: pl.Title, Goal: pl.Goal, Scenario: pl.Scenario,
				Strategy: pl.Strategy, Safe: pl.Safe, Why: pl.Why, Docs: pl.Docs, Story: pl.Story, answer: pl.Answer})
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
	d, err := harness.StrategyStore(cs.Strategy.Name)
	if err == nil && !d.Main {
		l.Store = d.Name
	}
	if l.Story == "" {
		l.Story = sc.For(l.Store).Story
	}
	l.Replica = slices.Contains(sc.Needs, fault.Failover)
	if err == nil && d.PlayServers != nil {
		l.Servers = d.PlayServers(l.Nodes, l.Replica)
	}
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
		return Level{}, fmt.Errorf("scenario %s does not apply to %s; it applies to %s", scenario, strategy, strings.Join(applicable(sc), ", "))
	}
	store := harness.StoreOfStrategy(strategy)
	if why := harness.StoreNA(store, sc); why != "" {
		return Level{}, fmt.Errorf("scenario %s does not apply to %s: %s", scenario, strategy, why)
	}
	// The scenario as told for the strategy's store: an etcd cluster's
	// leader restarts on its data directory, not without persistence.
	told := sc.For(store)
	l := Level{ID: scenario + "/" + strategy, Scenario: scenario, Strategy: strategy, Docs: d.Family + ".md",
		Title: fmt.Sprintf("%s on %s", scenario, strategy),
		Goal:  fmt.Sprintf("%s. Break %s (%s) by choosing the steps.", capitalize(told.Title), strategy, sc.Property)}
	return l.of(cs), nil
}

// applicable names the registered strategies scenario sc applies to.
func applicable(sc *harness.Scenario) []string {
	var out []string
	for _, d := range strategies.All() {
		if sc.AppliesTo(d) {
			out = append(out, d.Name)
		}
	}
	return out
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
