// Package stresstest makes a test binary the worker processes of its own
// process-mode stress runs (stress.Options.Processes), so that a
// package's tests need not build cmd/locklab: Main in its TestMain,
// WorkerCommand in its runs' Options, NoWorkersLeft after them. Until
// runs a stress run until it has done the work a test checks.
package stresstest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/locklab/locklab/harness/stress"
)

// arg0 makes the test binary a stress worker: WorkerCommand re-executes
// it with this first argument.
const arg0 = "locklab-stress-worker"

// tag marks a worker with the test that started it, so that a test
// running in parallel with others checks only its own workers.
const tag = "test="

// Main runs the package's tests, or, in a process WorkerCommand started,
// one worker (stress.Worker) on stdin and stdout. A package calls it from
// its TestMain.
func Main(m *testing.M) { os.Exit(Run(m)) }

// Run is Main that returns the tests' exit code, for a TestMain with
// more to close after them; in a worker's process it does not return.
func Run(m *testing.M) int {
	if len(os.Args) > 1 && os.Args[1] == arg0 {
		args := os.Args[2:]
		if len(args) > 0 && strings.HasPrefix(args[0], tag) {
			args = args[1:]
		}
		if err := stress.Worker(context.Background(), args, os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		os.Exit(0)
	}
	return m.Run()
}

// WorkerCommand is the Options.WorkerCommand of t's runs: the test binary,
// as a worker of t.
func WorkerCommand(t testing.TB) []string {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return []string{exe, arg0, tag + tagOf(t)}
}

func tagOf(t testing.TB) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			return r
		}
		return '_'
	}, t.Name())
}

// NoWorkersLeft checks that no worker t started is still running.
func NoWorkersLeft(t testing.TB) {
	t.Helper()
	out, _ := exec.Command("pgrep", "-f", arg0+" "+tag+tagOf(t)+" ").Output()
	assert.Empty(t, strings.TrimSpace(string(out)), "worker processes left behind")
}

// Until runs o until done, given each snapshot of the run's progress
// (about every 250ms), says the run has done the work t checks: node
// faults over, cycles after them, a violation. o.Duration is a deadline
// for a loaded machine, not the length of the run: t fails, with what the
// run did, if the run ends before the work is done, at that deadline or
// at a violation that ends it (a liveness one, or any with
// StopOnViolation). Until ends the run through its context, so the report
// says Interrupted.
func Until(t testing.TB, o stress.Options, done func(stress.Progress) bool) *stress.Report {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var last stress.Progress
	reached := false
	progress := o.Progress
	o.Progress = func(p stress.Progress) {
		if progress != nil {
			progress(p)
		}
		last = p
		if !reached && done(p) {
			reached = true
			cancel()
		}
	}
	rep, err := stress.Run(ctx, o)
	require.NoError(t, err)
	require.True(t, reached, "the run ended before the work the test checks was done (last progress %+v): "+
		"%d cycles, %d node faults, liveness %q, violations %+v", last, rep.Cycles, len(rep.NodeFaults), rep.Liveness, rep.First)
	return rep
}

// AfterFaults is a done of Until: k node faults over and healed, and n
// cycles completed after the k-th.
func AfterFaults(k int, n int64) func(stress.Progress) bool {
	from := int64(-1) // the cycles when the k-th fault was first seen over
	return func(p stress.Progress) bool {
		if p.NodeFaults < k {
			return false
		}
		if from < 0 {
			from = p.Cycles
		}
		return p.Cycles-from >= n
	}
}

// Cycles fails t, saying how the run ended, if the run of rep, one of
// Options.Cycles n, did not complete its n cycles: it ended first, at its
// Duration, a deadline for a loaded machine, or at a violation that ends
// it (a liveness one, or any with StopOnViolation).
func Cycles(t testing.TB, rep *stress.Report, n int64) {
	t.Helper()
	require.GreaterOrEqual(t, rep.Cycles, n, "the run ended before its cycles, in %v: liveness %q, violations %+v",
		rep.Elapsed, rep.Liveness, rep.First)
}
