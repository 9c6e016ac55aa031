package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/harness"
	"github.com/locklab/locklab/harness/node"
	"github.com/locklab/locklab/harness/stress"
	"github.com/locklab/locklab/strategies"
)

// errViolation is returned, with --fail-on-violation, when a run found what
// it looked for: exit status 1.
var errViolation = errors.New("violation found")

// cluster starts n Redis nodes on the chosen backend; the caller closes it.
func (g *globals) cluster(ctx context.Context, w io.Writer, n int) (*node.Cluster, []harness.Node, error) {
	opts := node.Options{Backend: g.backend, N: n, Image: g.image, Addrs: g.addrs}
	if len(g.addrs) > 0 {
		if opts.Backend == "" {
			opts.Backend = node.BackendAddrs
		}
		if opts.Backend == node.BackendAddrs {
			opts.N = len(g.addrs)
		}
	}
	c, err := node.Start(ctx, opts)
	if err != nil {
		return nil, nil, err
	}
	fmt.Fprintf(w, "Redis: %s\n", c.Describe())
	out := make([]harness.Node, 0, len(c.Nodes()))
	for _, nd := range c.Nodes() {
		out = append(out, nd)
	}
	return c, out, nil
}

// withReplica gives the first node an asynchronous replica, for the
// scenarios that fail over, where the backend can start one.
func withReplica(ctx context.Context, c *node.Cluster, nodes []harness.Node, scenarios []string) []harness.Node {
	need := false
	for _, name := range scenarios {
		if sc, err := harness.Lookup(name); err == nil && slices.Contains(sc.Needs, "failover") {
			need = true
		}
	}
	if !need || c.Backend() == node.BackendAddrs {
		return nodes
	}
	r, err := c.Replicated(ctx, c.Nodes()[0])
	if err != nil {
		return nodes // the failover scenarios are then n/a
	}
	return append([]harness.Node{r}, nodes[1:]...)
}

func scenarioNames() []string {
	var out []string
	for _, sc := range harness.Scenarios() {
		out = append(out, sc.Name)
	}
	return out
}

func addHarnessCommands(root *cobra.Command, g *globals) {
	root.AddCommand(newRaceDemoCmd(g), newScenariosCmd(), newDemoCmd(g), newExploreCmd(g), newMatrixCmd(g), newStressCmd(g), newReportCmd(g))
	root.AddCommand(newWorkerCmd())
}

func newRaceDemoCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "race-demo",
		Short: "Reproduce the C1/C2 double acquire of the SETNX page on real Redis",
		Long: `race-demo runs the exact step order of the SETNX documentation page's race
on setnx-del: C3 holds the lock and crashes, its timestamp goes stale, C1
and C2 both see it, both DEL and both SETNX, and both hold the lock. Then it
runs the same schedule on setnx-getset, whose GETSET refuses C2.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			out := cmd.OutOrStdout()
			c, nodes, err := g.cluster(ctx, out, 1)
			if err != nil {
				return err
			}
			defer c.Close()
			return harness.RaceDemo(ctx, out, nodes)
		},
	}
}

func newScenariosCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "scenarios",
		Short: "List the scenario catalog: name, property checked, source and story",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			all := harness.Scenarios()
			w := cmd.OutOrStdout()
			if asJSON {
				return writeJSON(w, all)
			}
			for _, sc := range all {
				fmt.Fprintf(w, "%s — %s\n  checks: %s\n  source: %s\n  %s\n\n", sc.Name, sc.Title, sc.Property, sc.Source, harness.WrapText(sc.Story, 76, "  "))
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func newDemoCmd(g *globals) *cobra.Command {
	var (
		strats  []string
		asJSON  bool
		mermaid bool
		fail    bool
	)
	cmd := &cobra.Command{
		Use:   "demo <scenario>",
		Short: "Run one scenario step by step and print its timeline",
		Long: `demo runs a scenario on one or more strategies (default: every strategy the
scenario applies to) and prints each run as a swimlane timeline: one column
per client, one for the lock key's value on each node, one row per step,
with the violation marked. A scenario without a fixed schedule is explored
first and the shortest counterexample is shown. "locklab scenarios" lists
the scenarios.`,
		Example: `  locklab demo stale-recovery --strategy setnx-del
  locklab demo release-after-expiry --mermaid
  locklab demo stale-recovery --strategy setnx-del --json > history.json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			sc, err := harness.Lookup(args[0])
			if err != nil {
				return err
			}
			if len(strats) == 0 {
				strats = applicable(sc)
			}
			info := io.Discard
			if !asJSON {
				info = cmd.OutOrStdout()
			}
			c, nodes, err := g.cluster(ctx, info, sc.NodesNeeded())
			if err != nil {
				return err
			}
			defer c.Close()
			nodes = withReplica(ctx, c, nodes, []string{sc.Name})
			w := cmd.OutOrStdout()
			violated := false
			var results []*harness.Result
			for _, s := range strats {
				res, err := harness.Demo(ctx, sc.Name, s, nodes)
				if err != nil {
					return fmt.Errorf("%s on %s: %w", sc.Name, s, err)
				}
				violated = violated || res.Verdict.Failed()
				if asJSON {
					results = append(results, res)
					continue
				}
				fmt.Fprintf(w, "\n== %s on %s: %s ==\n", sc.Name, s, res.Verdict)
				if mermaid {
					fmt.Fprintf(w, "```mermaid\n%s```\n", res.Mermaid)
				} else {
					fmt.Fprint(w, res.Timeline)
				}
			}
			if asJSON {
				hs := make([]*harness.History, len(results))
				for i, r := range results {
					hs[i] = r.History
				}
				if err := writeJSON(w, hs); err != nil {
					return err
				}
			}
			if fail && violated {
				return errViolation
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringSliceVarP(&strats, "strategy", "s", nil, "strategy to run (repeat or comma-separate; default: all the scenario applies to)")
	f.BoolVar(&asJSON, "json", false, "print the histories as JSON")
	f.BoolVar(&mermaid, "mermaid", false, "print Mermaid sequence diagrams instead of text timelines")
	f.BoolVar(&fail, "fail-on-violation", false, "exit with status 1 when a run violates the scenario's property")
	return cmd
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

func newExploreCmd(g *globals) *cobra.Command {
	var (
		o      harness.ExploreOptions
		random int
		fail   bool
		asJSON bool
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
			if o.Strategy == "" || o.Scenario == "" {
				return errors.New("explore needs --strategy and --scenario (see locklab list, locklab scenarios)")
			}
			if _, err := strategies.Info(o.Strategy); err != nil {
				return err
			}
			sc, err := harness.Lookup(o.Scenario)
			if err != nil {
				return err
			}
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
			o.Nodes = withReplica(ctx, c, nodes, []string{sc.Name})
			o.Progress = progressLine(errw)
			res, err := harness.Explore(ctx, o)
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if asJSON {
				if err := writeJSON(w, res); err != nil {
					return err
				}
			} else {
				bound := "all schedules within the bound"
				if !res.Complete {
					bound = "not every schedule within the bound (limit reached)"
				}
				fmt.Fprintf(w, "%s on %s: %s after %d schedules in %v (%.0f/s), %s\n",
					o.Scenario, o.Strategy, res.Outcome, res.Schedules, res.Elapsed.Round(time.Millisecond), res.PerSecond, bound)
				if ce := res.Counterexample; ce != nil {
					fmt.Fprintf(w, "shortest counterexample (%d violating schedules in all):\n  %s\n\n%s", res.Violations, ce.Schedule, harness.Timeline(ce))
				}
			}
			if fail && res.Counterexample != nil {
				return errViolation
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVarP(&o.Strategy, "strategy", "s", "", "strategy to explore (required)")
	f.StringVarP(&o.Scenario, "scenario", "x", "", "scenario to explore (required)")
	f.IntVar(&o.Clients, "clients", 0, "number of clients: more than the scenario's own adds contenders running its last client's program")
	f.IntVar(&o.MaxSteps, "depth", 0, "most steps in one schedule (default 60)")
	f.IntVar(&o.MaxPreemptions, "preemptions", 0, "most preemptions per schedule (default 2; -1 for none)")
	f.IntVar(&o.MaxFaults, "faults", 0, "most fault events per schedule (default: the scenario's)")
	f.IntVar(&o.MaxSchedules, "max-schedules", 0, "stop after this many schedules (default 20000)")
	f.IntVar(&random, "random", 0, "sample this many schedules at random instead of enumerating")
	f.Uint64Var(&o.Seed, "seed", 1, "seed for --random and for the clients' tokens")
	f.IntVar(&o.Workers, "workers", 2, "schedules run at once, each on its own Redis database")
	f.BoolVar(&o.StopAtFirst, "first", false, "stop at the first counterexample")
	f.BoolVar(&asJSON, "json", false, "print the result as JSON")
	f.BoolVar(&fail, "fail-on-violation", false, "exit with status 1 when a counterexample is found")
	return cmd
}

// progressLine prints a progress line on w about once a second while an
// exploration runs long, and clears it at the end.
func progressLine(w io.Writer) func(harness.ExploreProgress) {
	last := time.Now()
	shown := false
	return func(p harness.ExploreProgress) {
		if p.Done {
			if shown {
				fmt.Fprint(w, "\r\033[K")
			}
			return
		}
		if time.Since(last) < time.Second {
			return
		}
		last, shown = time.Now(), true
		fmt.Fprintf(w, "\r\033[Kexploring: %d schedules, %d violating, %.0f/s, %v", p.Schedules, p.Violations, p.PerSecond, p.Elapsed.Round(time.Second))
	}
}

func newMatrixCmd(g *globals) *cobra.Command {
	var (
		o      harness.MatrixOptions
		asJSON bool
		fail   bool
		nodes  int
	)
	cmd := &cobra.Command{
		Use:   "matrix",
		Short: "Run every strategy against every scenario and print the verdicts",
		Long: `matrix explores every scenario on every strategy it applies to, within the
bounds, and prints SAFE (within the bound explored), VIOLATED (with the
shortest counterexample), DEADLOCK, STARVATION, or n/a.`,
		Example: `  locklab matrix
  locklab matrix --strategy set-nx-px,setnx-del --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			mr, err := g.runMatrix(cmd, &o, nodes)
			if err != nil {
				return err
			}
			defer mr.cluster.Close()
			m := mr.result
			w := cmd.OutOrStdout()
			if asJSON {
				err = writeJSON(w, m)
			} else {
				err = harness.WriteMatrix(w, m)
			}
			if err != nil {
				return err
			}
			if fail && m.Violations() > 0 {
				return errViolation
			}
			return nil
		},
	}
	f := cmd.Flags()
	matrixFlags(f, &o, &nodes)
	f.BoolVar(&asJSON, "json", false, "print JSON")
	f.BoolVar(&fail, "fail-on-violation", false, "exit with status 1 when any cell is not SAFE or n/a")
	return cmd
}

func newStressCmd(g *globals) *cobra.Command {
	var (
		o      stress.Options
		asJSON bool
		fail   bool
		nodes  int
	)
	cmd := &cobra.Command{
		Use:   "stress --strategy S",
		Short: "Run many clients on real time with pauses and crashes, and count the damage",
		Long: `stress runs --clients clients that loop acquire, a read-modify-write of a
shared register, release, on real Redis with millisecond TTLs, while
holders pause past their TTL (--pause-prob) and clients crash between two
commands (--crash-prob). It reports overlapping holds, lost updates,
accesses the register's fence check refused, and liveness failures.

With --processes each client is its own process: a pause is SIGSTOP, a
crash SIGKILL. --node-faults injects node faults every --fault-every
(pause, restart without data, restart-keep with an append-only file,
partition); it needs the docker or process backend.`,
		Example: `  locklab stress --strategy setnx-del
  locklab stress --strategy set-nx-px --pause-prob -1 --cycles 100000
  locklab stress --strategy set-nx-px --no-fence --duration 10s --json
  locklab stress --strategy set-nx-px-del --processes --first
  locklab stress --strategy set-nx-px --node-faults restart,partition --fault-every 2s`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			if o.Strategy == "" {
				return errors.New("stress needs --strategy (see locklab list)")
			}
			d, err := strategies.Info(o.Strategy)
			if err != nil {
				return err
			}
			if !d.Properties.MultiNode {
				nodes = 1
			}
			errNoFaults := fmt.Errorf("--node-faults needs a backend that controls its servers (docker or process), not %s", node.BackendAddrs)
			for _, f := range o.Faults {
				if !slices.Contains(stress.FaultKinds, f) {
					return fmt.Errorf("unknown node fault %q (want %s)", f, strings.Join(stress.FaultKinds, ","))
				}
			}
			if len(o.Faults) > 0 && (g.backend == node.BackendAddrs || g.backend == "" && len(g.addrs) > 0) {
				return errNoFaults
			}
			errw := cmd.ErrOrStderr()
			c, ns, err := g.cluster(ctx, errw, nodes)
			if err != nil {
				return err
			}
			defer c.Close()
			_ = ns
			if len(o.Faults) > 0 && c.Backend() == node.BackendAddrs {
				return errNoFaults
			}
			for _, n := range c.Nodes() {
				o.Nodes = append(o.Nodes, locklab.ConnSource(n.Pool()))
				addr := n.Addr()
				if pw := n.Password(); pw != "" {
					addr = pw + "@" + addr
				}
				o.Addrs = append(o.Addrs, addr)
				o.FaultNodes = append(o.FaultNodes, n)
				if slices.Contains(o.Faults, stress.FaultRestartKeep) {
					// A restart with its data brings the keys back only
					// from an append-only file.
					if err := n.SetAppendOnly(ctx, true, "always"); err != nil {
						return err
					}
				}
			}
			if o.Processes {
				exe, err := os.Executable()
				if err != nil {
					return err
				}
				o.WorkerCommand = []string{exe, "worker"}
			}
			o.Progress = func(p stress.Progress) {
				fmt.Fprintf(errw, "\r\033[K%v: %d cycles, %d violations", p.Elapsed.Round(time.Second), p.Cycles, p.Violations)
			}
			rep, err := stress.Run(ctx, o)
			fmt.Fprint(errw, "\r\033[K")
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if asJSON {
				err = writeJSON(w, rep)
			} else {
				err = writeStress(w, rep)
			}
			if err != nil {
				return err
			}
			if fail && rep.Violated() {
				return errViolation
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVarP(&o.Strategy, "strategy", "s", "", "strategy to stress (required)")
	f.IntVar(&o.Clients, "clients", 8, "concurrent clients")
	f.DurationVar(&o.Duration, "duration", 30*time.Second, "how long to run at most")
	f.Int64Var(&o.Cycles, "cycles", 0, "stop after this many critical sections (0: run for --duration)")
	f.DurationVar(&o.TTL, "ttl", 100*time.Millisecond, "lease TTL")
	f.Float64Var(&o.PauseProb, "pause-prob", 0.02, "chance a holder pauses 3 x TTL inside the critical section (-1: never)")
	f.Float64Var(&o.CrashProb, "crash-prob", 0.005, "chance a client crashes after each command (-1: never)")
	f.DurationVar(&o.Skew, "skew", 0, "give each client a clock offset within ±skew")
	f.BoolVar(&o.NoFence, "no-fence", false, "the register does not check fence numbers")
	f.BoolVar(&o.StopOnViolation, "first", false, "stop at the first violation")
	f.Uint64Var(&o.Seed, "seed", 1, "seed for pauses, crashes, skews and holds")
	f.IntVar(&nodes, "nodes", 5, "Redis nodes for a multi-node strategy")
	f.BoolVar(&asJSON, "json", false, "print the report as JSON")
	f.BoolVar(&fail, "fail-on-violation", false, "exit with status 1 when a violation is found")
	f.BoolVar(&o.Processes, "processes", false, "run each client as its own process: pauses are SIGSTOP, crashes SIGKILL")
	f.StringSliceVar(&o.Faults, "node-faults", nil, "node faults to inject: "+strings.Join(stress.FaultKinds, ","))
	f.DurationVar(&o.FaultEvery, "fault-every", 2*time.Second, "time between two node faults")
	f.DurationVar(&o.FaultFor, "fault-for", 0, "how long each node fault lasts (default 5 x TTL)")
	return cmd
}

func writeStress(w io.Writer, r *stress.Report) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "strategy\t%s (%d clients, ttl %v)\n", r.Strategy, r.Clients, r.TTL)
	fmt.Fprintf(tw, "cycles\t%d in %v (%.0f/s)\n", r.Cycles, r.Elapsed.Round(time.Millisecond), r.Throughput)
	fmt.Fprintf(tw, "acquire wait\tp50 %v, p99 %v\n", r.AcquireP50.Round(time.Microsecond), r.AcquireP99.Round(time.Microsecond))
	fmt.Fprintf(tw, "faults\t%d pauses, %d crashes, %d node faults\n", r.Pauses, r.Crashes, len(r.NodeFaults))
	fmt.Fprintf(tw, "overlapping holds\t%d\n", r.Overlaps)
	fmt.Fprintf(tw, "lost updates\t%d\n", r.LostUpdates)
	fmt.Fprintf(tw, "fence refusals\t%d\n", r.FenceRefusals)
	if r.Liveness != "" {
		fmt.Fprintf(tw, "liveness\t%s\n", r.Liveness)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(r.NodeFaults) > 0 {
		fmt.Fprintln(w, "\nnode faults:")
		for _, f := range r.NodeFaults {
			fmt.Fprintf(w, "  %10v  %-12s node %s for %v", f.At.Round(time.Millisecond), f.Kind, f.Node, f.For.Round(time.Millisecond))
			if f.Err != "" {
				fmt.Fprintf(w, " (%s)", f.Err)
			}
			fmt.Fprintln(w)
		}
	}
	if !r.Violated() {
		fmt.Fprintln(w, "\nno violation")
		return nil
	}
	for _, v := range r.First {
		fmt.Fprintf(w, "\nfirst %s at %v: %s\n", v.Kind, v.At.Round(time.Millisecond), v.Detail)
		for _, e := range v.Timeline {
			who := fmt.Sprintf("client %d", e.Client)
			if e.Client == stress.NodeFaultClient {
				who = "nodes"
			}
			fmt.Fprintf(w, "  %10v  %-9s %s\n", e.At.Round(100*time.Microsecond), who, e.What)
		}
	}
	return nil
}

// matrixFlags are the flags that bound a verdict matrix (matrix, report).
func matrixFlags(f *pflag.FlagSet, o *harness.MatrixOptions, nodes *int) {
	f.StringSliceVarP(&o.Strategies, "strategy", "s", nil, "restrict to these strategies")
	f.StringSliceVarP(&o.Scenarios, "scenario", "x", nil, "restrict to these scenarios")
	f.IntVar(&o.MaxPreemptions, "preemptions", 0, "most preemptions per schedule (default 2)")
	f.IntVar(&o.MaxSchedules, "max-schedules", 0, "most schedules per cell (default 3000)")
	f.IntVar(&o.Workers, "workers", 2, "schedules run at once per cell, each on its own database")
	f.IntVar(nodes, "nodes", 3, "Redis nodes to start (multi-node scenarios need 3)")
}

// matrixRun is a finished matrix and the nodes it ran on (still running:
// the caller closes the cluster).
type matrixRun struct {
	result  *harness.MatrixResult
	cluster *node.Cluster
	began   time.Time
}

// runMatrix starts the nodes (with a replica where a failover scenario
// needs one) and runs the matrix, with a progress line on stderr.
func (g *globals) runMatrix(cmd *cobra.Command, o *harness.MatrixOptions, nodes int) (*matrixRun, error) {
	ctx := cmd.Context()
	errw := cmd.ErrOrStderr()
	c, ns, err := g.cluster(ctx, errw, nodes)
	if err != nil {
		return nil, err
	}
	scs := o.Scenarios
	if len(scs) == 0 {
		scs = scenarioNames()
	}
	o.Nodes = withReplica(ctx, c, ns, scs)
	began := time.Now()
	o.Progress = func(cell harness.Cell) {
		fmt.Fprintf(errw, "\r\033[K%v %s × %s: %s", time.Since(began).Round(time.Second), cell.Strategy, cell.Scenario, cell.Outcome)
	}
	m, err := harness.Matrix(ctx, *o)
	fmt.Fprint(errw, "\r\033[K")
	if err != nil {
		c.Close()
		return nil, err
	}
	return &matrixRun{result: m, cluster: c, began: began}, nil
}
