package cli

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/locklab/locklab/harness/render"
	"github.com/locklab/locklab/strategies"
)

func newListCmd() *cobra.Command {
	var asJSON, long bool
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the registered strategies with family, summary and source",
		Long: `List the registered strategies. BROKEN says "by design" for the
historical algorithms that lose mutual exclusion or liveness on one healthy
server, with no fault but a client's own crash, delay or race: they are here
to be raced and watched failing, never to protect anything. --long says how
each one breaks.`,
		Example: `  locklab list
  locklab list --long      # with sources and known weaknesses
  locklab list --json`,
		Args: usageArgs(0, 0, ""),
		RunE: func(cmd *cobra.Command, _ []string) error {
			all := strategies.All()
			if asJSON {
				return render.JSON(cmd.OutOrStdout(), all)
			}
			return writeList(cmd.OutOrStdout(), all, long)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.Flags().BoolVarP(&long, "long", "l", false, "also print each strategy's source and known weaknesses")
	return cmd
}

func writeList(w io.Writer, all []strategies.Description, long bool) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "STRATEGY\tFAMILY\tBROKEN\tSUMMARY")
	for _, d := range all {
		broken := "-"
		if d.BrokenByDesign != "" {
			broken = "by design"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", d.Name, d.Family, broken, d.Summary)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if !long {
		return nil
	}
	for _, d := range all {
		fmt.Fprintf(w, "\n%s (%s)\n  source: %s\n", d.Name, d.Family, d.Source)
		if d.BrokenByDesign != "" {
			fmt.Fprintf(w, "  broken by design: %s\n", d.BrokenByDesign)
		}
		for _, wk := range d.Weaknesses {
			fmt.Fprintf(w, "  - %s\n", wk)
		}
		fmt.Fprintf(w, "  properties: %s\n", props(d.Properties))
	}
	return nil
}

func props(p strategies.Properties) string {
	var out []string
	add := func(ok bool, name string) {
		if ok {
			out = append(out, name)
		} else {
			out = append(out, "no "+name)
		}
	}
	add(p.AtomicAcquire, "atomic acquire")
	add(p.ServerTTL, "server TTL")
	add(p.OwnerCheckedRelease, "owner-checked release")
	add(p.Fencing, "fencing")
	add(p.Extend, "extend")
	return strings.Join(out, ", ")
}
