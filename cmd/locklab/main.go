// Command locklab races the historical Redis locking algorithms on real Redis
// servers and shows which of them break, under which schedule or fault.
//
//	locklab list                 the strategies, their family, source and weaknesses
//	locklab race-demo            the C1/C2 double acquire of the SETNX page
//	locklab demo <scenario>      one scenario, step by step, as a timeline
//	locklab explore ...          search schedules for a counterexample
//	locklab matrix               every strategy against every scenario
//	locklab play                 be the scheduler in the browser, level by level
//
// Run "locklab <command> --help" for the flags of each. The exit status is 0
// when the command ran, whatever it found; 1 when --fail-on-violation was
// given and a violation was found; 2 on errors.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"runtime/pprof"
	"syscall"

	"github.com/spf13/cobra"
)

// globals are the flags every command shares.
type globals struct {
	backend string
	image   string
	addrs   []string
	// cpuProfile: write a CPU profile of the command there (a hidden
	// flag, to find where a run spends its time).
	cpuProfile string
}

func newRoot() *cobra.Command {
	g := &globals{}
	root := &cobra.Command{
		Use:   "locklab",
		Short: "Race Redis lock algorithms on real Redis and watch them break",
		Long: `locklab implements the historical Redis locking algorithms behind one
interface and runs them against real Redis servers under chosen schedules
and faults, to show which violate mutual exclusion or liveness, and how.

Redis servers come from a backend: "docker" (containers; a local image is
built from the host's redis-server when none can be pulled), "process"
(redis-server processes on loopback ports), or "addrs" (servers you run,
given with --addr). The default picks docker where an engine answers, else
process.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	pf := root.PersistentFlags()
	pf.StringVar(&g.backend, "backend", os.Getenv("LOCKLAB_BACKEND"), `where Redis servers come from: docker, process or addrs (default: docker if an engine answers, else process; env LOCKLAB_BACKEND)`)
	pf.StringVar(&g.image, "image", os.Getenv("LOCKLAB_REDIS_IMAGE"), `Redis image for the docker backend (default redis:7, built locally when absent; env LOCKLAB_REDIS_IMAGE)`)
	pf.StringVar(&g.cpuProfile, "cpuprofile", "", "write a CPU profile of the command to this file")
	_ = pf.MarkHidden("cpuprofile")
	root.PersistentPreRunE = func(*cobra.Command, []string) error { return g.startProfile() }
	root.PersistentPostRun = func(*cobra.Command, []string) { pprof.StopCPUProfile() }
	pf.StringSliceVar(&g.addrs, "addr", nil, `a Redis server for the addrs backend: host:port, password@host:port, or a URL redis://[user:password@]host:port[/db] (rediss:// for TLS); repeat for several`)

	root.AddCommand(newListCmd(), newBenchCmd(g), newRaceDemoCmd(g), newScenariosCmd(), newDemoCmd(g), newExploreCmd(g),
		newMatrixCmd(g), newStressCmd(g), newReportCmd(g), newPlayCmd(g), newWorkerCmd())
	return root
}

// startProfile starts the CPU profile --cpuprofile asks for.
func (g *globals) startProfile() error {
	if g.cpuProfile == "" {
		return nil
	}
	f, err := os.Create(g.cpuProfile)
	if err != nil {
		return err
	}
	return pprof.StartCPUProfile(f)
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// A closed stdout (locklab ... | head) must end the command with an
	// error, so that its nodes are removed, not kill the process.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
	if err := newRoot().ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "locklab:", err)
		if errors.Is(err, errViolation) {
			os.Exit(1)
		}
		os.Exit(2)
	}
}
