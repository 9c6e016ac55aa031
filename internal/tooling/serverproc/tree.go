// The children of a process WithChildren (postgres's backends, which each
// lead a session of their own, so that no process group holds them): read
// from /proc on this host, from the supervisor's ps in a container, and
// signalled as a set of pids.

package serverproc

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/locklab/locklab/internal/tooling/procid"
)

// Child is a child process of the server's: its pid (in its container, on
// the docker backend) and, on this host, its start time, so that a reused
// pid is not taken for it.
type Child struct {
	Pid   int
	start string
}

// Children returns the process's children that have not exited, nil when
// it is not running.
func (p *Proc) Children(ctx context.Context) ([]Child, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.childrenLocked(ctx)
}

func (p *Proc) childrenLocked(ctx context.Context) ([]Child, error) {
	if p.box != nil {
		if p.pid == 0 || !p.box.Supervised() {
			return nil, nil
		}
		ps, err := p.box.Procs(ctx)
		if err != nil {
			return nil, err
		}
		var out []Child
		for _, q := range ps {
			if q.PPid == p.pid && q.State != "Z" {
				out = append(out, Child{Pid: q.Pid})
			}
		}
		return out, nil
	}
	if p.cmd == nil || p.exitedLocked() { // its pid may name another process by now
		return nil, nil
	}
	return localChildren(p.cmd.Process.Pid), nil
}

// exitedLocked reports whether the local process has exited.
func (p *Proc) exitedLocked() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// localChildren lists the processes on this host whose parent is ppid.
func localChildren(ppid int) []Child {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	parent := strconv.Itoa(ppid)
	var out []Child
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		st, err := procid.Stat(pid)
		if err != nil || len(st) < 20 || st[1] != parent || st[0] == "Z" {
			continue
		}
		out = append(out, Child{Pid: pid, start: st[19]})
	}
	return out
}

// gone reports whether the local child c has exited: no such process, a
// zombie, or its pid now names a later process.
func (c Child) gone() bool {
	st, err := procid.Stat(c.Pid)
	if err != nil || len(st) < 20 {
		return true
	}
	return st[0] == "Z" || st[0] == "X" || st[19] != c.start
}

// stopChildrenLocked pauses the process, so that it forks no more
// children while they are counted, and returns its children; nil, doing
// nothing, when it is not WithChildren.
func (p *Proc) stopChildrenLocked(ctx context.Context) []Child {
	if !p.WithChildren || (p.box == nil && p.exitedLocked()) {
		return nil
	}
	if p.signalLocked(syscall.SIGSTOP) != nil {
		return nil
	}
	kids, _ := p.childrenLocked(ctx)
	return kids
}

// SignalChild sends sig to c, a child of the process's.
func (p *Proc) SignalChild(ctx context.Context, c Child, sig syscall.Signal) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.box == nil && c.gone() {
		return fmt.Errorf("%s: process %d has exited", p.What, c.Pid)
	}
	return p.signalPids(ctx, sig, []int{c.Pid})
}

// signalChildren sends sig to each of kids, ignoring the errors of those
// that exited meanwhile.
func (p *Proc) signalChildren(ctx context.Context, sig syscall.Signal, kids []Child) {
	var pids []int
	for _, k := range kids {
		if p.box != nil || !k.gone() {
			pids = append(pids, k.Pid)
		}
	}
	p.signalPids(ctx, sig, pids)
}

// signalPids sends sig to pids, in one command to the supervisor on the
// docker backend; the error is the first signal's that failed.
func (p *Proc) signalPids(ctx context.Context, sig syscall.Signal, pids []int) error {
	if len(pids) == 0 {
		return nil
	}
	if p.box != nil {
		if !p.box.Supervised() {
			return fmt.Errorf("%s not running", p.What)
		}
		ps := make([]string, len(pids))
		for i, pid := range pids {
			ps[i] = strconv.Itoa(pid)
		}
		return p.box.Do(ctx, "signal "+signalName(sig)+" "+strings.Join(ps, " "), nil)
	}
	var first error
	for _, pid := range pids {
		if err := syscall.Kill(pid, sig); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// contLocked resumes what Stop paused, the children (in the reverse order
// of their pausing) before the process.
func (p *Proc) contLocked() {
	if p.stopped {
		ctx, cancel := context.WithTimeout(context.Background(), p.Timeout)
		defer cancel()
		pids := slices.Clone(p.paused)
		slices.Reverse(pids)
		if p.box != nil && p.pid != 0 {
			pids = append(pids, p.pid)
			p.signalPids(ctx, syscall.SIGCONT, pids)
		} else if p.box == nil && p.cmd != nil {
			p.signalPids(ctx, syscall.SIGCONT, pids)
			p.cmd.Process.Signal(syscall.SIGCONT)
		}
	}
	p.stopped, p.paused = false, nil
}

// WaitGone returns once each of kids has exited, or with an error when ctx
// ends first.
func (p *Proc) WaitGone(ctx context.Context, kids []Child) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.waitGone(ctx, kids)
}

func (p *Proc) waitGone(ctx context.Context, kids []Child) error {
	if len(kids) == 0 {
		return nil
	}
	delay := time.Millisecond
	for {
		left, err := p.anyLeft(ctx, kids)
		if err != nil {
			return err
		}
		if !left {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: its children still run: %w", p.What, ctx.Err())
		case <-time.After(delay):
		}
		delay = min(2*delay, 20*time.Millisecond)
	}
}

// anyLeft reports whether one of kids still runs.
func (p *Proc) anyLeft(ctx context.Context, kids []Child) (bool, error) {
	if p.box == nil {
		return slices.ContainsFunc(kids, func(c Child) bool { return !c.gone() }), nil
	}
	if !p.box.Supervised() {
		return false, nil // the container is gone, and they with it
	}
	ps, err := p.box.Procs(ctx)
	if err != nil {
		return false, err
	}
	return slices.ContainsFunc(ps, func(q procid.Proc) bool {
		return q.State != "Z" && slices.ContainsFunc(kids, func(c Child) bool { return c.Pid == q.Pid })
	}), nil
}

// Quit asks the process to exit with sig (postgres's SIGQUIT: an
// immediate shutdown), resumed first if Stop paused it, and waits up to
// timeout for it, and WithChildren for its children, to exit; one that
// still runs then is killed (Kill). On the docker backend it is Kill.
func (p *Proc) Quit(sig syscall.Signal, timeout time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.box != nil || p.cmd == nil {
		p.killLocked()
		return
	}
	p.contLocked()
	var kids []Child
	if p.WithChildren {
		kids, _ = p.childrenLocked(context.Background())
	}
	p.cmd.Process.Signal(sig)
	select {
	case <-p.done:
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		p.waitGone(ctx, kids)
		cancel()
		p.cmd = nil
	case <-time.After(timeout):
		p.killLocked()
	}
}
