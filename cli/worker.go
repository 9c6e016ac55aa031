package cli

import (
	"os"

	"github.com/spf13/cobra"

	"github.com/locklab/locklab/harness/stress"
)

// newWorkerCmd is the hidden command that runs one client of
// "locklab stress --processes": its flags are built by package stress and
// parsed by stress.Worker, its events go to stdout as JSON lines, and the
// register's answers come from stdin.
func newWorkerCmd() *cobra.Command {
	return &cobra.Command{
		Use:                "worker",
		Short:              "One client of a process-mode stress run (internal)",
		Hidden:             true,
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			return stress.Worker(cmd.Context(), args, os.Stdin, os.Stdout)
		},
	}
}
