// Package serverproc is one server process of a store's throwaway
// servers (an etcdproc member, a zkproc server): a local process, or one
// inside a container (dockerbox), started again on the same flags after a
// kill, and the faults done to it: a crash (Kill) and a frozen host (Stop,
// then Cont). A store's package embeds (or holds) a Proc in its server type
// and says how to launch it. A server whose children serve its clients
// (postgres's backends) is a Proc WithChildren: its faults strike them too
// (see tree.go).
package serverproc

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/locklab/locklab/internal/tooling/procid"
)

// Proc is one supervised server process. Its zero value, with What and
// Timeout set, has no process until Launch.
type Proc struct {
	// What names the process in errors: "etcdproc: member m1".
	What string
	// Timeout bounds a container's answer to a start, a kill or a signal,
	// and the wait until the children of a killed process have exited.
	Timeout time.Duration
	// WithChildren makes the process's children part of it: Stop pauses
	// them too and Cont resumes them, Kill returns once they have exited
	// too (they are resumed, so that they notice their parent's death).
	WithChildren bool

	mu      sync.Mutex
	cmd     *exec.Cmd
	done    chan struct{}
	stopped bool
	// paused are the children Stop paused, for Cont (WithChildren).
	paused []int
	// box is the process's container on the docker backend, and pid the
	// process's id there (0: not running); cmd and done stay nil.
	box Box
	pid int
}

// Box is the container a process runs in on the docker backend: a
// *dockerbox.Container, whose first process, a supervisor, starts, signals
// and kills the server on command (its Script). An interface, so that a
// store with no docker backend (redisproc) builds without a Docker client.
type Box interface {
	// Start starts the server and returns its pid; Do sends the
	// supervisor a command and expects "ok"; Alive asks whether the
	// server runs; Procs lists the container's processes.
	Start(ctx context.Context, args ...string) (int, error)
	Do(ctx context.Context, cmd string, body []string) error
	Alive(ctx context.Context) (bool, error)
	Procs(ctx context.Context) ([]procid.Proc, error)
	// Supervised reports whether the supervisor is reached (not once
	// the container is removed).
	Supervised() bool
	// LogTail returns the last n lines of the container's log.
	LogTail(n int) string
	// Remove removes the container.
	Remove() error
	// String names the container.
	String() string
}

// Spec is how Launch starts the process.
type Spec struct {
	// Check, when set, refuses the launch with its error (the server's
	// cluster was closed); it runs with the Proc's lock held, so that a
	// Close that kills every process after it sees none start.
	Check func() error
	// Local is the program and its arguments on this host; InBox in the
	// container.
	Local, InBox []string
	// Dir is the local process's working directory, and LogPath the file
	// its output is appended to ("": the output is discarded).
	Dir, LogPath string
	// Env are variables the local process's environment starts with,
	// before this process's own.
	Env []string
	// DropEnv, when set, leaves out of the local process's environment
	// the variables it reports (etcd reads ETCD_* as flags).
	DropEnv func(kv string) bool
	// Cred, when set, is the user the local process runs as.
	Cred *syscall.Credential
}

// Command prepares spec.Local to run on this host as Launch runs it, in a
// process group of its own and dying with this process (Pdeathsig), for a
// program that is no supervised server (postgres's initdb).
func (spec Spec) Command() *exec.Cmd {
	cmd := exec.Command(spec.Local[0], spec.Local[1:]...)
	cmd.Dir = spec.Dir
	cmd.Env = append([]string(nil), spec.Env...)
	for _, kv := range os.Environ() {
		if spec.DropEnv == nil || !spec.DropEnv(kv) {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL, Credential: spec.Cred}
	return cmd
}

// SetBox makes the process one in box, from the next Launch.
func (p *Proc) SetBox(box Box) {
	p.mu.Lock()
	p.box = box
	p.mu.Unlock()
}

// Box is the process's container, nil on this host.
func (p *Proc) Box() Box {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.box
}

// Launch starts the process as spec says and returns at once; it is an
// error while one runs. A local process is in a process group of its own
// and dies with this one (Pdeathsig).
func (p *Proc) Launch(spec Spec) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if spec.Check != nil {
		if err := spec.Check(); err != nil {
			return err
		}
	}
	if p.cmd != nil || p.pid != 0 {
		return fmt.Errorf("%s is running", p.What)
	}
	if p.box != nil {
		ctx, cancel := context.WithTimeout(context.Background(), p.Timeout)
		defer cancel()
		pid, err := p.box.Start(ctx, spec.InBox...)
		if err != nil {
			return fmt.Errorf("%s: %w", p.What, err)
		}
		p.pid, p.stopped, p.paused = pid, false, nil
		return nil
	}
	if len(spec.Local) == 0 {
		return fmt.Errorf("%s: no program to start", p.What)
	}
	cmd := spec.Command()
	if spec.LogPath != "" {
		log, err := os.OpenFile(spec.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return err
		}
		defer log.Close()
		cmd.Stdout, cmd.Stderr = log, log
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("%s: %w", p.What, err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	p.cmd, p.done, p.stopped, p.paused = cmd, done, false, nil
	return nil
}

// Pid is the process id (in its container, on the docker backend), or 0
// when it is not running.
func (p *Proc) Pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.box != nil {
		return p.pid
	}
	if p.cmd == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// Exited is closed when the current process has exited (nil when none was
// started, and on the docker backend).
func (p *Proc) Exited() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.done
}

// Running reports whether the process runs and is not paused.
func (p *Proc) Running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.box != nil {
		return p.pid != 0 && !p.stopped
	}
	if p.cmd == nil || p.stopped {
		return false
	}
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// Kill kills the process with SIGKILL, as a crash would, and waits for it
// to exit (WithChildren: its children too). What it wrote stays, for the
// next Launch. Killing a process that is not running does nothing.
func (p *Proc) Kill() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.killLocked()
}

func (p *Proc) killLocked() {
	ctx, cancel := context.WithTimeout(context.Background(), p.Timeout)
	defer cancel()
	if p.box != nil {
		if p.pid != 0 && p.box.Supervised() {
			// A container that fails to answer is removed by its Close.
			kids := p.stopChildrenLocked(ctx)
			p.box.Do(ctx, "kill", nil)
			p.signalChildren(ctx, syscall.SIGCONT, kids)
			p.waitGone(ctx, kids)
		}
		p.pid, p.stopped, p.paused = 0, false, nil
		return
	}
	if p.cmd == nil {
		return
	}
	kids := p.stopChildrenLocked(ctx)
	if kids == nil {
		p.cmd.Process.Signal(syscall.SIGCONT) // a paused process cannot be reaped
	}
	p.cmd.Process.Kill()
	<-p.done
	p.signalChildren(ctx, syscall.SIGCONT, kids)
	p.waitGone(ctx, kids)
	p.cmd, p.stopped, p.paused = nil, false, nil
}

// Stop pauses the process with SIGSTOP, as a frozen host would: its
// connections stay open and it answers nothing, to clients or peers.
// WithChildren, it pauses the process, then each of its children.
func (p *Proc) Stop() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.signalLocked(syscall.SIGSTOP); err != nil {
		return err
	}
	p.stopped = true
	if !p.WithChildren {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), p.Timeout)
	defer cancel()
	kids, err := p.childrenLocked(ctx)
	if err != nil {
		return err
	}
	p.signalChildren(ctx, syscall.SIGSTOP, kids) // a child that exited meanwhile fails its signal alone
	for _, k := range kids {
		p.paused = append(p.paused, k.Pid)
	}
	return nil
}

// Cont resumes a process paused by Stop. WithChildren, it resumes what
// Stop paused, the children before the process, and fails on nothing: a
// process that exited meanwhile is not resumed.
func (p *Proc) Cont() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.WithChildren {
		if err := p.signalLocked(syscall.SIGCONT); err != nil {
			return err
		}
		p.stopped = false
		return nil
	}
	p.contLocked()
	return nil
}

// Signal sends sig to the process (not to its children), leaving what
// Running says as it was.
func (p *Proc) Signal(sig syscall.Signal) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.signalLocked(sig)
}

func (p *Proc) signalLocked(sig syscall.Signal) error {
	switch {
	case p.box != nil && p.pid != 0:
		ctx, cancel := context.WithTimeout(context.Background(), p.Timeout)
		defer cancel()
		return p.box.Do(ctx, "signal "+signalName(sig)+" "+strconv.Itoa(p.pid), nil)
	case p.box == nil && p.cmd != nil:
		return p.cmd.Process.Signal(sig)
	default:
		return fmt.Errorf("%s not running", p.What)
	}
}

// signalName is sig's name as kill(1) takes it: "STOP".
func signalName(sig syscall.Signal) string {
	return strings.TrimPrefix(unix.SignalName(sig), "SIG")
}

// BoxAlive reports whether the process runs in its container (a stopped
// one does); an unanswered question is taken for yes. False on this host.
func (p *Proc) BoxAlive(ctx context.Context) bool {
	box := p.Box()
	if box == nil || !box.Supervised() {
		return false
	}
	alive, err := box.Alive(ctx)
	return alive || err != nil
}

// LogTail returns the last n lines of the process's output: the file at
// logPath on this host, the container's log on the docker backend.
func (p *Proc) LogTail(logPath string, n int) string {
	if box := p.Box(); box != nil {
		return box.LogTail(n)
	}
	b, err := os.ReadFile(logPath)
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	return procid.TailLines(string(b), n)
}
