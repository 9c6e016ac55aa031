// locklab stress: many clients on real time, with pauses, crashes and
// node faults.

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

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/harness/node"
	"github.com/locklab/locklab/harness/render"
	"github.com/locklab/locklab/harness/stress"
	"github.com/locklab/locklab/strategies"
)

func newStressCmd(g *globals) *cobra.Command {
	var (
		o      stress.Options
		asJSON bool
		fail   bool
		nodes  int
		faults []string
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
partition); it needs the docker or process backend.

--node-faults failover runs the lock on a Redis Sentinel group instead of
plain nodes: a master, two asynchronous replicas and three Sentinels
(down-after 1s), which the clients reach through a Sentinel-aware pool.
Every --fault-every the master is cut off from its replicas and the
Sentinels (its default user is turned off; the clients log in as a user of
their own and still reach it) for at least --fault-for and until the
Sentinels have promoted a replica; then it is reconnected and answers as a
master, to the clients that still reach it, until the Sentinels demote it
(about 10s later). Each failover takes over 10s:
give --duration room for a few. It takes a single-node strategy, alone
among the node faults, and the docker or process backend. The whole group
is removed when the run ends, Ctrl-C included.`,
		Example: `  locklab stress --strategy setnx-del
  locklab stress --strategy set-nx-px --pause-prob -1 --cycles 100000
  locklab stress --strategy set-nx-px --no-fence --duration 10s --json
  locklab stress --strategy set-nx-px-del --processes --first
  locklab stress --strategy set-nx-px --node-faults restart,partition --fault-every 2s
  locklab stress --strategy set-nx-px --node-faults failover --duration 30s
  locklab stress --strategy set-nx-px-wait --node-faults failover --processes --duration 30s`,
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
			if o.Faults, err = stress.ParseFaults(faults); err != nil {
				return err
			}
			if len(o.Faults) > 0 && (g.backend == node.BackendAddrs || g.backend == "" && len(g.addrs) > 0) {
				return errNoFaults
			}
			failover := slices.Contains(o.Faults, node.Failover)
			if failover {
				if err := checkFailover(o.Faults, d); err != nil {
					return err
				}
				nodes = 1
			}
			errw := cmd.ErrOrStderr()
			c, _, err := g.cluster(ctx, errw, nodes)
			if err != nil {
				return err
			}
			defer c.Close()
			if len(o.Faults) > 0 && c.Backend() == node.BackendAddrs {
				return errNoFaults
			}
			if failover {
				if o.Sentinels, err = startSentinels(ctx, errw, c); err != nil {
					return err
				}
				defer o.Sentinels.Close()
			}
			for _, n := range c.Nodes() {
				if failover {
					break
				}
				o.Nodes = append(o.Nodes, locklab.ConnSource(n.Pool()))
				o.Addrs = append(o.Addrs, n.URL())
				o.FaultNodes = append(o.FaultNodes, n)
				if slices.Contains(o.Faults, node.RestartKeep) {
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
			st := newStatus(errw)
			o.Progress = func(p stress.Progress) {
				st.set("%v: %d cycles, %d violations", p.Elapsed.Round(time.Second), p.Cycles, p.Violations)
			}
			rep, err := stress.Run(ctx, o)
			st.clear()
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if asJSON {
				err = render.JSON(w, rep)
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
	f.StringSliceVar(&faults, "node-faults", nil, "node faults to inject: "+node.JoinFaults(stress.FaultKinds)+
		", or failover (on a Sentinel group)")
	f.DurationVar(&o.FaultEvery, "fault-every", 2*time.Second, "time between two node faults")
	f.DurationVar(&o.FaultFor, "fault-for", 0, "how long each node fault lasts (default 5 x TTL)")
	return cmd
}

// checkFailover refuses what a run on a Sentinel group cannot do: other
// node faults alongside the failover, and strategies that need several
// independent masters.
func checkFailover(faults []node.Fault, d strategies.Description) error {
	for _, f := range faults {
		if f != node.Failover {
			return fmt.Errorf("--node-faults failover runs on a Sentinel group and cannot be combined with %s", f)
		}
	}
	if d.Properties.MultiNode {
		return fmt.Errorf("--node-faults failover: %s needs several independent masters, a Sentinel group has one; "+
			"use a single-node strategy (set-nx-px, set-nx-px-wait, ...)", d.Name)
	}
	return nil
}

// startSentinels starts the Sentinel group a failover run locks on; c's
// Close removes it too.
func startSentinels(ctx context.Context, w io.Writer, c *node.Cluster) (*node.SentinelGroup, error) {
	g, err := c.StartSentinels(ctx, node.SentinelOptions{})
	if err != nil {
		return nil, err
	}
	var data, sents []string
	for _, n := range g.Nodes() {
		data = append(data, n.Name()+" "+n.Addr())
	}
	for _, n := range g.Sentinels() {
		sents = append(sents, n.Name()+" "+n.Addr())
	}
	fmt.Fprintf(w, "Sentinel group %s: master and replicas %s; Sentinels %s\n",
		g.MasterName(), strings.Join(data, ", "), strings.Join(sents, ", "))
	return g, nil
}

// inFaults says how many violations of kind were seen during node faults,
// when the run injected any.
func inFaults(r *stress.Report, kind string) string {
	if len(r.NodeFaults) == 0 || r.Counts[kind] == 0 {
		return ""
	}
	return fmt.Sprintf(" (%d during node faults)", r.InFaults[kind])
}

func writeStress(w io.Writer, r *stress.Report) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "strategy\t%s (%d clients, ttl %v)\n", r.Strategy, r.Clients, r.TTL)
	fmt.Fprintf(tw, "cycles\t%d in %v (%.0f/s)\n", r.Cycles, r.Elapsed.Round(time.Millisecond), r.Throughput)
	fmt.Fprintf(tw, "acquire wait\tp50 %v, p99 %v\n", r.AcquireP50.Round(time.Microsecond), r.AcquireP99.Round(time.Microsecond))
	fmt.Fprintf(tw, "faults\t%d pauses, %d crashes, %d node faults\n", r.Pauses, r.Crashes, len(r.NodeFaults))
	fmt.Fprintf(tw, "overlapping holds\t%d%s\n", r.Overlaps, inFaults(r, stress.KindOverlap))
	fmt.Fprintf(tw, "lost updates\t%d%s\n", r.LostUpdates, inFaults(r, stress.KindLostUpdate))
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
			for _, s := range f.Steps {
				fmt.Fprintf(w, "  %10v    %s\n", s.At.Round(time.Millisecond), s.What)
			}
		}
	}
	if !r.Violated() {
		fmt.Fprintln(w, "\nno violation")
		return nil
	}
	firsts := r.First
	for _, v := range r.FirstInFaults {
		if !slices.ContainsFunc(r.First, func(f stress.Violation) bool { return f.Kind == v.Kind && f.At == v.At }) {
			v.Kind += " during a node fault"
			firsts = append(firsts, v)
		}
	}
	for _, v := range firsts {
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
