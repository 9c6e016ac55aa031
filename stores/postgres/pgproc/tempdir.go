// The temporary directory of a process-backend server: the user it belongs
// to, where it is made, and the removal of those (and of the shared memory)
// that a killed run left behind.

package pgproc

import (
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/locklab/locklab/internal/tooling/procid"
)

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
	s.initProc()
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

// bases are where a server's directory may be, in the order tried: memory
// (procid.ShmDir, as for etcd's, ZooKeeper's and Redis's directories; a
// server goes there only while it has room, but RemoveStale sweeps it
// always), the temporary directory, and /tmp when that is another. On a
// disk every file postgres, initdb or pg_basebackup creates costs a
// journaled create: a base backup's thousand files took 0.8 s of system
// time on ext4 and 0.07 s in memory.
func bases() []string {
	b := []string{procid.ShmDir}
	if t := os.TempDir(); t != fallbackBase {
		b = append(b, t)
	}
	return append(b, fallbackBase)
}

// fallbackBase holds the servers' directories when the temporary directory
// is one the server's user cannot enter.
const fallbackBase = "/tmp"

// baseDir is the first of bases that the user of cred can reach (this
// process's, when nil, can write): postgres, run as an unprivileged user by
// root, cannot work under a TMPDIR private to root.
func baseDir(cred *syscall.Credential) (string, error) {
	for _, b := range bases() {
		if b == procid.ShmDir && !procid.ShmUsable() {
			continue
		}
		if cred == nil && writable(b) || cred != nil && canEnter(b, cred) {
			return b, nil
		}
	}
	if cred == nil {
		return os.TempDir(), nil
	}
	return "", fmt.Errorf("pgproc: user uid %d, which runs postgres, can enter none of %s: "+
		"set TMPDIR to a directory it can reach", cred.Uid, strings.Join(bases(), ", "))
}

// writable tells whether this process may make a directory in dir.
func writable(dir string) bool { return unix.Access(dir, unix.W_OK|unix.X_OK) == nil }

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
