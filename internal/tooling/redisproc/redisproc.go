// Package redisproc starts and stops redis-server processes on loopback
// ports, each a serverproc.Proc. Tests use it through redistest; the
// harness's process backend builds its nodes on it.
package redisproc

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/gomodule/redigo/redis"

	"github.com/locklab/locklab/internal/tooling/procid"
	"github.com/locklab/locklab/internal/tooling/serverproc"
)

// InstallHint tells how to get redis-server where it is missing.
const InstallHint = "redis-server not found on PATH: install it (Debian/Ubuntu: " +
	"apt-get install -y redis-server; macOS: brew install redis) or set LOCKLAB_REDIS_SERVER to its path"

// Binary returns the redis-server to run: $LOCKLAB_REDIS_SERVER, else the
// one on PATH. The error carries InstallHint.
func Binary() (string, error) {
	if p := os.Getenv("LOCKLAB_REDIS_SERVER"); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("LOCKLAB_REDIS_SERVER=%q: %w", p, err)
		}
		return p, nil
	}
	p, err := exec.LookPath("redis-server")
	if err != nil {
		return "", errors.New(InstallHint)
	}
	return p, nil
}

// Version returns what "redis-server --version" prints for bin, trimmed.
func Version(bin string) string {
	out, err := exec.Command(bin, "--version").Output()
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(out))
}

// Options configure one server.
type Options struct {
	// Port to listen on; 0 picks a free one.
	Port int
	// Dir is the working directory (RDB/AOF files, log). Empty: a new
	// temporary directory, removed by Stop.
	Dir string
	// AppendOnly turns on the append-only file; AppendFsync is its fsync
	// policy ("always", "everysec", "no"; default "everysec").
	AppendOnly  bool
	AppendFsync string
	// Args are extra "--name value" configuration arguments.
	Args []string
	// Config, when not empty, is the text of a configuration file that
	// Start writes into Dir as "redis.conf" and gives redis-server before
	// the other arguments. Sentinel mode (Args "--sentinel") needs one: it
	// records its state there. Restart keeps the file as the server left it,
	// or writes Config again when it is gone (a wiped directory).
	Config string
	// StartTimeout bounds the wait for the first PONG. Default 5s.
	StartTimeout time.Duration
	// Sentinel starts a Redis Sentinel (redis-server --sentinel) instead
	// of a data node, with Config (by default an empty configuration) in
	// Dir, which it rewrites as it learns; without a "sentinel monitor"
	// line in Config, give it masters with SENTINEL MONITOR.
	Sentinel bool
	// ClusterBus gives a cluster node (cluster-enabled) a cluster bus port
	// of its own, chosen free and given as --cluster-port, and chosen
	// again on each attempt to start (as a zero Port is): a port found free
	// can be taken by another socket before redis-server binds it. The
	// default bus port, Port plus 10000, is past 65535 for a Port above
	// 55535, and is not known to be free. Server.BusPort holds it; Restart
	// keeps it.
	ClusterBus bool
}

// Server is a running redis-server process.
type Server struct {
	Addr    string
	Port    int
	Dir     string
	LogPath string
	Bin     string
	// ConfigPath is the configuration file written from Options.Config,
	// or "" for none.
	ConfigPath string
	// BusPort is the cluster bus port of a server started with
	// Options.ClusterBus; 0 otherwise.
	BusPort int

	opts    Options
	ownsDir bool
	proc    serverproc.Proc
}

// Start launches redis-server and waits until it answers PING. A server that
// does not come up is an error naming its address, with the tail of its log.
func Start(opts Options) (*Server, error) {
	bin, err := Binary()
	if err != nil {
		return nil, err
	}
	if opts.Sentinel {
		if opts.Config == "" {
			opts.Config = "# a Sentinel rewrites this file as it learns\n"
		}
		opts.Args = append(slices.Clone(opts.Args), "--sentinel")
	}
	s := &Server{Bin: bin, opts: opts, Dir: opts.Dir}
	s.proc.What = "redis-server"
	if s.Dir == "" {
		sweep.Do(func() { RemoveStale() })
		d, err := procid.MkdirTemp(dirPrefix)
		if err != nil {
			return nil, err
		}
		s.Dir, s.ownsDir = d, true
	}
	s.LogPath = filepath.Join(s.Dir, "redis.log")
	if opts.Config != "" {
		s.ConfigPath = filepath.Join(s.Dir, "redis.conf")
		if err := os.WriteFile(s.ConfigPath, []byte(opts.Config), 0o600); err != nil {
			s.cleanup()
			return nil, err
		}
	}
	var lastErr error
	for attempt := 0; attempt < 5; attempt++ {
		port := opts.Port
		if port == 0 {
			if port, err = FreePort(); err != nil {
				return nil, err
			}
		}
		if opts.ClusterBus {
			if s.BusPort, err = freePort(); err != nil {
				return nil, err
			}
		}
		if lastErr = s.launch(port); lastErr == nil {
			return s, nil
		}
		if opts.Port != 0 && !opts.ClusterBus {
			break
		}
	}
	s.cleanup()
	return nil, lastErr
}

// dirPrefix starts the name of the temporary directories Start creates, in
// memory where it can (procid.MkdirTemp): dirPrefix + pid + "-" + start
// time + "-" + random, naming the process that owns it.
const dirPrefix = "locklab-redis-"

var sweep sync.Once

// RemoveStale removes the temporary directories that servers of an earlier
// run left behind (a run killed before it could stop them): those whose
// owning process is gone. Those of live processes stay. Start calls it once
// per process before creating its first directory. It returns the
// directories it removed.
func RemoveStale() []string {
	return procid.RemoveStaleTemp(dirPrefix)
}

// launch starts the process on port and waits for PING.
func (s *Server) launch(port int) error {
	s.Port = port
	s.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	var args []string
	if s.ConfigPath != "" {
		args = append(args, s.ConfigPath)
	}
	args = append(args,
		"--port", strconv.Itoa(port),
		"--bind", "127.0.0.1",
		"--dir", s.Dir,
		"--logfile", s.LogPath,
		"--daemonize", "no",
		"--save", "",
		"--protected-mode", "no",
	)
	if s.opts.AppendOnly {
		fsync := s.opts.AppendFsync
		if fsync == "" {
			fsync = "everysec"
		}
		args = append(args, "--appendonly", "yes", "--appendfsync", fsync)
	} else {
		args = append(args, "--appendonly", "no")
	}
	if s.BusPort != 0 {
		args = append(args, "--cluster-port", strconv.Itoa(s.BusPort))
	}
	args = append(args, s.opts.Args...)
	// Its log is LogPath, which --logfile names: what it prints is
	// discarded.
	if err := s.proc.Launch(serverproc.Spec{Local: append([]string{s.Bin}, args...), Dir: s.Dir}); err != nil {
		return fmt.Errorf("redis-server on %s: %w", s.Addr, err)
	}

	timeout := s.opts.StartTimeout
	if timeout <= 0 {
		timeout = 5 * time.Second
	}
	if err := WaitPing(s.Addr, timeout, s.proc.Exited()); err != nil {
		s.proc.Kill()
		return fmt.Errorf("redis-server on %s did not come up: %w\n%s", s.Addr, err, s.LogTail(10))
	}
	// Another process may have taken the port between FreePort and our
	// bind, and its server answered the PING: make sure it is ours.
	if pid, err := serverPid(s.Addr, time.Second); err != nil || pid != s.proc.Pid() {
		s.proc.Kill()
		if err == nil {
			err = fmt.Errorf("port taken by process %d", pid)
		}
		return fmt.Errorf("redis-server on %s did not come up: %w\n%s", s.Addr, err, s.LogTail(10))
	}
	return nil
}

// serverPid asks the server at addr for its process id (INFO server).
func serverPid(addr string, timeout time.Duration) (int, error) {
	c, err := redis.Dial("tcp", addr, redis.DialConnectTimeout(timeout),
		redis.DialReadTimeout(timeout), redis.DialWriteTimeout(timeout))
	if err != nil {
		return 0, err
	}
	defer c.Close()
	info, err := redis.String(c.Do("INFO", "server"))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "process_id:"); ok {
			return strconv.Atoi(v)
		}
	}
	return 0, errors.New("INFO server has no process_id")
}

// WaitPing polls addr with PING until it answers PONG, the timeout passes, or
// exited is closed (the process died).
func WaitPing(addr string, timeout time.Duration, exited <-chan struct{}) error {
	deadline := time.Now().Add(timeout)
	delay := 2 * time.Millisecond
	var lastErr error
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			return errors.New("process exited")
		default:
		}
		lastErr = Ping(addr, 200*time.Millisecond)
		if lastErr == nil {
			return nil
		}
		time.Sleep(delay)
		delay = min(2*delay, 50*time.Millisecond)
	}
	return fmt.Errorf("no PONG within %v: %v", timeout, lastErr)
}

// Ping dials addr, sends PING and closes, all within timeout.
func Ping(addr string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	c, err := redis.DialContext(ctx, "tcp", addr,
		redis.DialReadTimeout(timeout), redis.DialWriteTimeout(timeout))
	if err != nil {
		return err
	}
	defer c.Close()
	_, err = c.Do("PING")
	return err
}

// Pid is the process id, or 0 when it is not running.
func (s *Server) Pid() int { return s.proc.Pid() }

// Exited is closed when the process has exited.
func (s *Server) Exited() <-chan struct{} { return s.proc.Exited() }

// Signal sends sig to the process.
func (s *Server) Signal(sig syscall.Signal) error { return s.proc.Signal(sig) }

// Kill stops the process at once (SIGKILL) and waits for it, keeping its
// directory so that a Restart can find its files.
func (s *Server) Kill() { s.proc.Kill() }

// Restart starts the server again on the same port and directory, with the
// same options: with AppendOnly, what the AOF holds comes back.
func (s *Server) Restart() error {
	s.proc.Kill()
	if s.ConfigPath != "" {
		if _, err := os.Stat(s.ConfigPath); errors.Is(err, os.ErrNotExist) {
			if err := os.WriteFile(s.ConfigPath, []byte(s.opts.Config), 0o600); err != nil {
				return err
			}
		}
	}
	// Its start does not tell a port that lingers from other failures.
	return s.proc.Relaunch(context.Background(), func() error { return s.launch(s.Port) }, serverproc.Tries(20))
}

// Stop kills the process and removes a directory Start created.
func (s *Server) Stop() {
	s.proc.Kill()
	s.cleanup()
}

func (s *Server) cleanup() {
	if s.ownsDir {
		os.RemoveAll(s.Dir)
	}
}

// LogTail returns the last n lines of the server's log.
func (s *Server) LogTail(n int) string { return s.proc.LogTail(s.LogPath, n) }

// freePort is FreePort; a test makes it hand out a port that is taken.
var freePort = FreePort

// FreePort asks the kernel for a free loopback TCP port.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// SetAppendOnly changes the append-only setting (and its fsync policy, ""
// meaning "everysec") that later Restarts start the server with. It does not
// touch the running process: switch that with CONFIG SET.
func (s *Server) SetAppendOnly(on bool, fsync string) {
	s.opts.AppendOnly = on
	s.opts.AppendFsync = fsync
}
