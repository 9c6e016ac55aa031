// locklab demo: one scenario on its strategies, step by step.

package cli

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/locklab/locklab/harness"
	"github.com/locklab/locklab/harness/render"
	"github.com/locklab/locklab/stores"
	"github.com/locklab/locklab/strategies"
)

// demoArgs are demo's flags.
type demoArgs struct {
	strats  []string
	asJSON  bool
	mermaid bool
	fail    bool
	sched   string
}

func newDemoCmd(g *globals) *cobra.Command {
	var a demoArgs
	cmd := &cobra.Command{
		Use:   "demo <scenario>",
		Short: "Run one scenario step by step and print its timeline",
		Long: `demo runs a scenario on one or more strategies (default: every strategy the
scenario applies to) and prints each run as a swimlane timeline: one column
per client, one for the lock key's value on each node, one row per step,
with the violation marked. A scenario without a fixed schedule is explored
first and the shortest counterexample is shown. --schedule runs a schedule
of your own instead (the one "locklab play" prints, for one). "locklab
scenarios" lists the scenarios.

Once the runs are over, it asks the servers it started how many clients
they saw, as explore does (docs/audit.md): a lock that talked to them
through a client of its own beside the one its factory was given makes
demo exit with status 2, naming the server and what it counted. On the
servers --addr names it counts nothing.`,
		Example: `  locklab demo stale-recovery --strategy setnx-del
  locklab demo release-after-expiry --strategy set-nx-px-del --mermaid > release.mmd
  locklab demo stale-recovery --strategy setnx-del --json > history.json
  locklab demo stale-recovery --strategy setnx-del --schedule 'c3 time c1 c1 c2 c2 c2 c2 c1 c1'`,
		Args: usageArgs(1, 1, "demo needs a scenario: locklab demo <scenario> (locklab scenarios lists them)"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.runDemo(cmd, &a, args[0])
		},
	}
	f := cmd.Flags()
	f.StringSliceVarP(&a.strats, "strategy", "s", nil, "strategy to run (repeat or comma-separate; default: all the scenario applies to)")
	f.BoolVar(&a.asJSON, "json", false, "print the histories as JSON")
	f.BoolVar(&a.mermaid, "mermaid", false, "print the run as a Mermaid sequence diagram instead of a text timeline: stdout is the diagram alone (one strategy), the notes go to stderr")
	f.BoolVar(&a.fail, "fail-on-violation", false, "exit with status 1 when a run violates the scenario's property")
	f.StringVar(&a.sched, "schedule", "", `run this schedule instead of the scenario's ("c3 time c1 c2", see locklab scenarios); it may name only the scenario's clients and nodes`)
	return serverCmd(cmd)
}

// runDemo runs "locklab demo" on the scenario named: it resolves its
// cases, starts the servers they lock on, and runs and prints each.
func (g *globals) runDemo(cmd *cobra.Command, a *demoArgs, scenario string) error {
	ctx := cmd.Context()
	sc, err := scenarioArg(scenario)
	if err != nil {
		return err
	}
	if a.asJSON && a.mermaid {
		return fmt.Errorf("--json and --mermaid: choose one")
	}
	cases, err := g.demoCases(cmd, a, sc)
	if err != nil {
		return err
	}
	// The timelines are for people, and carry their notes; JSON
	// and Mermaid are for programs: their notes go to stderr.
	info := cmd.OutOrStdout()
	if a.asJSON || a.mermaid {
		info = cmd.ErrOrStderr()
	}
	var names []string
	onRedis := false
	for _, cs := range cases {
		names = append(names, cs.Strategy.Name)
		onRedis = onRedis || stores.Of(cs.Strategy.Name) == ""
	}
	// Redis starts only when a strategy locks on it: a demo of
	// etcd's or PostgreSQL's locks says only what they run on.
	var nodes []harness.Node
	backend, err := g.storesBackend(ctx, names)
	if err != nil {
		return err
	}
	if onRedis {
		c, ns, err := g.cluster(ctx, info, nodesFor(sc, cases))
		if err != nil {
			return err
		}
		defer closeAndTell(cmd.ErrOrStderr(), c)
		nodes = withReplica(ctx, c, ns, needsReplica(cases...))
		backend = c.Backend()
	}
	others, err := g.startStores(ctx, info, backend, names)
	if err != nil {
		return err
	}
	defer closeAndTell(cmd.ErrOrStderr(), others)
	aud, err := g.startAudit(ctx, auditNodes(nodes, others.Nodes))
	if err != nil {
		return err
	}
	violated, err := runDemos(ctx, cmd.OutOrStdout(), info, a, sc, cases, func(cs harness.Case) []harness.Node {
		return nodesOf(others, cs, nodes)
	})
	// The servers' audit, read even when a run failed, as explore's; its
	// JSON, an array of histories, has no room for it: it is the error.
	ar := aud.check(ctx, cmd.ErrOrStderr())
	if err != nil {
		return ar.withRun(names, err)
	}
	if err := ar.err(names); err != nil {
		return err
	}
	if a.fail && violated {
		return errViolation
	}
	return nil
}

// demoCases resolves the cases of sc that a's strategies name (default:
// every strategy sc applies to), checking --schedule against each, and
// refuses --mermaid for more than one.
func (g *globals) demoCases(cmd *cobra.Command, a *demoArgs, sc *harness.Scenario) ([]harness.Case, error) {
	if len(a.strats) == 0 {
		a.strats = applicable(sc)
	}
	cases := make([]harness.Case, 0, len(a.strats))
	for _, s := range a.strats {
		cs, err := g.resolve(cmd, sc, "strategy", s)
		if err != nil {
			return nil, err
		}
		if cmd.Flag("schedule").Changed {
			if err := g.checkSchedule(cmd, "schedule", cs, a.sched); err != nil {
				return nil, err
			}
		}
		cases = append(cases, cs)
	}
	if a.mermaid && len(cases) > 1 {
		return nil, fmt.Errorf("--mermaid writes one diagram, and %s applies to %d strategies: choose one with --strategy (%s)",
			sc.Name, len(cases), strings.Join(a.strats, ", "))
	}
	return cases, nil
}

// runDemos runs each case on the nodes nodesOf gives it and prints it to
// w: a timeline or Mermaid diagram after a headline on info, or the
// histories as JSON when all have run. It tells whether a run violated
// the scenario's property.
func runDemos(ctx context.Context, w, info io.Writer, a *demoArgs, sc *harness.Scenario, cases []harness.Case, nodesOf func(harness.Case) []harness.Node) (bool, error) {
	violated := false
	var results []*harness.Result
	for _, cs := range cases {
		s := cs.Strategy.Name
		res, err := demo(ctx, cs, a.sched, nodesOf(cs))
		if err != nil {
			return false, fmt.Errorf("%s on %s: %w", sc.Name, s, err)
		}
		violated = violated || res.Verdict.Failed()
		if a.asJSON {
			results = append(results, res)
			continue
		}
		fmt.Fprintf(info, "\n== %s on %s: %s ==\n", sc.Name, s, res.Verdict)
		if a.mermaid {
			fmt.Fprint(w, render.Mermaid(res.History))
		} else {
			fmt.Fprint(w, render.Timeline(res.History))
		}
	}
	if a.asJSON {
		hs := make([]*harness.History, len(results))
		for i, r := range results {
			hs[i] = r.History
		}
		if err := render.JSON(w, hs); err != nil {
			return false, err
		}
	}
	return violated, nil
}

// demo is harness.Demo, or a run of the given schedule.
func demo(ctx context.Context, c harness.Case, sched string, nodes []harness.Node) (*harness.Result, error) {
	if sched == "" {
		return harness.Demo(ctx, c, nodes)
	}
	h, err := harness.Run(ctx, harness.RunOptions{Case: c, Nodes: nodes, Schedule: sched})
	if err != nil {
		return nil, err
	}
	return &harness.Result{Case: c, History: h, Verdict: h.Verdict}, nil
}

// nodesFor is how many nodes the scenario needs on the most demanding of
// its cases (a story told for one node runs on three for Redlock).
func nodesFor(sc *harness.Scenario, cases []harness.Case) int {
	n := sc.NodesNeeded()
	for _, cs := range cases {
		n = max(n, cs.Nodes())
	}
	return n
}

// applicable lists the strategies a scenario applies to.
func applicable(sc *harness.Scenario) []string {
	var out []string
	for _, d := range strategies.All() {
		if sc.AppliesTo(d) {
			out = append(out, d.Name)
		}
	}
	return out
}
