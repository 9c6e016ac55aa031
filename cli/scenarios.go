// locklab scenarios: the scenario catalog.

package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/locklab/locklab/harness"
	"github.com/locklab/locklab/harness/render"
)

func newScenariosCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "scenarios",
		Short: "List the scenario catalog: name, property checked, source and story",
		Args:  usageArgs(0, 0, ""),
		RunE: func(cmd *cobra.Command, _ []string) error {
			all := harness.Scenarios()
			w := cmd.OutOrStdout()
			if asJSON {
				return render.JSON(w, all)
			}
			for _, sc := range all {
				fmt.Fprintf(w, "%s — %s\n  checks: %s\n  source: %s\n  %s\n\n", sc.Name, sc.Title, sc.Property, sc.Source, wrapText(sc.Story, 76, "  "))
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}
