// A Case is what every run and exploration of the harness works on: a
// scenario and the strategy it runs on, resolved from their names once, at
// the edge (the CLI, Matrix, docgen, play's levels), into the scenario, the
// strategy's description and its registered factory, so that nothing below
// looks a name up again.

package harness

import (
	"fmt"
	"slices"
	"time"

	"github.com/locklab/locklab/harness/fault"
	"github.com/locklab/locklab/strategies"
)

// Case is a scenario on a strategy: the scenario, the strategy's
// description (its name and whether it is multi-node), and the factory that
// builds its Locker.
type Case struct {
	Scenario *Scenario
	Strategy strategies.Description
	Factory  Factory
	// Symmetric: Factory builds the same lock for every client, one that
	// treats no client differently for the order it was built in, so
	// that clients running the same program are interchangeable
	// (symmetry.go). Resolve sets it for a registered strategy; a Custom
	// case is not taken to be.
	Symmetric bool
}

// Resolve looks up the scenario and the registered strategy by name: the
// edge's one lookup of each (Scenario.Resolve where the scenario is in hand).
func Resolve(scenario, strategy string) (Case, error) {
	sc, err := Lookup(scenario)
	if err != nil {
		return Case{}, err
	}
	return sc.Resolve(strategy)
}

// Resolve looks up the registered strategy by name and returns the case of
// s on it: s as it runs on the strategy (Scenario.On), the strategy's
// description, and its registered factory, which builds each client's
// Locker without looking the name up again.
func (s *Scenario) Resolve(strategy string) (Case, error) {
	d, f, err := strategies.Lookup(strategy)
	if err != nil {
		return Case{}, err
	}
	dr, err := storeOf(d.Family)
	if err != nil {
		return Case{}, fmt.Errorf("strategy %s: %w", d.Name, err)
	}
	if dr.Lockers[d.Name] != nil {
		f = dr.Lockers[d.Name]
	}
	return Case{Scenario: s.On(d), Strategy: d, Factory: f, Symmetric: true}, nil
}

// Custom is a case for a Locker that is not registered: f builds it, name
// names it in histories, and it is taken to be multi-node exactly when the
// scenario is.
func Custom(sc *Scenario, name string, f Factory) Case {
	return Case{Scenario: sc, Strategy: strategies.Description{Name: name,
		Properties: strategies.Properties{MultiNode: sc.MultiNode}}, Factory: f}
}

// Name is "scenario on strategy", for messages.
func (c Case) Name() string { return c.Scenario.Name + " on " + c.Strategy.Name }

// check reports a case that cannot run on nodes.
func (c Case) check(nodes []Node) error {
	if c.Scenario == nil || c.Factory == nil {
		return fmt.Errorf("harness: incomplete case (resolve it with Resolve or Custom)")
	}
	want, err := storeOf(c.Strategy.Family)
	if err != nil {
		return fmt.Errorf("strategy %s: %w", c.Strategy.Name, err)
	}
	if have := nodeStore(nodes); want.Name != have {
		return fmt.Errorf("strategy %s locks on %s, and the run's nodes are %s servers", c.Strategy.Name, want.Title, StoreTitle(have))
	}
	if len(nodes) < c.Scenario.nodes() {
		return fmt.Errorf("scenario %s needs %d node(s), got %d", c.Scenario.Name, c.Scenario.nodes(), len(nodes))
	}
	return nil
}

// spec is the run spec of the case.
func (c Case) spec() runSpec {
	sc := c.Scenario
	return runSpec{
		strategy: c.Strategy.Name, scenario: sc.Name, factory: c.Factory, multi: c.Strategy.Properties.MultiNode,
		programs: sc.Programs, key: "lock:" + sc.Name, ttl: TTL, fenced: sc.Fenced, guarded: sc.Guarded,
		property: sc.Property, waiter: sc.Waiter, maxSteps: 60, quiet: 3 * time.Millisecond,
		prepare: slices.Contains(sc.Needs, fault.Failover), appendFsync: sc.AppendFsync,
		noWatchdog: slices.Contains(c.Strategy.Options, strategies.OptNoWatchdog),
		// A strategy that renews by default is run renewing, by the run
		// (renew.go); so is one whose users renew as a rule (RunSetting).
		renew: !c.Strategy.Properties.MultiNode &&
			(slices.Contains(c.Strategy.Options, strategies.OptNoWatchdog) || RunSetting(c.Strategy.Name) != ""),
	}
}

// RunSetting says how the harness runs strategy where that is not the
// strategy's default: the renewal its store's Driver.Renewals names
// ("keepalive" for etcd-lease), "" for the others. The matrix's column
// headers show it.
func RunSetting(strategy string) string {
	if d := driver(StoreOfStrategy(strategy)); d != nil {
		return d.Renewals[strategy]
	}
	return ""
}

// Nodes is how many nodes a run of the case uses: the scenario's count,
// or one for a single-node strategy.
func (c Case) Nodes() int {
	if !c.Strategy.Properties.MultiNode {
		return 1
	}
	return c.Scenario.nodes()
}

// nodesFor are the nodes a run of the case uses: the scenario's count, or
// only the first for a single-node strategy.
func (c Case) nodesFor(nodes []Node) []Node { return nodes[:c.Nodes()] }
