// Package pgproc runs throwaway PostgreSQL clusters for tests and for the
// harness: each is made with initdb in a temporary directory and served by
// a postgres process on a free loopback port, with its unix sockets in that
// directory. Faults are first-class: kill the postmaster, end one backend,
// pause and resume every process, restart after a crash, start a streaming
// standby, cut it off from its primary and connect it again, make it a
// synchronous one (SetSynchronous), and promote it.
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
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/locklab/locklab/internal/tooling/backends"
	"github.com/locklab/locklab/internal/tooling/cleanup"
	"github.com/locklab/locklab/internal/tooling/serverproc"
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

// The backends of Options.Backend (internal/tooling/backends's).
const (
	BackendProcess = backends.Process
	BackendDocker  = backends.Docker
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

	// proc is the postmaster, here or in the server's container, and its
	// backends.
	proc serverproc.Proc

	mu     sync.Mutex
	closed bool
	// tools are the short-lived programs running on the server's
	// directory (initdb, pg_basebackup): Close ends them before it
	// removes the directory they write.
	tools map[*os.Process]chan struct{}
	// conninfo is a standby's primary_conninfo, kept by StopStreaming for
	// StartStreaming.
	conninfo string

	// net is the docker backend's network (its primary's, for a standby);
	// the server's container is proc's.
	net *boxNet
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
