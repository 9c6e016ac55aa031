// The faults done to a server: kill or restart the postmaster, end or crash
// one backend, pause and resume every process.

package pgproc

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"syscall"
	"time"
)

// Pid is the postmaster's process id, or 0 when it is not running.
func (s *Server) Pid() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.box != nil {
		return s.pm
	}
	if s.cmd == nil {
		return 0
	}
	return s.cmd.Process.Pid
}

// Exited is closed when the current postmaster has exited (nil when none
// was started).
func (s *Server) Exited() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.done
}

// KillPostmaster kills the postmaster with SIGKILL, as a crash would, and
// returns once its backends have noticed and exited too, so that every
// client connection is closed. The directory stays for Restart.
func (s *Server) KillPostmaster() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.killLocked()
}

func (s *Server) killLocked() {
	if s.box != nil {
		s.killBox()
		return
	}
	if s.cmd == nil {
		return
	}
	pm := s.cmd.Process.Pid
	syscall.Kill(pm, syscall.SIGSTOP) // forks no more children while they are counted
	kids := children(pm)
	syscall.Kill(pm, syscall.SIGKILL)
	<-s.done
	for _, k := range kids {
		syscall.Kill(k.pid, syscall.SIGCONT) // a paused backend cannot notice its postmaster's death
	}
	waitGone(kids, 10*time.Second)
	s.cmd, s.stopped = nil, nil
}

// Restart kills the postmaster if it runs (SIGKILL: the server goes
// through crash recovery) and starts it again on the same port and data
// directory. What was committed stays (commits are synchronous; fsync off
// loses data only when the host crashes); sessions, their advisory locks
// and open transactions are gone.
func (s *Server) Restart(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.killLocked()
	var err error
	delay := 5 * time.Millisecond
	for range 20 { // the port may linger for a moment
		if err = s.launchLocked(ctx, s.Port); err == nil || ctx.Err() != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(delay):
		}
		delay = min(2*delay, 200*time.Millisecond)
	}
	return err
}

// KillBackend ends the session served by backend pid with
// pg_terminate_backend (SIGTERM: that session alone ends, releasing its
// advisory locks and rolling back its transaction) and returns once the
// backend has exited.
func (s *Server) KillBackend(ctx context.Context, pid int) error {
	var ok bool
	if err := s.query(ctx, fmt.Sprintf("SELECT pg_terminate_backend(%d, 5000)", pid), &ok); err != nil {
		return fmt.Errorf("pg_terminate_backend(%d): %w", pid, err)
	}
	if !ok {
		return fmt.Errorf("pg_terminate_backend(%d): no such backend, or it did not exit within 5s", pid)
	}
	return nil
}

// CrashBackend kills backend pid with SIGKILL. The postmaster takes a
// backend's crash for possible shared memory corruption: it ends every
// other session too, runs crash recovery, and accepts connections again.
// CrashBackend returns once it does: every session's locks are gone.
func (s *Server) CrashBackend(ctx context.Context, pid int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.box != nil {
		return s.crashBox(ctx, pid)
	}
	if s.cmd == nil {
		return errors.New("pgproc: server not running")
	}
	kids := children(s.cmd.Process.Pid)
	if !slices.ContainsFunc(kids, func(p proc) bool { return p.pid == pid }) {
		return fmt.Errorf("pgproc: %d is no backend of postmaster %d", pid, s.cmd.Process.Pid)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return err
	}
	// The postmaster ends every child it had, then starts over: once they
	// are all gone, the next connection that succeeds is to the new
	// incarnation.
	waitGone(kids, 10*time.Second)
	return s.waitReady(ctx, s.done)
}

// Stop pauses the postmaster and every backend with SIGSTOP, as a frozen
// host would: connections stay open and nothing answers. Cont resumes them.
func (s *Server) Stop() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.box != nil {
		return s.stopBox()
	}
	if s.cmd == nil {
		return errors.New("pgproc: server not running")
	}
	pm := s.cmd.Process.Pid
	if err := syscall.Kill(pm, syscall.SIGSTOP); err != nil {
		return err
	}
	s.stopped = []int{pm}
	for _, k := range children(pm) {
		if syscall.Kill(k.pid, syscall.SIGSTOP) == nil {
			s.stopped = append(s.stopped, k.pid)
		}
	}
	return nil
}

// Cont resumes what Stop paused, the backends before the postmaster.
func (s *Server) Cont() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.contLocked()
	return nil
}

func (s *Server) contLocked() {
	if s.box != nil {
		s.contBox()
		return
	}
	for i := len(s.stopped) - 1; i >= 0; i-- {
		syscall.Kill(s.stopped[i], syscall.SIGCONT)
	}
	s.stopped = nil
}

// Backends returns the process ids of the postmaster's children (client
// backends and the server's own workers), or nil when it is not running.
func (s *Server) Backends() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.box != nil {
		return s.backendsBox()
	}
	if s.cmd == nil {
		return nil
	}
	var out []int
	for _, k := range children(s.cmd.Process.Pid) {
		out = append(out, k.pid)
	}
	return out
}
