// The faults of a docker-backend server, done in its container through the
// dockerbox supervisor: kill the postmaster, crash one backend, pause and
// resume every postgres process.

package pgproc

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/locklab/locklab/internal/tooling/dockerbox"
)

// serverProcs lists the container's postgres processes.
func (s *Server) serverProcs(ctx context.Context) ([]dockerbox.Proc, error) {
	ps, err := s.box.Procs(ctx)
	if err != nil {
		return nil, err
	}
	var out []dockerbox.Proc
	for _, p := range ps {
		if p.Comm == "postgres" && p.State != "Z" {
			out = append(out, p)
		}
	}
	return out, nil
}

// killBox SIGKILLs the postmaster and returns once every postgres process
// of the container has exited; s.mu is held.
func (s *Server) killBox() {
	if s.pm == 0 || s.box.Sup == nil {
		s.pm, s.stopped = 0, nil
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s.box.Do(ctx, "signal STOP "+strconv.Itoa(s.pm), nil) // forks no more children while they are counted
	kids, _ := s.serverProcs(ctx)
	s.box.Do(ctx, "kill", nil)
	var pids []string
	for _, k := range kids {
		if k.Pid != s.pm {
			pids = append(pids, strconv.Itoa(k.Pid))
		}
	}
	if len(pids) > 0 { // a paused backend cannot notice its postmaster's death
		s.box.Do(ctx, "signal CONT "+strings.Join(pids, " "), nil)
	}
	s.waitBoxGone(ctx, nil)
	s.pm, s.stopped = 0, nil
}

// waitBoxGone polls until none of pids (every postgres process when nil)
// runs in the container, or ctx ends.
func (s *Server) waitBoxGone(ctx context.Context, pids []int) error {
	delay := time.Millisecond
	for {
		ps, err := s.serverProcs(ctx)
		if err != nil {
			return err
		}
		left := slices.ContainsFunc(ps, func(p dockerbox.Proc) bool { return pids == nil || slices.Contains(pids, p.Pid) })
		if !left {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("pgproc: postgres processes still run in %s: %w", s.box.Name, ctx.Err())
		case <-time.After(delay):
		}
		delay = min(2*delay, 20*time.Millisecond)
	}
}

// children are the postmaster's children in the container.
func (s *Server) boxChildren(ctx context.Context) ([]int, error) {
	ps, err := s.serverProcs(ctx)
	if err != nil {
		return nil, err
	}
	var out []int
	for _, p := range ps {
		if p.PPid == s.pm {
			out = append(out, p.Pid)
		}
	}
	return out, nil
}

// crashBox is CrashBackend in the container; s.mu is held.
func (s *Server) crashBox(ctx context.Context, pid int) error {
	if s.pm == 0 {
		return errors.New("pgproc: server not running")
	}
	kids, err := s.boxChildren(ctx)
	if err != nil {
		return err
	}
	if !slices.Contains(kids, pid) {
		return fmt.Errorf("pgproc: %d is no backend of postmaster %d", pid, s.pm)
	}
	if err := s.box.Do(ctx, "signal KILL "+strconv.Itoa(pid), nil); err != nil {
		return err
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := s.waitBoxGone(wctx, kids); err != nil {
		return err
	}
	return s.waitReady(ctx, nil)
}

// stopBox is Stop in the container: the postmaster, then its children;
// s.mu is held.
func (s *Server) stopBox() error {
	if s.pm == 0 {
		return errors.New("pgproc: server not running")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.box.Do(ctx, "signal STOP "+strconv.Itoa(s.pm), nil); err != nil {
		return err
	}
	s.stopped = []int{s.pm}
	kids, err := s.boxChildren(ctx)
	if err != nil {
		return err
	}
	if len(kids) > 0 {
		var ps []string
		for _, k := range kids {
			ps = append(ps, strconv.Itoa(k))
		}
		s.box.Do(ctx, "signal STOP "+strings.Join(ps, " "), nil) // a child that exited meanwhile fails its kill alone
		s.stopped = append(s.stopped, kids...)
	}
	return nil
}

// contBox resumes what stopBox paused, the children before the
// postmaster; s.mu is held.
func (s *Server) contBox() {
	if len(s.stopped) == 0 || s.box.Sup == nil {
		s.stopped = nil
		return
	}
	var ps []string
	for i := len(s.stopped) - 1; i >= 0; i-- {
		ps = append(ps, strconv.Itoa(s.stopped[i]))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s.box.Do(ctx, "signal CONT "+strings.Join(ps, " "), nil)
	s.stopped = nil
}

// backendsBox is Backends in the container; s.mu is held.
func (s *Server) backendsBox() []int {
	if s.pm == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	kids, _ := s.boxChildren(ctx)
	return kids
}
