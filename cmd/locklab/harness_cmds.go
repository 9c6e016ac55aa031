package main

import (
	"errors"

	"github.com/spf13/cobra"
)

// addHarnessCommands adds the commands that run the race harness.
func addHarnessCommands(root *cobra.Command, g *globals) {
	root.AddCommand(&cobra.Command{
		Use:   "race-demo",
		Short: "Reproduce the C1/C2 double acquire of the SETNX page on real Redis",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return errors.New("race-demo: the race harness is not built yet")
		},
	})
}
