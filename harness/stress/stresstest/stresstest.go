// Package stresstest makes a test binary the worker processes of its own
// process-mode stress runs (stress.Options.Processes), so that a
// package's tests need not build cmd/locklab: Main in its TestMain,
// WorkerCommand in its runs' Options, NoWorkersLeft after them.
package stresstest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

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
func Main(m *testing.M) {
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
	os.Exit(m.Run())
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
