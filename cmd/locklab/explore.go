// locklab explore: search the schedules of a case for a counterexample.

package main

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/locklab/locklab/harness"
	"github.com/locklab/locklab/harness/render"
)

func newExploreCmd(g *globals) *cobra.Command {
	var (
		o                  harness.ExploreOptions
		strategy, scenario string
		random             int
		fail               bool
		asJSON             bool
	)
	cmd := &cobra.Command{
		Use:   "explore --strategy S --scenario X",
		Short: "Search the schedules of a scenario for a counterexample",
		Long: `explore runs every schedule of a scenario within the bounds (depth-first,
with preemption bounding: a schedule may switch away from a client that
could go on at most --preemptions times), or --random N schedules sampled
from --seed. It reports SAFE within the bound explored, or the shortest
counterexample found with its timeline.`,
		Example: `  locklab explore --strategy setnx-del --scenario stale-recovery
  locklab explore --strategy set-nx-px --scenario release-after-expiry --preemptions 3
  locklab explore --strategy setnx-getset --scenario clock-skew --random 500 --seed 7`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			if strategy == "" || scenario == "" {
				return errors.New("explore needs --strategy and --scenario (see locklab list, locklab scenarios)")
			}
			cs, err := harness.Resolve(scenario, strategy)
			if err != nil {
				return err
			}
			o.Case = cs
			sc := cs.Scenario
			if random > 0 {
				o.Random, o.Samples = true, random
			}
			errw := cmd.ErrOrStderr()
			info := cmd.OutOrStdout()
			if asJSON {
				info = errw
			}
			c, nodes, err := g.cluster(ctx, info, sc.NodesNeeded())
			if err != nil {
				return err
			}
			defer c.Close()
			o.Nodes = withReplica(ctx, c, nodes, needsReplica(cs))
			o.Progress = progressLine(errw)
			res, err := harness.Explore(ctx, o)
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if asJSON {
				if err := render.JSON(w, res); err != nil {
					return err
				}
			} else {
				bound := "all schedules within the bound"
				if !res.Complete {
					bound = "not every schedule within the bound (limit reached)"
				}
				if res.Skipped > 0 {
					bound += fmt.Sprintf(" (%d branches inside transactions skipped as equivalent)", res.Skipped)
				}
				fmt.Fprintf(w, "%s on %s: %s after %d schedules in %v (%.0f/s), %s\n",
					scenario, strategy, res.Outcome, res.Schedules, res.Elapsed.Round(time.Millisecond), res.PerSecond, bound)
				if ce := res.Counterexample; ce != nil {
					fmt.Fprintf(w, "shortest counterexample (%d violating schedules in all):\n  %s\n\n%s", res.Violations, ce.Schedule, render.Timeline(ce))
				}
			}
			if fail && res.Counterexample != nil {
				return errViolation
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVarP(&strategy, "strategy", "s", "", "strategy to explore (required)")
	f.StringVarP(&scenario, "scenario", "x", "", "scenario to explore (required)")
	f.IntVar(&o.Clients, "clients", 0, "number of clients: more than the scenario's own adds contenders running its last client's program")
	f.IntVar(&o.MaxSteps, "depth", 0, "most steps in one schedule (default 60)")
	f.IntVar(&o.MaxPreemptions, "preemptions", 0, "most preemptions per schedule (default 2; -1 for none)")
	f.IntVar(&o.MaxFaults, "faults", 0, "most fault events per schedule (default: the scenario's)")
	f.IntVar(&o.MaxSchedules, "max-schedules", 0, "stop after this many schedules (default 20000)")
	f.BoolVar(&o.NoReduction, "no-reduction", false, "branch inside transactions too, as the plain enumeration does")
	f.IntVar(&random, "random", 0, "sample this many schedules at random instead of enumerating")
	f.Uint64Var(&o.Seed, "seed", 1, "seed for --random and for the clients' tokens")
	f.IntVar(&o.Workers, "workers", 2, "schedules run at once, each on its own Redis database")
	f.BoolVar(&o.StopAtFirst, "first", false, "stop at the first counterexample")
	f.BoolVar(&asJSON, "json", false, "print the result as JSON")
	f.BoolVar(&fail, "fail-on-violation", false, "exit with status 1 when a counterexample is found")
	return cmd
}

// progressLine shows a progress status on w (a terminal) about once a
// second while an exploration runs, and clears it when it is done.
func progressLine(w io.Writer) func(harness.ExploreProgress) {
	last := time.Now()
	st := newStatus(w)
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
