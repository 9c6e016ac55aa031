package main

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/internal/benchutil"
	"github.com/locklab/locklab/internal/counting"
	"github.com/locklab/locklab/strategies"
)

func newBenchCmd(g *globals) *cobra.Command {
	var (
		names          []string
		rounds, cycles int
	)
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure each strategy's uncontended acquire+release cycle next to a PING",
		Long: `bench measures one uncontended acquire+release cycle of each strategy on
real Redis, next to a PING round trip on the same server: the floor. The
contenders are measured in turn, round after round, and the median round
is kept, so the ratios hold on a noisy machine. Multi-node strategies run
on 5 nodes. (For locklab against other Go lock libraries, run make bench.)`,
		Example: `  locklab bench
  locklab bench --strategy set-nx-px,redlock --rounds 7`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			if len(names) == 0 {
				names = strategies.Names()
			}
			for _, n := range names {
				if _, err := strategies.Info(n); err != nil {
					return err
				}
			}
			c, _, err := g.cluster(ctx, io.Discard, 5)
			if err != nil {
				return err
			}
			defer c.Close()
			var nodes []locklab.ConnSource
			for _, n := range c.Nodes() {
				nodes = append(nodes, n.Pool())
			}
			config := func(multi bool, src []locklab.ConnSource) locklab.Config {
				if multi {
					return locklab.Config{Nodes: src}
				}
				return locklab.Config{Pool: src[0]}
			}
			entries := []benchutil.Entry{{Name: "PING round trip", F: func() error {
				conn := c.Nodes()[0].Pool().Get()
				defer conn.Close()
				_, err := conn.Do("PING")
				return err
			}}}
			cmds := []float64{1}
			for _, name := range names {
				d, _ := strategies.Info(name)
				l, err := strategies.New(name, config(d.Properties.MultiNode, nodes))
				if err != nil {
					return err
				}
				key := "bench:" + name
				entries = append(entries, benchutil.Entry{Name: name, F: func() error { return cycle(ctx, l, key) }})
				// Count the commands of one cycle on counting connections.
				counted := make([]locklab.ConnSource, len(nodes))
				srcs := make([]*counting.Source, len(nodes))
				for i, n := range nodes {
					srcs[i] = &counting.Source{Src: n}
					counted[i] = srcs[i]
				}
				cl, _ := strategies.New(name, config(d.Properties.MultiNode, counted))
				if err := cycle(ctx, cl, key); err != nil { // loads scripts
					return fmt.Errorf("%s: %w", name, err)
				}
				var before int64
				for _, s := range srcs {
					before += s.Commands()
				}
				if err := cycle(ctx, cl, key); err != nil {
					return fmt.Errorf("%s: %w", name, err)
				}
				var after int64
				for _, s := range srcs {
					after += s.Commands()
				}
				cmds = append(cmds, float64(after-before))
			}
			res, err := benchutil.Interleaved(entries, rounds, cycles)
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "Redis: %s; median of %d interleaved rounds of %d cycles\n", c.Describe(), rounds, cycles)
			tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
			fmt.Fprintln(tw, "strategy\tcycle\tx PING\tallocs/cycle\tcommands/cycle\t")
			for i, e := range entries {
				fmt.Fprintf(tw, "%s\t%v\t%.2f\t%d\t%.0f\t\n", e.Name, time.Duration(res[i].Ns).Round(100*time.Nanosecond),
					float64(res[i].Ns)/float64(res[0].Ns), res[i].Allocs, cmds[i])
			}
			return tw.Flush()
		},
	}
	f := cmd.Flags()
	f.StringSliceVarP(&names, "strategy", "s", nil, "strategies to measure (default: all)")
	f.IntVar(&rounds, "rounds", 5, "interleaved rounds (the median is kept)")
	f.IntVar(&cycles, "cycles", 1000, "cycles per strategy per round")
	return cmd
}

// cycle is one uncontended acquire and release.
func cycle(ctx context.Context, l locklab.Locker, key string) error {
	lease, err := l.Acquire(ctx, key, time.Minute)
	if err != nil {
		return err
	}
	return l.Release(ctx, lease)
}
