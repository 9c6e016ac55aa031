package cli

import (
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/locklab/locklab/harness/stress"
)

// workerName is the hidden worker command's name.
const workerName = "worker"

// newWorkerCmd is the hidden command that runs one client of
// "locklab stress --processes": its flags are built by package stress and
// parsed by stress.Worker, its events go to stdout as JSON lines, and the
// register's answers come from stdin.
func newWorkerCmd() *cobra.Command {
	return &cobra.Command{
		Use:                workerName,
		Short:              "One client of a process-mode stress run (internal)",
		Hidden:             true,
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			return stress.Worker(cmd.Context(), args, os.Stdin, os.Stdout)
		},
	}
}

// workerCommand is the command line that runs the worker command of cmd's
// root: the program, then the path to the worker from the program's root
// ("worker" under locklab's own root; "locklab worker" where a program put
// Command's root under a root of its own).
func workerCommand(cmd *cobra.Command) ([]string, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	for c := cmd; c != nil; c = c.Parent() {
		for _, sub := range c.Commands() {
			if sub.Name() == workerName {
				return append([]string{exe}, strings.Fields(sub.CommandPath())[1:]...), nil
			}
		}
	}
	return []string{exe, workerName}, nil
}
