package main

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
		Example: `  locklab list
  locklab list --long      # with sources and known weaknesses
  locklab list --json`,
		Args: cobra.NoArgs,
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
	fmt.Fprintln(tw, "STRATEGY\tFAMILY\tSUMMARY")
	for _, d := range all {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", d.Name, d.Family, d.Summary)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if !long {
		return nil
	}
	for _, d := range all {
		fmt.Fprintf(w, "\n%s (%s)\n  source: %s\n", d.Name, d.Family, d.Source)
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
