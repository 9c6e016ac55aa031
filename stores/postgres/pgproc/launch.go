// A server's postgres process: the programs run as the server's user, the
// start of postgres and the wait until it accepts connections, its log, and
// Close.

package pgproc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/locklab/locklab/internal/tooling/cleanup"
	"github.com/locklab/locklab/internal/tooling/dockerbox"
	"github.com/locklab/locklab/internal/tooling/serverproc"
)

// spec is how bin (a program of BinDir) runs here: as the server's user,
// in Dir, with no PG* or LC_* variables of this process's environment, and
// dying with this process where the system allows it.
func (s *Server) spec(bin string, args ...string) serverproc.Spec {
	return serverproc.Spec{
		Local: append([]string{filepath.Join(s.BinDir, bin)}, args...),
		Dir:   s.Dir, Env: []string{"LC_ALL=C"}, Cred: s.cred,
		DropEnv: func(kv string) bool { return strings.HasPrefix(kv, "PG") || strings.HasPrefix(kv, "LC_") },
	}
}

// run runs a short-lived program (initdb, pg_basebackup, pg_ctl) to its
// end; a failure carries what it printed.
func (s *Server) run(ctx context.Context, bin string, args ...string) error {
	cmd := s.spec(bin, args...).Command()
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	// A process the program forked may hold its output open after it is
	// gone (pg_basebackup streams the WAL from a child): Wait does not
	// wait for that output longer than this.
	cmd.WaitDelay = 2 * time.Second
	s.mu.Lock()
	if s.closed { // a signal's Close ran: nothing more is written here
		s.mu.Unlock()
		return fmt.Errorf("%s: pgproc: server closed", bin)
	}
	if err := cmd.Start(); err != nil {
		s.mu.Unlock()
		return fmt.Errorf("%s: %w", bin, err)
	}
	done := make(chan struct{})
	if s.tools == nil {
		s.tools = map[*os.Process]chan struct{}{}
	}
	s.tools[cmd.Process] = done
	s.mu.Unlock()
	var werr error
	go func() { werr = cmd.Wait(); close(done) }()
	defer func() {
		s.mu.Lock()
		delete(s.tools, cmd.Process)
		s.mu.Unlock()
	}()
	select {
	case <-done:
		if werr != nil {
			return fmt.Errorf("%s: %w\n%s", bin, werr, strings.TrimSpace(out.String()))
		}
		return nil
	case <-ctx.Done():
		killGroup(cmd.Process)
		<-done
		return fmt.Errorf("%s: %w\n%s", bin, ctx.Err(), strings.TrimSpace(out.String()))
	}
}

// tool runs a short-lived program of BinDir (pg_basebackup, pg_ctl) to its
// end as the server's user: here (run), or in the server's container on
// the docker backend, where a failure carries the tail of its log.
func (s *Server) tool(ctx context.Context, bin string, args ...string) error {
	box := s.proc.Box()
	if box == nil {
		return s.run(ctx, bin, args...)
	}
	for _, a := range args {
		if a == "" || strings.ContainsAny(a, " \t\n") {
			return fmt.Errorf("%s: argument %q: empty or with white space, which the container's supervisor cannot pass", bin, a)
		}
	}
	if err := box.Do(ctx, "run "+filepath.Join(s.BinDir, bin)+" "+strings.Join(args, " "), nil); err != nil {
		return fmt.Errorf("%s: %w\n%s", bin, err, box.LogTail(10))
	}
	return nil
}

// where names the server in messages: "on port N", or "in container
// NAME" on the docker backend, where every server's port is 5432.
func (s *Server) where() string {
	if box := s.proc.Box(); box != nil {
		return "in container " + box.String()
	}
	return "on port " + strconv.Itoa(s.Port)
}

// startFresh launches postgres on opts.Port, or on a free port, trying
// other free ports when one is taken meanwhile.
func (s *Server) startFresh(ctx context.Context) error {
	var err error
	for range 5 {
		port := s.opts.Port
		if port == 0 {
			if port, err = freePort(); err != nil {
				return err
			}
		}
		if err = s.launch(ctx, port); err == nil || s.opts.Port != 0 || ctx.Err() != nil {
			return err
		}
	}
	return err
}

// settings returns the -c arguments: DefaultSettings, over them over, and
// over those Options.Settings.
func (s *Server) settings(over map[string]string) []string {
	all := DefaultSettings()
	maps.Copy(all, over)
	maps.Copy(all, s.opts.Settings)
	var args []string
	for _, k := range slices.Sorted(maps.Keys(all)) {
		args = append(args, "-c", k+"="+all[k])
	}
	return args
}

// launch starts postgres on port and waits until it accepts connections.
func (s *Server) launch(ctx context.Context, port int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.launchLocked(ctx, port)
}

func (s *Server) launchLocked(ctx context.Context, port int) error {
	if s.closed {
		return errors.New("pgproc: server closed")
	}
	if s.Port != port { // a Restart keeps it: no write under readers of DSN
		s.Port = port
	}
	var spec serverproc.Spec
	if box := s.proc.Box(); box != nil {
		spec.InBox = append([]string{filepath.Join(s.BinDir, "postgres"), "-D", dockerData, "-p", strconv.Itoa(dockerPort),
			"-h", "0.0.0.0", "-k", "/data"}, s.settings(map[string]string{"jit": "off"})...) // the image has no LLVM
	} else {
		spec = s.spec("postgres", append([]string{"-D", s.DataDir, "-p", strconv.Itoa(port), "-h", "127.0.0.1", "-k", s.Dir},
			s.settings(nil)...)...)
		spec.LogPath = s.LogPath
	}
	if err := s.proc.Launch(spec); err != nil {
		return err
	}
	timeout := s.opts.StartTimeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	exited := s.proc.Exited()
	if s.proc.Box() != nil {
		// The postmaster's exit, asked every 100ms, ends the wait.
		gone, stop := dockerbox.Watch(wctx, 100*time.Millisecond, func(ctx context.Context) bool { return !s.proc.BoxAlive(ctx) })
		defer stop()
		exited = gone
	}
	if err := s.waitReady(wctx, exited); err != nil {
		s.proc.Kill()
		return fmt.Errorf("postgres %s did not come up: %w\n%s", s.where(), err, s.LogTail(10))
	}
	return nil
}

// waitReady connects until the server answers as the one serving DataDir
// (a server of another process could hold the port), ctx ends or the
// process exits. It connects at growing intervals (each try the server
// refuses may cost it a process), and at once when postmaster.pid says
// the server accepts connections, which it reads every millisecond, as
// pg_ctl -w does: a restart is seen within a millisecond or two of its
// end rather than up to 50ms later.
func (s *Server) waitReady(ctx context.Context, exited <-chan struct{}) error {
	delay := 2 * time.Millisecond
	var (
		last  error
		tried time.Time
	)
	for {
		select {
		case <-exited:
			return errors.New("process exited")
		default:
		}
		if since := time.Since(tried); since >= delay || since >= 5*time.Millisecond && s.pidFileReady() {
			var dir string
			last = s.query(ctx, "SHOW data_directory", &dir)
			if last == nil {
				if dir != s.DataDir {
					return fmt.Errorf("port %d is served by the cluster in %s", s.Port, dir)
				}
				return nil
			}
			tried = time.Now()
			if since >= delay {
				delay = min(2*delay, 50*time.Millisecond)
			}
		}
		select {
		case <-exited:
			return errors.New("process exited")
		case <-ctx.Done():
			return fmt.Errorf("%w (last: %v)", ctx.Err(), last)
		case <-time.After(time.Millisecond):
		}
	}
}

// pidFileReady reports whether postmaster.pid's status line says the
// server accepts connections ("ready", or "standby" for a hot standby).
func (s *Server) pidFileReady() bool {
	b, err := os.ReadFile(filepath.Join(s.DataDir, "postmaster.pid"))
	if err != nil {
		return false
	}
	lines := strings.Split(string(b), "\n")
	if len(lines) < 8 {
		return false
	}
	st := strings.TrimSpace(lines[7])
	return st == "ready" || st == "standby"
}

// Close stops the server (an immediate shutdown, then SIGKILL if it does
// not exit within 10s) and removes its directory and any shared memory a
// killed postmaster left. It is safe to call more than once.
func (s *Server) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	defer cleanup.Untrack(s)
	if s.net != nil {
		return s.closeBox()
	}
	for p, done := range s.tools { // initdb, pg_basebackup: they write the directory
		killGroup(p)
		<-done
	}
	s.proc.Quit(syscall.SIGQUIT, 10*time.Second) // immediate shutdown: ends the backends, removes the shared memory
	removeShm(s.DataDir)
	return s.removeDir()
}

// LogTail returns the last n lines of the server's log (its container's,
// on the docker backend).
func (s *Server) LogTail(n int) string { return s.proc.LogTail(s.LogPath, n) }

// freePort asks the kernel for a free loopback TCP port.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// killGroup kills a short-lived program and every process it forked: it
// leads a process group of its own (command).
func killGroup(p *os.Process) {
	syscall.Kill(-p.Pid, syscall.SIGKILL)
}
