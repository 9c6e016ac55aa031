// The faults done to a server: kill or restart the postmaster, end or crash
// one backend, pause and resume every process. The postmaster is a
// serverproc.Proc WithChildren, here or in its container: its faults
// strike its backends too.

package pgproc

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"time"

	"github.com/locklab/locklab/internal/tooling/serverproc"
)

// boxTimeout bounds a container's answer to a signal or a start, and the
// wait until a killed postmaster's backends have exited.
const boxTimeout = 10 * time.Second

// initProc names the postmaster's process in errors and makes its
// backends part of it.
func (s *Server) initProc() {
	s.proc.What, s.proc.Timeout, s.proc.WithChildren = "pgproc: server", boxTimeout, true
}

// Pid is the postmaster's process id, or 0 when it is not running.
func (s *Server) Pid() int { return s.proc.Pid() }

// Exited is closed when the current postmaster has exited (nil when none
// was started, and on the docker backend).
func (s *Server) Exited() <-chan struct{} { return s.proc.Exited() }

// KillPostmaster kills the postmaster with SIGKILL, as a crash would, and
// returns once its backends have noticed and exited too, so that every
// client connection is closed. The directory stays for Restart.
func (s *Server) KillPostmaster() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.proc.Kill()
}

// Restart kills the postmaster if it runs (SIGKILL: the server goes
// through crash recovery) and starts it again on the same port and data
// directory. What was committed stays (commits are synchronous; fsync off
// loses data only when the host crashes); sessions, their advisory locks
// and open transactions are gone.
func (s *Server) Restart(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	// Its start does not tell a port that lingers from other failures.
	return s.proc.Relaunch(ctx, func() error { return s.launchLocked(ctx, s.Port) }, serverproc.Tries(20))
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
	pm := s.proc.Pid()
	if pm == 0 {
		return errors.New("pgproc: server not running")
	}
	kids, err := s.proc.Children(ctx)
	if err != nil {
		return err
	}
	var backend *serverproc.Child
	for i := range kids {
		if kids[i].Pid == pid {
			backend = &kids[i]
		}
	}
	if backend == nil {
		return fmt.Errorf("pgproc: %d is no backend of postmaster %d", pid, pm)
	}
	if err := s.proc.SignalChild(ctx, *backend, syscall.SIGKILL); err != nil {
		return err
	}
	// The postmaster ends every child it had, then starts over: once they
	// are all gone, the next connection that succeeds is to the new
	// incarnation.
	wctx, cancel := context.WithTimeout(ctx, boxTimeout)
	defer cancel()
	if err := s.proc.WaitGone(wctx, kids); err != nil {
		return err
	}
	return s.waitReady(ctx, s.proc.Exited())
}

// Stop pauses the postmaster and every backend with SIGSTOP, as a frozen
// host would: connections stay open and nothing answers. Cont resumes them.
func (s *Server) Stop() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.proc.Stop()
}

// Cont resumes what Stop paused, the backends before the postmaster.
func (s *Server) Cont() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.proc.Cont()
}

// Backends returns the process ids of the postmaster's children (client
// backends and the server's own workers), or nil when it is not running.
func (s *Server) Backends() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), boxTimeout)
	defer cancel()
	kids, _ := s.proc.Children(ctx)
	var out []int
	for _, k := range kids {
		out = append(out, k.Pid)
	}
	return out
}
