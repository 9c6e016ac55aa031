// Package pgproc runs throwaway PostgreSQL clusters for tests and for the
// harness: each is made with initdb in a temporary directory and served by
// a postgres process on a free loopback port, with its unix sockets in that
// directory. Faults are first-class: kill the postmaster, end one backend,
// pause and resume every process, restart after a crash, start a streaming
// standby, cut it off from its primary and connect it again, and promote
// it.
//
// postgres refuses to run as root. A process that is not root runs the
// server as itself; a root process runs initdb, postgres, pg_basebackup and
// pg_ctl as the unprivileged user $LOCKLAB_PG_USER (default "postgres", the
// user Debian's postgresql package creates; scripts/ensure-postgres.sh makes
// sure it exists) and gives it the temporary directory.
//
// Every server is started with fsync off (its data is thrown away; commits
// are still synchronous, so a killed server keeps them), with
// wal_retrieve_retry_interval=100ms (a standby whose primary died is
// promoted at once, not after 5s), and with short TCP keepalives, so that
// the server ends the session of a client it can no longer reach within
// seconds rather than hours: tcp_keepalives_idle=2 (seconds of silence
// before the first probe), tcp_keepalives_interval=1 (seconds between
// probes), tcp_keepalives_count=3 (unanswered probes before the connection
// is dropped) and tcp_user_timeout=5000 (milliseconds that sent data may
// stay unacknowledged): an idle session whose client vanished ends about
// 5s later, and with it the session's advisory locks and open transaction.
// Options.Settings overrides any of them.
package pgproc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"golang.org/x/sys/unix"

	"github.com/locklab/locklab/internal/tooling/cleanup"
	"github.com/locklab/locklab/internal/tooling/dockerbox"
	"github.com/locklab/locklab/internal/tooling/procid"
)

// InstallHint tells how to get the PostgreSQL server where it is missing.
const InstallHint = "PostgreSQL server binaries (initdb, postgres) not found: run scripts/ensure-postgres.sh " +
	"(Debian/Ubuntu: apt-get install -y postgresql), or set LOCKLAB_PG_BINDIR to the directory that holds them"

// DefaultBinDir is where Debian's postgresql package (PostgreSQL 15, on
// Debian 12) puts the server binaries.
const DefaultBinDir = "/usr/lib/postgresql/15/bin"

// SuperUser is the superuser initdb creates in every cluster; the DSNs
// connect as it, without a password (trust authentication on loopback).
const SuperUser = "locklab"

// Database is the database the DSNs name: the one initdb creates.
const Database = "postgres"

// BinDir returns the directory of the server binaries: $LOCKLAB_PG_BINDIR,
// else DefaultBinDir, else the newest /usr/lib/postgresql/N/bin, else the
// directory of the initdb on PATH. The error carries InstallHint.
func BinDir() (string, error) {
	if d := os.Getenv("LOCKLAB_PG_BINDIR"); d != "" {
		if !hasServer(d) {
			return "", fmt.Errorf("LOCKLAB_PG_BINDIR=%q holds no initdb and postgres", d)
		}
		return d, nil
	}
	if hasServer(DefaultBinDir) {
		return DefaultBinDir, nil
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return majorOf(dirs[i]) > majorOf(dirs[j]) })
	for _, d := range dirs {
		if hasServer(d) {
			return d, nil
		}
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		if d := filepath.Dir(p); hasServer(d) {
			return d, nil
		}
	}
	return "", errors.New(InstallHint)
}

func hasServer(dir string) bool {
	for _, b := range []string{"initdb", "postgres"} {
		if st, err := os.Stat(filepath.Join(dir, b)); err != nil || st.IsDir() {
			return false
		}
	}
	return true
}

// majorOf reads N from /usr/lib/postgresql/N/bin.
func majorOf(dir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(dir)))
	return n
}

// Version returns what "postgres --version" prints, trimmed.
func Version(binDir string) string {
	out, err := exec.Command(filepath.Join(binDir, "postgres"), "--version").Output()
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(out))
}

// DefaultSettings returns the configuration parameters every server
// starts with (see the package documentation); Options.Settings adds to
// them and overrides them.
func DefaultSettings() map[string]string { return maps.Clone(defaultSettings) }

var defaultSettings = map[string]string{
	"fsync":                       "off", // a killed postgres keeps its commits in the page cache; only a host crash would lose them
	"full_page_writes":            "off",
	"tcp_keepalives_idle":         "2",
	"tcp_keepalives_interval":     "1",
	"tcp_keepalives_count":        "3",
	"tcp_user_timeout":            "5000",
	"dynamic_shared_memory_type":  "mmap", // in the data directory: nothing left in /dev/shm after a kill
	"max_connections":             "100",
	"wal_retrieve_retry_interval": "100ms", // a standby whose primary died sees a promotion within this, not 5s
	"shared_buffers":              "32MB",
}

// Options configure one server.
type Options struct {
	// Port to listen on; 0 picks a free one. The docker backend's server
	// listens on 5432 of its container's address, whatever Port says.
	Port int
	// Settings are configuration parameters (name → value) given to
	// postgres as -c name=value, over DefaultSettings().
	Settings map[string]string
	// StartTimeout bounds the wait until the server accepts connections,
	// at each start and restart, when the context given has no earlier
	// deadline. Default 30s.
	StartTimeout time.Duration
	// Backend is BackendProcess ("" too): the server is a local process;
	// or BackendDocker: it runs in a container of an image built from the
	// binaries of BinDir() (see docker.go), on a network of its own.
	Backend string
	// Label names a docker server in its labels (dockerbox.LabelName).
	Label string
}

// The backends of Options.Backend.
const (
	BackendProcess = "process"
	BackendDocker  = "docker"
)

// Server is a PostgreSQL cluster in a temporary directory and the postgres
// process serving it. Its methods are safe for concurrent use.
type Server struct {
	// Host and Port are where clients connect: 127.0.0.1 and a free port
	// on the process backend, the container's address and 5432 on the
	// docker backend. Dir is the temporary directory that holds the data
	// directory (DataDir), the log (LogPath) and the unix sockets; on the
	// docker backend Dir and LogPath are empty and DataDir is in the
	// container.
	Host    string
	Port    int
	Dir     string
	DataDir string
	LogPath string
	BinDir  string

	opts Options
	cred *syscall.Credential // nil: run as this process's user

	mu      sync.Mutex
	cmd     *exec.Cmd
	done    chan struct{}
	stopped []int // pids paused by Stop, for Cont
	closed  bool
	// conninfo is a standby's primary_conninfo, kept by StopStreaming for
	// StartStreaming.
	conninfo string

	// On the docker backend: the server's network (its primary's, for a
	// standby) and container, and the postmaster's pid there (0: not
	// running); cmd and done stay nil.
	net *boxNet
	box *dockerbox.Container
	pm  int
}

// Start makes a cluster with initdb and starts postgres on it, and returns
// once the server accepts connections. ctx bounds the whole start. A server
// that does not come up is an error with the tail of its log.
func Start(ctx context.Context, opts Options) (*Server, error) {
	switch opts.Backend {
	case "", BackendProcess, BackendDocker:
	default:
		return nil, fmt.Errorf("pgproc: backend %q: want %q or %q", opts.Backend, BackendProcess, BackendDocker)
	}
	ss, err := StartMany(ctx, 1, opts)
	if err != nil {
		return nil, err
	}
	return ss[0], nil
}

// StartMany starts n servers as Start does, each in a temporary directory
// of its own, on a port of its own: initdb runs once, and every other
// server's data directory is a copy of that fresh one (the same cluster
// initdb would make, at the cost of a copy), and the n postgres processes
// start at once. opts.Port must be 0 when n > 1. On an error none is left
// running.
func StartMany(ctx context.Context, n int, opts Options) ([]*Server, error) {
	if n < 1 {
		return nil, fmt.Errorf("pgproc: %d servers", n)
	}
	if n > 1 && opts.Port != 0 {
		return nil, fmt.Errorf("pgproc: %d servers cannot share port %d", n, opts.Port)
	}
	if opts.Backend == BackendDocker {
		return startManyDocker(ctx, n, opts)
	}
	var ss []*Server
	fail := func(err error) ([]*Server, error) {
		for _, s := range ss {
			s.Close()
		}
		return nil, err
	}
	for i := range n {
		s, err := newServer(opts)
		if err != nil {
			return fail(err)
		}
		// Tracked from its directory on: a signal in the middle of the
		// start removes what was made (fail's Close untracks it).
		cleanup.Track(s)
		ss = append(ss, s)
		if i == 0 {
			err = s.run(ctx, "initdb", "-D", s.DataDir, "-U", SuperUser, "-A", "trust",
				"-E", "UTF8", "--locale=C", "--no-sync", "--no-instructions")
		} else {
			err = copyDir(ss[0].DataDir, s.DataDir, s.cred)
		}
		if err != nil {
			return fail(err)
		}
	}
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i, s := range ss {
		wg.Go(func() { errs[i] = s.startFresh(ctx) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return fail(err)
	}
	return ss, nil
}

// startManyDocker starts n servers on the docker backend, each in a
// container of its own, at once.
func startManyDocker(ctx context.Context, n int, opts Options) ([]*Server, error) {
	ss := make([]*Server, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { ss[i], errs[i] = startDocker(ctx, opts) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		for _, s := range ss {
			if s != nil {
				s.Close()
			}
		}
		return nil, err
	}
	return ss, nil
}

// copyDir copies the data directory src, which no server runs on, to dst,
// with its files' permissions, owned by cred's user when cred is set.
func copyDir(src, dst string, cred *syscall.Credential) error {
	return filepath.WalkDir(src, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		to := filepath.Join(dst, rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			err = os.Mkdir(to, info.Mode().Perm())
		case info.Mode().IsRegular():
			err = copyFile(path, to, info.Mode().Perm())
		default:
			return fmt.Errorf("pgproc: copying %s: %s is not a file or a directory", src, path)
		}
		if err == nil && cred != nil {
			err = os.Lchown(to, int(cred.Uid), int(cred.Gid))
		}
		return err
	})
}

func copyFile(src, dst string, perm os.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, perm)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// newServer makes the temporary directory, owned by the user the server
// runs as.
func newServer(opts Options) (*Server, error) {
	bin, err := BinDir()
	if err != nil {
		return nil, err
	}
	cred, err := runAs()
	if err != nil {
		return nil, err
	}
	sweep.Do(func() { RemoveStale() })
	base, err := baseDir(cred)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp(base, dirPrefix+procid.Tag())
	if err != nil {
		return nil, err
	}
	s := &Server{Host: "127.0.0.1", Dir: dir, DataDir: filepath.Join(dir, "data"), LogPath: filepath.Join(dir, "postgres.log"),
		BinDir: bin, opts: opts, cred: cred}
	if cred != nil {
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
	}
	return s, nil
}

// runAs returns the credential the server's processes run with: nil when
// this process is not root, else that of $LOCKLAB_PG_USER or "postgres".
func runAs() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	name := os.Getenv("LOCKLAB_PG_USER")
	if name == "" {
		name = "postgres"
	}
	u, err := user.Lookup(name)
	if err != nil {
		return nil, fmt.Errorf("postgres refuses to run as root and user %q is missing (%v): "+
			"run scripts/ensure-postgres.sh or set LOCKLAB_PG_USER to an unprivileged user", name, err)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err1 != nil || err2 != nil || uid == 0 {
		return nil, fmt.Errorf("user %q (uid %s) cannot run postgres: it needs an unprivileged user", name, u.Uid)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

// command prepares bin (a program of BinDir) to run as the server's user,
// in Dir, with no PG* variables of this process's environment, and dying
// with this process where the system allows it.
func (s *Server) command(bin string, args ...string) *exec.Cmd {
	cmd := exec.Command(filepath.Join(s.BinDir, bin), args...)
	cmd.Dir = s.Dir
	env := []string{"LC_ALL=C"}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PG") && !strings.HasPrefix(kv, "LC_") {
			env = append(env, kv)
		}
	}
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL, Credential: s.cred}
	return cmd
}

// run runs a short-lived program (initdb, pg_basebackup, pg_ctl) to its
// end; a failure carries what it printed.
func (s *Server) run(ctx context.Context, bin string, args ...string) error {
	cmd := s.command(bin, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("%s: %w", bin, err)
	}
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	select {
	case err := <-waited:
		if err != nil {
			return fmt.Errorf("%s: %w\n%s", bin, err, strings.TrimSpace(out.String()))
		}
		return nil
	case <-ctx.Done():
		cmd.Process.Kill()
		<-waited
		return fmt.Errorf("%s: %w\n%s", bin, ctx.Err(), strings.TrimSpace(out.String()))
	}
}

// tool runs a short-lived program of BinDir (pg_basebackup, pg_ctl) to its
// end as the server's user: here (run), or in the server's container on
// the docker backend, where a failure carries the tail of its log.
func (s *Server) tool(ctx context.Context, bin string, args ...string) error {
	if s.box == nil {
		return s.run(ctx, bin, args...)
	}
	for _, a := range args {
		if a == "" || strings.ContainsAny(a, " \t\n") {
			return fmt.Errorf("%s: argument %q: empty or with white space, which the container's supervisor cannot pass", bin, a)
		}
	}
	if err := s.box.Do(ctx, "run "+filepath.Join(s.BinDir, bin)+" "+strings.Join(args, " "), nil); err != nil {
		return fmt.Errorf("%s: %w\n%s", bin, err, s.box.LogTail(10))
	}
	return nil
}

// where names the server in messages: "on port N", or "in container
// NAME" on the docker backend, where every server's port is 5432.
func (s *Server) where() string {
	if s.box != nil {
		return "in container " + s.box.Name
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

// settings returns the -c arguments.
func (s *Server) settings() []string {
	all := DefaultSettings()
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
	if s.box != nil {
		return s.launchBox(ctx)
	}
	log, err := os.OpenFile(s.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer log.Close()
	args := append([]string{"-D", s.DataDir, "-p", strconv.Itoa(port), "-h", "127.0.0.1", "-k", s.Dir}, s.settings()...)
	cmd := s.command("postgres", args...)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("postgres on port %d: %w", port, err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	s.cmd, s.done, s.stopped = cmd, done, nil

	timeout := s.opts.StartTimeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := s.waitReady(wctx, done); err != nil {
		s.killLocked()
		return fmt.Errorf("postgres on port %d did not come up: %w\n%s", port, err, s.LogTail(10))
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

// query runs sql on a fresh connection, scanning its one row into dest.
func (s *Server) query(ctx context.Context, sql string, dest ...any) error {
	cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	c, err := pgx.Connect(cctx, s.DSN()+"&connect_timeout=2")
	if err != nil {
		return err
	}
	defer c.Close(context.Background())
	return c.QueryRow(cctx, sql).Scan(dest...)
}

// DSN is the URL a client connects with: the superuser, over TCP on
// loopback, without TLS. Add pgx pool options such as pool_max_conns as
// query parameters.
func (s *Server) DSN() string {
	u := url.URL{Scheme: "postgres", User: url.User(SuperUser),
		Host: net.JoinHostPort(s.Host, strconv.Itoa(s.Port)), Path: "/" + Database,
		RawQuery: "sslmode=disable"}
	return u.String()
}

// ConnString is DSN as libpq keywords ("host=... port=..."), for tools
// that take that form.
func (s *Server) ConnString() string {
	return fmt.Sprintf("host=%s port=%d user=%s dbname=%s sslmode=disable", s.Host, s.Port, SuperUser, Database)
}

// SocketDSN is the URL of a connection through the unix socket in Dir.
func (s *Server) SocketDSN() string {
	return fmt.Sprintf("postgres://%s@/%s?host=%s&port=%d&sslmode=disable", SuperUser, Database, url.QueryEscape(s.Dir), s.Port)
}

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

// StartStandby makes a streaming standby of s: pg_basebackup -R (which
// writes standby.signal and primary_conninfo) into a data directory of its
// own, then postgres on it with opts, and returns once the standby streams
// from s. The standby runs on its primary's backend (opts.Backend is that
// one or ""): on the process backend in a temporary directory of its own
// and on a free port, on the docker backend in a container of its own on
// the primary's network (and with its labels: opts.Label is not read),
// streaming from the primary's container address. Locks are not
// replicated: a standby promoted after the primary fails knows nothing of
// the primary's advisory locks or row locks.
func (s *Server) StartStandby(ctx context.Context, opts Options) (*Server, error) {
	if opts.Backend != "" && opts.Backend != s.Backend() {
		return nil, fmt.Errorf("pgproc: a standby runs on its primary's backend, %s, not %s", s.Backend(), opts.Backend)
	}
	if s.net != nil {
		return s.startDockerStandby(ctx, opts)
	}
	sb, err := newServer(opts)
	if err != nil {
		return nil, err
	}
	if err := sb.run(ctx, "pg_basebackup", "-D", sb.DataDir, "-R", "-X", "stream", "-c", "fast", "--no-sync",
		"-d", s.ConnString()); err != nil {
		sb.removeDir()
		return nil, err
	}
	if err := sb.startFresh(ctx); err != nil {
		sb.removeDir()
		return nil, err
	}
	if err := sb.waitStreaming(ctx); err != nil {
		sb.Close()
		return nil, err
	}
	return sb, nil
}

// waitStreaming polls pg_stat_wal_receiver until the standby streams.
func (s *Server) waitStreaming(ctx context.Context) error {
	delay := 2 * time.Millisecond
	for {
		var status string
		err := s.query(ctx, "SELECT coalesce((SELECT status FROM pg_stat_wal_receiver), '')", &status)
		if err == nil && status == "streaming" {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("standby %s does not stream (status %q, %v): %w\n%s", s.where(), status, err, ctx.Err(), s.LogTail(10))
		case <-s.Exited():
			return fmt.Errorf("standby %s exited\n%s", s.where(), s.LogTail(10))
		case <-time.After(delay):
		}
		delay = min(2*delay, 50*time.Millisecond)
	}
}

// WaitReplayed returns once the standby s has replayed all the WAL
// primary had flushed when it was called: every transaction committed by
// then (commits are synchronous). WAL of transactions still open, such as
// a row lock's, may not be flushed yet, and is not waited for.
func (s *Server) WaitReplayed(ctx context.Context, primary *Server) error {
	var lsn string
	if err := primary.query(ctx, "SELECT pg_current_wal_flush_lsn()::text", &lsn); err != nil {
		return err
	}
	delay := 2 * time.Millisecond
	for {
		var done bool
		err := s.query(ctx, "SELECT coalesce(pg_last_wal_replay_lsn() >= '"+lsn+"'::pg_lsn, false)", &done)
		if err == nil && done {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("standby %s has not replayed %s (%v): %w", s.where(), lsn, err, ctx.Err())
		case <-time.After(delay):
		}
		delay = min(2*delay, 50*time.Millisecond)
	}
}

// StopStreaming cuts the standby s off from its primary: its WAL receiver
// stops (primary_conninfo is emptied with ALTER SYSTEM and a reload) and
// StopStreaming returns once it has, so that every write the primary makes
// from then on is one the standby misses, as when the network between
// them fails. StartStreaming connects it again.
func (s *Server) StopStreaming(ctx context.Context) error {
	s.mu.Lock()
	known := s.conninfo != ""
	s.mu.Unlock()
	if !known {
		var ci string
		if err := s.query(ctx, "SHOW primary_conninfo", &ci); err != nil {
			return fmt.Errorf("reading the primary_conninfo of the standby %s: %w", s.where(), err)
		}
		if ci == "" {
			return fmt.Errorf("the server %s streams from no primary", s.where())
		}
		s.mu.Lock()
		s.conninfo = ci
		s.mu.Unlock()
	}
	if err := s.exec(ctx, "ALTER SYSTEM SET primary_conninfo = ''", "SELECT pg_reload_conf()"); err != nil {
		return err
	}
	delay := 2 * time.Millisecond
	for {
		var n int
		err := s.query(ctx, "SELECT count(*)::int FROM pg_stat_wal_receiver", &n)
		if err == nil && n == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the WAL receiver of the standby %s does not stop (%v): %w", s.where(), err, ctx.Err())
		case <-time.After(delay):
		}
		delay = min(2*delay, 20*time.Millisecond)
	}
}

// StartStreaming connects the standby s that StopStreaming cut off to its
// primary again and returns once it streams; WaitReplayed then waits until
// it has caught up.
func (s *Server) StartStreaming(ctx context.Context) error {
	s.mu.Lock()
	ci := s.conninfo
	s.mu.Unlock()
	if ci == "" {
		return s.waitStreaming(ctx)
	}
	if err := s.exec(ctx, "ALTER SYSTEM SET primary_conninfo = "+quote(ci), "SELECT pg_reload_conf()"); err != nil {
		return err
	}
	return s.waitStreaming(ctx)
}

// quote is v as an SQL string literal.
func quote(v string) string { return "'" + strings.ReplaceAll(v, "'", "''") + "'" }

// exec runs each of sqls in turn on one fresh connection.
func (s *Server) exec(ctx context.Context, sqls ...string) error {
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	c, err := pgx.Connect(cctx, s.DSN()+"&connect_timeout=2")
	if err != nil {
		return err
	}
	defer c.Close(context.Background())
	for _, sql := range sqls {
		if _, err := c.Exec(cctx, sql); err != nil {
			return fmt.Errorf("%s %s: %w", sql, s.where(), err)
		}
	}
	return nil
}

// Promote promotes the standby s with pg_ctl promote (in its container,
// on the docker backend) and returns once it accepts writes (it assigns a
// transaction id). Its DSN stays the same.
func (s *Server) Promote(ctx context.Context) error {
	if err := s.tool(ctx, "pg_ctl", "promote", "-D", s.DataDir, "-w", "-t", "60"); err != nil {
		return err
	}
	delay := 2 * time.Millisecond
	for {
		var xid string
		err := s.query(ctx, "SELECT pg_current_xact_id()::text", &xid)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("promoted server %s takes no writes (%v): %w", s.where(), err, ctx.Err())
		case <-time.After(delay):
		}
		delay = min(2*delay, 50*time.Millisecond)
	}
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
	if s.cmd != nil {
		s.contLocked()
		pm := s.cmd.Process.Pid
		kids := children(pm)
		syscall.Kill(pm, syscall.SIGQUIT) // immediate shutdown: ends the backends, removes the shared memory
		select {
		case <-s.done:
			waitGone(kids, 10*time.Second)
			s.cmd = nil
		case <-time.After(10 * time.Second):
			s.killLocked()
		}
	}
	removeShm(s.DataDir)
	return s.removeDir()
}

func (s *Server) removeDir() error { return os.RemoveAll(s.Dir) }

// removeShm removes the System V shared memory segment that
// postmaster.pid names, if it is still there with nobody attached: a
// postmaster killed with SIGKILL leaves it behind (a clean shutdown
// removes it and the file).
func removeShm(dataDir string) {
	b, err := os.ReadFile(filepath.Join(dataDir, "postmaster.pid"))
	if err != nil {
		return
	}
	lines := strings.Split(string(b), "\n")
	if len(lines) < 7 {
		return
	}
	f := strings.Fields(lines[6]) // "key shmid"
	if len(f) != 2 {
		return
	}
	key, err1 := strconv.ParseInt(f[0], 10, 64)
	id, err2 := strconv.Atoi(f[1])
	if err1 != nil || err2 != nil {
		return
	}
	var desc unix.SysvShmDesc
	if _, err := unix.SysvShmCtl(id, unix.IPC_STAT, &desc); err != nil {
		return
	}
	if int64(desc.Perm.Key) != key || desc.Nattch != 0 {
		return
	}
	unix.SysvShmCtl(id, unix.IPC_RMID, nil)
}

// LogTail returns the last n lines of the server's log.
func (s *Server) LogTail(n int) string {
	if s.box != nil {
		return s.box.LogTail(n)
	}
	b, err := os.ReadFile(s.LogPath)
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	lines := bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
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

// proc is a process, known by its pid and start time.
type proc struct {
	pid   int
	start string
}

// children lists the processes whose parent is ppid, from /proc.
func children(ppid int) []proc {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []proc
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		st, err := stat(pid)
		if err != nil || len(st) < 20 || st[1] != strconv.Itoa(ppid) {
			continue
		}
		out = append(out, proc{pid: pid, start: st[19]})
	}
	return out
}

// stat returns the fields of /proc/pid/stat after the command name: the
// state is [0], the parent [1], the start time [19].
func stat(pid int) ([]string, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return nil, err
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return nil, errors.New("malformed stat")
	}
	return strings.Fields(string(b[i+1:])), nil
}

// gone reports whether p has exited: no such process, a zombie, or its
// pid now names a later process.
func (p proc) gone() bool {
	st, err := stat(p.pid)
	if err != nil || len(st) < 20 {
		return true
	}
	return st[0] == "Z" || st[0] == "X" || st[19] != p.start
}

// waitGone polls until every process of ps has exited, or timeout passes.
func waitGone(ps []proc, timeout time.Duration) {
	deadline := time.Now().Add(timeout)
	delay := time.Millisecond
	for _, p := range ps {
		for !p.gone() && time.Now().Before(deadline) {
			time.Sleep(delay)
			delay = min(2*delay, 20*time.Millisecond)
		}
	}
}

// freePort asks the kernel for a free loopback TCP port.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// dirPrefix starts the name of the temporary directories: dirPrefix + pid
// + "-" + start time + "-" + random, naming the process that owns it.
const dirPrefix = "locklab-pg-"

var sweep sync.Once

// RemoveStale removes the temporary directories (and any shared memory
// segment their killed postmaster left) of servers whose owning process is
// gone: a run killed before it could close them. Its postgres processes
// died with it. Start calls it once per process; it returns the
// directories it removed.
func RemoveStale() []string {
	var removed []string
	for _, base := range bases() {
		removed = append(removed, procid.RemoveStale(base, dirPrefix, func(dir string) {
			removeShm(filepath.Join(dir, "data")) // the segment a killed postmaster left
		})...)
	}
	return removed
}

// bases are where a server's directory may be: the temporary directory,
// and /tmp when that is another.
func bases() []string {
	if t := os.TempDir(); t != fallbackBase {
		return []string{t, fallbackBase}
	}
	return []string{fallbackBase}
}

// fallbackBase holds the servers' directories when the temporary directory
// is one the server's user cannot enter.
const fallbackBase = "/tmp"

// baseDir is the first of bases that the user of cred (this process's, when
// nil) can reach: postgres, run as an unprivileged user by root, cannot
// work under a TMPDIR private to root.
func baseDir(cred *syscall.Credential) (string, error) {
	if cred == nil {
		return os.TempDir(), nil
	}
	for _, b := range bases() {
		if canEnter(b, cred) {
			return b, nil
		}
	}
	return "", fmt.Errorf("pgproc: user uid %d, which runs postgres, can enter none of %s: "+
		"set TMPDIR to a directory it can reach", cred.Uid, strings.Join(bases(), ", "))
}

// canEnter tells whether the user of cred may search dir and each of its
// parents, by their permission bits (supplementary groups are not read).
func canEnter(dir string, cred *syscall.Credential) bool {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return false
	}
	for {
		fi, err := os.Stat(dir)
		if err != nil {
			return false
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok {
			return true
		}
		var bit os.FileMode = 0o001
		switch {
		case st.Uid == cred.Uid:
			bit = 0o100
		case st.Gid == cred.Gid:
			bit = 0o010
		}
		if fi.Mode().Perm()&bit == 0 {
			return false
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return true
		}
		dir = parent
	}
}
