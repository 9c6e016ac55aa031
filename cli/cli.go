// Package cli is locklab's command line as a package: a program that
// registers a lock of its own and calls Main gets locklab's commands on it
// (list, demo, explore, matrix, report, play, stress, ...), with the same
// flags, output and exit statuses as the locklab binary, which is Main and
// nothing else (cmd/locklab).
//
//	package main
//
//	import (
//		"github.com/locklab/locklab"
//		"github.com/locklab/locklab/cli"
//		"github.com/locklab/locklab/strategies"
//	)
//
//	func main() {
//		strategies.MustRegister(strategies.Description{Name: "my-lock", Family: "mine"},
//			func(cfg locklab.Config) (locklab.Locker, error) { return mylock.New(cfg.Pool), nil })
//		cli.Main()
//	}
//
// Then "go run . list" lists my-lock beside the built-in strategies, and
// "go run . matrix -s my-lock", "go run . explore --strategy my-lock
// --scenario release-after-expiry" and "go run . demo release-after-expiry
// -s my-lock" race it on real servers. The lock is written as for
// locklabtest: every command it sends through the Config's Pool (or Nodes)
// is one step of a schedule; a lock whose Description.Family names
// another store ("etcd", "postgres", "zookeeper") runs on that store's
// servers and takes the store's client from Config.Store, which its
// Description asks for with strategies.OptStore in its Options.
//
// Register the lock before Main, in main or an init: "stress --processes"
// runs its clients as processes of the same program (the hidden command
// "worker"), which must register it too. The race harness gives the lock
// a seeded Config.Rand and its virtual Config.Clock, stress mode
// crypto/rand and the system clock.
//
// Run runs a command line in the program's own process and returns its
// exit status, as a test does; Command is the root command, for a program
// that adds commands of its own. examples/lockcli in locklab's repository
// is a program of this kind, and docs/audit.md shows its runs.
//
// The commands:
//
//	locklab list                 the strategies, their family, source and weaknesses
//	locklab race-demo            the C1/C2 double acquire of the SETNX page
//	locklab demo <scenario>      one scenario, step by step, as a timeline
//	locklab explore ...          search schedules for a counterexample
//	locklab matrix               every strategy against every scenario
//	locklab play                 be the scheduler in the browser, level by level
//
// Run "locklab <command> --help" for the flags of each. Every flag and
// argument is checked before any server starts (flags.go). The exit status
// is 0 when the command ran, whatever it found; 1 when --fail-on-violation
// was given and a violation was found; 2 on errors, a bad flag or argument
// among them, told in one line on stderr; 130 when Ctrl-C (SIGINT) ended
// it, 143 for SIGTERM, once it has removed what it started.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"runtime/pprof"
	"strings"
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
	// args is the command line as given, for the messages.
	args argv
}

// needsServers marks, in a command's Annotations, the commands that start
// Redis servers or use those given with --addr: their --backend and --addr
// are checked before the command runs.
const needsServers = "locklab/servers"

// newRoot is the CLI; args, when given, is the command line it runs, which
// its messages quote (else it runs os.Args, or what SetArgs gives it).
func newRoot(args ...string) *cobra.Command {
	g := &globals{args: args}
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
process.

On a server given with --addr, a run writes only keys that carry a fresh
namespace of its own, "{locklab:<random id>}:...", in the database the URL
names; it flushes nothing, moves no TTL but its own keys', changes no
setting, and deletes its namespace's keys when it ends (Ctrl-C too).`,
		SilenceUsage:       true,
		SilenceErrors:      true,
		DisableSuggestions: true, // execute adds them, on the same line
	}
	if args != nil {
		root.SetArgs(args)
	}
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error { return g.args.flagError(cmd, err) })
	pf := root.PersistentFlags()
	pf.StringVar(&g.backend, "backend", os.Getenv("LOCKLAB_BACKEND"), `where Redis servers come from: docker, process or addrs (default: docker if an engine answers, else process; env LOCKLAB_BACKEND)`)
	pf.StringVar(&g.image, "image", os.Getenv("LOCKLAB_REDIS_IMAGE"), `Redis image for the docker backend (default redis:7, built locally when absent; env LOCKLAB_REDIS_IMAGE)`)
	pf.StringVar(&g.cpuProfile, "cpuprofile", "", "write a CPU profile of the command to this file")
	_ = pf.MarkHidden("cpuprofile")
	root.PersistentPreRunE = func(cmd *cobra.Command, _ []string) error {
		if cmd.Annotations[needsServers] != "" {
			if err := g.checkServers(cmd); err != nil {
				return err
			}
		}
		return g.startProfile()
	}
	root.PersistentPostRun = func(*cobra.Command, []string) { pprof.StopCPUProfile() }
	pf.StringSliceVar(&g.addrs, "addr", nil, `a Redis server for the addrs backend: host:port, password@host:port, or a URL redis://[user:password@]host:port[/db] (rediss:// for TLS); repeat for several. A run there writes and deletes only keys of a namespace of its own`)

	root.AddCommand(newListCmd(), newBenchCmd(g), newRaceDemoCmd(g), newScenariosCmd(), newDemoCmd(g), newExploreCmd(g),
		newMatrixCmd(g), newStressCmd(g), newReportCmd(g), newPlayCmd(g), newWorkerCmd())
	root.AddCommand(newCheckCmd(g))
	return root
}

// commandLine is the command line the root runs, without the program's
// name: the args Run gave it, else os.Args[1:].
func (g *globals) commandLine() []string {
	if g.args != nil {
		return g.args
	}
	return os.Args[1:]
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

// serverCmd marks cmd as one that needs Redis servers (needsServers).
func serverCmd(cmd *cobra.Command) *cobra.Command {
	if cmd.Annotations == nil {
		cmd.Annotations = map[string]string{}
	}
	cmd.Annotations[needsServers] = "yes"
	return cmd
}

// signalled is the cause of the context of a run that a signal ended.
type signalled struct{ sig syscall.Signal }

func (s signalled) Error() string { return s.sig.String() }

// Main runs the command line of os.Args and exits with its status (see
// Run). The first SIGINT or SIGTERM ends the command, which then removes
// the servers it started, and the process exits with 130 or 143.
func Main() {
	// A matrix opens and closes client connections by the ten thousand,
	// and their buffers are much of what it allocates: at Go's default
	// (GOGC=100) the collector runs every few runs. Between collections
	// the heap may grow to five times what is live (zk-recipe's cells that
	// fault no server, back to back: 7% less CPU, servers included, the
	// largest process 255 MB where it was 123); GOGC, when set, says
	// otherwise.
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(gcPercent)
	}
	// The first SIGINT or SIGTERM cancels the run, which then removes what
	// it started; later ones are ignored while it does.
	ctx, cancel := context.WithCancelCause(context.Background())
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		s := <-sigs
		cancel(signalled{s.(syscall.Signal)})
	}()
	// A closed stdout (locklab ... | head) must end the command with an
	// error, so that its nodes are removed, not kill the process.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
	os.Exit(execute(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// gcPercent is the collector's target Main sets where GOGC is not set.
const gcPercent = 400

// Run runs the command line args (without the program's name: "matrix",
// "-s", "my-lock") in this process, writing to stdout and stderr, and
// returns its exit status: 0 when the command ran, whatever it found; 1
// for a violation found with --fail-on-violation; 2 for an error, told in
// one line on stderr (among them a lock's own client, beside the one its
// factory was given, that the servers explore, matrix or demo started
// counted: docs/audit.md). Cancelling ctx ends the command, which removes the
// servers it started before Run returns.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return execute(ctx, args, stdout, stderr)
}

// Command returns a new root command, "locklab" and its commands, for a
// program that adds commands of its own to it or puts it under a root of
// its own (where "stress --processes" finds the hidden worker command, to
// run its clients as the program's processes). It runs os.Args[1:], or
// what SetArgs gives it. Its errors are silenced, since Main and Run tell
// them in one line of their own: a program that executes it prints the
// error Execute returns.
func Command() *cobra.Command { return newRoot() }

// execute runs the command line args and returns the exit status: 0; 1
// for a violation found with --fail-on-violation; 2 for an error, written
// to stderr in one line; 128 + the signal's number when a signal ended the
// run (130 for SIGINT), once the command has removed what it started.
func execute(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	root := newRoot(args...)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(ctx)
	var sig signalled
	if errors.As(context.Cause(ctx), &sig) {
		// The run's error, if any, is the interrupt's doing: a command cut
		// short, or a server that node's own signal handler (cleanup.go)
		// removed under a command. The status says what happened.
		return 128 + int(sig.sig)
	}
	if err == nil {
		return 0
	}
	msg := errorLine(err)
	if strings.HasPrefix(msg, "unknown command ") && len(args) > 0 {
		if s := root.SuggestionsFor(args[0]); len(s) > 0 {
			msg += "; did you mean " + strings.Join(s, " or ") + "?"
		} else {
			msg += " (locklab --help lists the commands)"
		}
	}
	fmt.Fprintln(stderr, "locklab:", msg)
	if errors.Is(err, errViolation) {
		return 1
	}
	return 2
}

// closeAndTell closes c, servers a command started, and tells on w what
// could not be removed: that much is left for the user to remove.
func closeAndTell(w io.Writer, c io.Closer) {
	if err := c.Close(); err != nil {
		fmt.Fprintln(w, "locklab: not all removed:", errorLine(err))
	}
}

// errorLine is err as one line, without a "locklab: " of its own (the
// library's errors start with one) before the one main writes.
func errorLine(err error) string {
	s := err.Error()
	for strings.HasPrefix(s, "locklab: ") {
		s = strings.TrimPrefix(s, "locklab: ")
	}
	var lines []string
	for l := range strings.SplitSeq(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	return strings.Join(lines, "; ")
}
