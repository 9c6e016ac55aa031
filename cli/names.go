// Names on the command line: strategies, scenarios, and the cases they
// make, checked before anything runs, in messages that list what is known.

package cli

import (
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/locklab/locklab/harness"
	"github.com/locklab/locklab/stores"
	"github.com/locklab/locklab/strategies"
)

// strategies checks the strategy names given with flag: each is
// registered, and one of a store other than Redis (a lock a program
// registered itself, say) lists OptStore, without which it would not be
// given the store's client.
func (g *globals) strategies(cmd *cobra.Command, flag string, names []string) error {
	for _, n := range names {
		d, err := strategies.Info(n)
		if err != nil {
			return g.args.badFlag(cmd, flag, n, "unknown strategy; the strategies are %s", strings.Join(strategies.Names(), ", "))
		}
		if st := stores.Of(n); st != "" && !slices.Contains(d.Options, strategies.OptStore) {
			return g.args.badFlag(cmd, flag, n, "a lock of the %s family runs on %s and takes its client from Config.Store, "+
				"which only a strategy whose Description lists strategies.OptStore in its Options is given", d.Family, harness.StoreTitle(st))
		}
	}
	return nil
}

// scenarios checks the scenario names given with flag.
func (g *globals) scenarios(cmd *cobra.Command, flag string, names []string) error {
	for _, n := range names {
		if _, err := harness.Lookup(n); err != nil {
			return g.args.badFlag(cmd, flag, n, "unknown scenario; the scenarios are %s", strings.Join(scenarioNames(), ", "))
		}
	}
	return nil
}

// scenarioArg looks up the scenario given as an argument.
func scenarioArg(name string) (*harness.Scenario, error) {
	sc, err := harness.Lookup(name)
	if err != nil {
		return nil, fmt.Errorf("unknown scenario %q; the scenarios are %s", name, strings.Join(scenarioNames(), ", "))
	}
	return sc, nil
}

// resolve is the case of scenario sc on the strategy given with flag,
// refused when the strategy is unknown or the scenario does not apply to
// it (as the matrix marks it n/a).
func (g *globals) resolve(cmd *cobra.Command, sc *harness.Scenario, flag, strategy string) (harness.Case, error) {
	if err := g.strategies(cmd, flag, []string{strategy}); err != nil {
		return harness.Case{}, err
	}
	cs, err := sc.Resolve(strategy)
	if err != nil {
		return harness.Case{}, err
	}
	if !sc.AppliesTo(cs.Strategy) {
		return harness.Case{}, g.args.badFlag(cmd, flag, strategy, "scenario %s does not apply to this strategy; it applies to %s",
			sc.Name, strings.Join(applicable(sc), ", "))
	}
	return cs, nil
}

// checkSchedule refuses a schedule given with flag that the case cannot
// run: one that does not parse, names a client or a node the case does not
// have, or fails over a node of a case that starts no replica or standby
// to promote.
func (g *globals) checkSchedule(cmd *cobra.Command, flag string, cs harness.Case, text string) error {
	sched, err := harness.ParseSchedule(text)
	if err != nil {
		return g.args.badFlag(cmd, flag, text, "%v", err)
	}
	if len(sched) == 0 {
		return g.args.badFlag(cmd, flag, text, `no step in it; write steps such as "c1 c2 time c1" (see locklab scenarios)`)
	}
	clients, nodes := len(cs.Scenario.Programs), cs.Nodes()
	for _, st := range sched {
		if st.Client > clients {
			return g.args.badFlag(cmd, flag, text, "step %s names client c%d, and %s has %s", st, st.Client, cs.Name(), count(clients, "client", "c"))
		}
		if st.Node > nodes {
			return g.args.badFlag(cmd, flag, text, "step %s names node n%d, and %s runs on %s", st, st.Node, cs.Name(), count(nodes, "node", "n"))
		}
		if st.Kind == harness.StepFailover && !needsReplica(cs) {
			return g.args.badFlag(cmd, flag, text, "step %s needs a replica to promote, and %s starts none; one starts for %s",
				st, cs.Name(), strings.Join(failingOver(), " and for "))
		}
	}
	return nil
}

// failingOver names what starts a replica or a standby to fail over to:
// the scenarios that fail over, and the strategies that wait for a
// replica.
func failingOver() []string {
	var out []string
	for _, l := range []struct {
		one, many string
		names     []string
	}{{"scenario", "scenarios", failoverScenarios()}, {"strategy", "strategies", replicaStrategies()}} {
		switch len(l.names) {
		case 0:
		case 1:
			out = append(out, l.one+" "+l.names[0])
		default:
			out = append(out, l.many+" "+strings.Join(l.names, ", "))
		}
	}
	return out
}

// count says how many clients or nodes there are and their names: "1
// client (c1)", "3 clients (c1 to c3)".
func count(n int, what, prefix string) string {
	if n == 1 {
		return fmt.Sprintf("1 %s (%s1)", what, prefix)
	}
	return fmt.Sprintf("%d %ss (%s1 to %s%d)", n, what, prefix, prefix, n)
}
