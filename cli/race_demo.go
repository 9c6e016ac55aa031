// locklab race-demo: the C1/C2 race of the SETNX page, and the prose that
// tells it.

package cli

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/locklab/locklab/harness"
	"github.com/locklab/locklab/harness/render"
	"github.com/locklab/locklab/stores/redis"
)

func newRaceDemoCmd(g *globals) *cobra.Command {
	return serverCmd(&cobra.Command{
		Use:   "race-demo",
		Short: "Reproduce the C1/C2 double acquire of the SETNX page on real Redis",
		Long: `race-demo runs the exact step order of the SETNX documentation page's race
on setnx-del: C3 holds the lock and crashes, its timestamp goes stale, C1
and C2 both see it, both DEL and both SETNX, and both hold the lock. Then it
runs the same schedule on setnx-getset, whose GETSET refuses C2.`,
		Args: usageArgs(0, 0, ""),
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			out := cmd.OutOrStdout()
			c, nodes, err := g.cluster(ctx, out, 1)
			if err != nil {
				return err
			}
			defer closeAndTell(cmd.ErrOrStderr(), c)
			return raceDemo(ctx, out, nodes)
		},
	})
}

// raceDemo prints the C1/C2 race of the SETNX page: the schedule on
// setnx-del, where both clients end up holding the lock, then the same
// schedule on setnx-getset, where the second client is refused, and which
// Redis it ran on.
func raceDemo(ctx context.Context, w io.Writer, nodes []harness.Node) error {
	if len(nodes) == 0 {
		return fmt.Errorf("race demo: no Redis node")
	}
	sc, _ := harness.Lookup("stale-recovery")
	fmt.Fprintf(w, "The C1/C2 race of the SETNX page (%s)\n\n", sc.Source)
	fmt.Fprintf(w, "%s\n\nSchedule: %s\n\n", wrapText(sc.Story, 78, ""), sc.Schedule)
	for _, strat := range []string{"setnx-del", "setnx-getset"} {
		c, err := sc.Resolve(strat)
		if err != nil {
			return err
		}
		h, err := harness.Run(ctx, harness.RunOptions{Case: c, Nodes: nodes})
		if err != nil {
			return fmt.Errorf("%s: %w", strat, err)
		}
		fmt.Fprintf(w, "== %s ==\n%s\n", strat, render.Timeline(h))
	}
	v := redis.ServerVersion(ctx, nodes[0])
	fmt.Fprintf(w, "Ran on %s at %s (Redis %s).\n", nodes[0].Name(), nodes[0].Addr(), v)
	if d, ok := nodes[0].(interface{ Describe() string }); ok {
		fmt.Fprintln(w, d.Describe())
	}
	return nil
}

// wrapText breaks s into lines of at most width characters, at spaces
// (a longer word gets a line of its own), and starts each line after the
// first with indent.
func wrapText(s string, width int, indent string) string {
	var b strings.Builder
	n := 0
	for _, w := range strings.Fields(s) {
		if n > 0 && n+1+len(w) > width {
			b.WriteString("\n" + indent)
			n = 0
		} else if n > 0 {
			b.WriteByte(' ')
			n++
		}
		b.WriteString(w)
		n += len(w)
	}
	return b.String()
}
