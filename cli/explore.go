// locklab explore: search the schedules of a case for a counterexample.

package cli

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/locklab/locklab/harness"
	"github.com/locklab/locklab/harness/render"
)

// exploreArgs are explore's flags: the exploration's options, the case
// to explore and how the result is given.
type exploreArgs struct {
	o                  harness.ExploreOptions
	strategy, scenario string
	random             int
	fail               bool
	asJSON             bool
}

func newExploreCmd(g *globals) *cobra.Command {
	var a exploreArgs
	cmd := &cobra.Command{
		Use:   "explore --strategy S --scenario X",
		Short: "Search the schedules of a scenario for a counterexample",
		Long: `explore runs every schedule of a scenario within the bounds (depth-first,
with preemption bounding: a schedule may switch away from a client that
could go on at most --preemptions times), or --random N schedules sampled
from --seed. It reports SAFE within the bound explored, or the shortest
counterexample found with its timeline.

Once the schedules have run, it asks the servers it started how many
clients they saw (the servers' audit, docs/audit.md): a lock that talked
to them through a client of its own beside the one its factory was given
sent requests that no schedule ran, and no verdict covers them. explore
then prints its result, says which server counted what, and exits with
status 2 (--json: "audit"). On the servers --addr names, which others use
too, it only reads, and counts nothing.`,
		Example: `  locklab explore --strategy setnx-del --scenario stale-recovery
  locklab explore --strategy set-nx-px --scenario release-after-expiry --preemptions 3
  locklab explore --strategy setnx-getset --scenario clock-skew --random 500 --seed 7`,
		Args: usageArgs(0, 0, ""),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return g.explore(cmd, &a)
		},
	}
	exploreFlags(cmd.Flags(), &a)
	return serverCmd(cmd)
}

// exploreFlags registers explore's flags on f, bound to a.
func exploreFlags(f *pflag.FlagSet, a *exploreArgs) {
	o := &a.o
	f.StringVarP(&a.strategy, "strategy", "s", "", "strategy to explore (required)")
	f.StringVarP(&a.scenario, "scenario", "x", "", "scenario to explore (required)")
	intFlag(f, &o.Clients, "clients", "", 0, intRange{min: 1, max: maxExploreClients}, fmt.Sprintf("number of clients, at least the scenario's own and at most %d: more add contenders running its last client's program (default: the scenario's own)", maxExploreClients))
	intFlag(f, &o.MaxSteps, "depth", "", 60, atLeast(1), "most steps in one schedule")
	intFlag(f, &o.MaxPreemptions, "preemptions", "", 2, atLeast(0).orZero("none"), "most preemptions per schedule")
	intFlag(f, &o.MaxFaults, "faults", "", 0, atLeast(0).orZero("none; default: the scenario's bound"), "most fault events per schedule")
	intFlag(f, &o.MaxSchedules, "max-schedules", "", 20000, atLeast(1), "stop after this many schedules (the result is then INCOMPLETE unless a counterexample was found)")
	f.BoolVar(&o.NoReduction, "no-reduction", false, "run the plain enumeration: no sleep sets, and branch inside transactions too (docs/reduction.md)")
	f.BoolVar(&o.NoSymmetry, "no-symmetry", false, "explore clients that run the same program as if they differed: no schedule is left to its mirror image (docs/reduction.md)")
	intFlag(f, &a.random, "random", "", 0, atLeast(1), "sample this many schedules at random instead of enumerating")
	f.Uint64Var(&o.Seed, "seed", 1, "seed for --random and for the clients' tokens")
	intFlag(f, &o.Workers, "workers", "", 2, intRange{min: 1, max: harness.MaxWorkers}, "schedules run at once, each on its own Redis database (on another store, a key of its own) (1 to 16)")
	f.BoolVar(&o.StopAtFirst, "first", false, "stop at the first counterexample")
	f.BoolVar(&a.asJSON, "json", false, "print the result as JSON")
	f.BoolVar(&a.fail, "fail-on-violation", false, "exit with status 1 when a counterexample is found")
}

// explore runs "locklab explore": it checks a's flags and sets the
// options they imply, starts the servers the case runs on, explores it
// and prints the result.
func (g *globals) explore(cmd *cobra.Command, a *exploreArgs) error {
	ctx, o := cmd.Context(), &a.o
	cs, err := g.checkExplore(cmd, a)
	if err != nil {
		return err
	}
	sc := cs.Scenario
	errw := cmd.ErrOrStderr()
	info := cmd.OutOrStdout()
	if a.asJSON {
		info = errw
	}
	c, nodes, err := g.cluster(ctx, info, sc.NodesNeeded())
	if err != nil {
		return err
	}
	defer closeAndTell(cmd.ErrOrStderr(), c)
	o.Nodes = withReplica(ctx, c, nodes, needsReplica(cs))
	others, err := g.startStores(ctx, info, c.Backend(), []string{cs.Strategy.Name})
	if err != nil {
		return err
	}
	defer closeAndTell(cmd.ErrOrStderr(), others)
	o.Nodes = nodesOf(others, cs, o.Nodes)
	aud, err := g.startAudit(ctx, map[string][]harness.Node{harness.StoreOfStrategy(cs.Strategy.Name): o.Nodes})
	if err != nil {
		return err
	}
	st := newStatus(errw)
	progress := progressLine(st)
	o.Progress = func(p harness.ExploreProgress) {
		if ctx.Err() == nil || p.Done { // interrupted, the count no longer matters
			progress(p)
		}
	}
	returned := st.whileStopping(ctx, "the schedule in progress to end")
	res, err := harness.Explore(ctx, *o)
	returned()
	// Read even when the run failed: a lock's own client is a likely
	// cause (a step the schedule named never came).
	ar := aud.check(ctx, errw)
	if err != nil {
		return ar.withRun([]string{cs.Strategy.Name}, err)
	}
	if err := printExplore(cmd.OutOrStdout(), a, res, ar); err != nil {
		return err
	}
	if err := ar.err([]string{cs.Strategy.Name}); err != nil {
		return err
	}
	if a.fail && res.Counterexample != nil {
		return errViolation
	}
	return nil
}

// checkExplore checks explore's flags, resolves the case they name into
// a.o.Case and turns the command line's zeroes into the library's.
func (g *globals) checkExplore(cmd *cobra.Command, a *exploreArgs) (harness.Case, error) {
	o := &a.o
	switch {
	case a.strategy == "" && a.scenario == "":
		return harness.Case{}, errors.New("explore needs --strategy and --scenario (see locklab list, locklab scenarios)")
	case a.strategy == "":
		return harness.Case{}, errors.New("explore needs --strategy (see locklab list)")
	case a.scenario == "":
		return harness.Case{}, errors.New("explore needs --scenario (see locklab scenarios)")
	}
	if err := g.scenarios(cmd, "scenario", []string{a.scenario}); err != nil {
		return harness.Case{}, err
	}
	sc0, _ := harness.Lookup(a.scenario)
	cs, err := g.resolve(cmd, sc0, "strategy", a.strategy)
	if err != nil {
		return harness.Case{}, err
	}
	o.Case = cs
	if n := len(cs.Scenario.Programs); cmd.Flag("clients").Changed && o.Clients < n {
		return harness.Case{}, g.args.badFlag(cmd, "clients", fmt.Sprint(o.Clients), "%s has %s; more can be added, none removed", cs.Name(), count(n, "client", "c"))
	}
	// 0 is none on the command line; the library's none is -1.
	if o.MaxPreemptions == 0 {
		o.MaxPreemptions = -1
	}
	if cmd.Flag("faults").Changed && o.MaxFaults == 0 {
		o.MaxFaults = -1
	}
	if a.random > 0 {
		o.Random, o.Samples = true, a.random
	}
	return cs, nil
}

// printExplore writes res to w: as JSON with its headline and the
// servers' audit, or as a line that tells what was covered, with the
// shortest counterexample's timeline.
func printExplore(w io.Writer, a *exploreArgs, res *harness.ExploreResult, ar auditResult) error {
	o := &a.o
	if a.asJSON {
		// The result, and its headline: INCOMPLETE where the
		// search did not cover the bound, whatever Outcome says.
		out := struct {
			*harness.ExploreResult
			Headline string      `json:"headline"`
			Audit    auditResult `json:"audit"`
		}{res, res.Headline(), ar}
		return render.JSON(w, out)
	}
	bound := "all schedules within the bound"
	switch {
	case res.Complete:
	case o.Random:
		bound = "a random sample, not every schedule within the bound"
	case o.StopAtFirst && res.Counterexample != nil:
		bound = "stopped at the first counterexample (--first)"
	default:
		bound = fmt.Sprintf("not every schedule within the bound: --max-schedules %d reached", o.MaxSchedules)
	}
	bound += reductionNote(res, o.Random)
	fmt.Fprintf(w, "%s on %s: %s after %d schedules in %v (%.0f/s), %s\n",
		a.scenario, a.strategy, res.Headline(), res.Schedules, res.Elapsed.Round(time.Millisecond), res.PerSecond, bound)
	if ce := res.Counterexample; ce != nil {
		fmt.Fprintf(w, "shortest counterexample (%d violating schedules in all):\n  %s\n\n%s", res.Violations, ce.Schedule, render.Timeline(ce))
	}
	return nil
}

// progressLine shows a progress status on w (a terminal) about once a
// second while an exploration runs, and clears it when it is done.
func progressLine(st *status) func(harness.ExploreProgress) {
	last := time.Now()
	return func(p harness.ExploreProgress) {
		if p.Done {
			st.clear()
			return
		}
		if time.Since(last) < time.Second {
			return
		}
		last = time.Now()
		st.set("exploring: %d schedules, %d violating, %.0f/s, %v", p.Schedules, p.Violations, p.PerSecond, p.Elapsed.Round(time.Second))
	}
}

// maxExploreClients bounds explore --clients: every client lengthens each
// schedule and multiplies their number. At 16, stale-recovery on
// setnx-del runs 300 schedules a second on the process backend, and
// pause-past-ttl on etcd-lease 5; at 100000 not one schedule ran in two
// minutes.
const maxExploreClients = 16

// reductionNote is what explore's text says of the reduction
// (docs/reduction.md): the branches it skipped inside transactions, the
// runs it ended early, and, of an enumeration, the traces the schedules
// run fall into: the fewest a reduction by independence could run.
func reductionNote(res *harness.ExploreResult, random bool) string {
	var notes []string
	if res.Skipped > 0 {
		notes = append(notes, fmt.Sprintf("%d branches inside transactions skipped as equivalent", res.Skipped))
	}
	if res.Mirrored > 0 {
		notes = append(notes, fmt.Sprintf("%d branches left to their mirror image, a client with the same program", res.Mirrored))
	}
	if res.Redundant > 0 {
		notes = append(notes, fmt.Sprintf("%d runs ended early where every next step was one whose schedules run elsewhere", res.Redundant))
	}
	if !random && res.Traces > 0 {
		notes = append(notes, fmt.Sprintf("%d distinct traces", res.Traces))
	}
	if len(notes) == 0 {
		return ""
	}
	return " (" + strings.Join(notes, "; ") + ": docs/reduction.md)"
}
