// Package procid tells whether the process that created something (a
// container, a temporary directory) still runs: a pid and the process's
// start time identify it even after the pid is reused.
package procid

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// Stat returns the fields of /proc/pid/stat after the command name: the
// state is [0], the parent's pid [1], the start time [19].
func Stat(pid int) ([]string, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return nil, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return nil, errors.New("malformed /proc/" + strconv.Itoa(pid) + "/stat")
	}
	return strings.Fields(s[i+1:]), nil
}

// Start returns the start time of process pid (field 22 of /proc/pid/stat),
// or "" where /proc is not available.
func Start(pid int) string {
	f, err := Stat(pid)
	if err != nil || len(f) < 20 {
		return ""
	}
	return f[19]
}

// Alive reports whether the process pid, started at start ("" if unknown),
// still runs on this host.
func Alive(pid int, start string) bool {
	if pid <= 0 {
		return false
	}
	err := syscall.Kill(pid, 0)
	if err != nil && err != syscall.EPERM {
		return false
	}
	if start != "" {
		if now := Start(pid); now != "" && now != start {
			return false // the pid was reused
		}
	}
	return true
}

// Tag is "pid-starttime-" of this process. A temporary directory named
// prefix + Tag() + something names the process that owns it, which
// RemoveStale reads back.
func Tag() string {
	pid := os.Getpid()
	return strconv.Itoa(pid) + "-" + Start(pid) + "-"
}

// RemoveStale removes the directories in base whose names are prefix + a
// Tag + something and whose owning process is gone (a run killed before it
// could remove them); those of live processes, and names without an
// owner, stay. before, when set, is called with each directory before it
// is removed. It returns the directories removed.
func RemoveStale(base, prefix string, before func(dir string)) []string {
	ents, err := os.ReadDir(base)
	if err != nil {
		return nil
	}
	var removed []string
	for _, e := range ents {
		rest, ok := strings.CutPrefix(e.Name(), prefix)
		if !ok || !e.IsDir() {
			continue
		}
		f := strings.SplitN(rest, "-", 3)
		if len(f) != 3 {
			continue // no owner in the name: leave it alone
		}
		pid, err := strconv.Atoi(f[0])
		if err != nil || Alive(pid, f[1]) {
			continue
		}
		dir := filepath.Join(base, e.Name())
		if before != nil {
			before(dir)
		}
		if os.RemoveAll(dir) == nil {
			removed = append(removed, dir)
		}
	}
	return removed
}

// ShmDir is Linux's memory-backed file system, where a throwaway server's
// directory goes when it can: a write a server acknowledges once on disk
// costs no disk there.
const ShmDir = "/dev/shm"

// shmRoom is the free space ShmDir must have for servers' directories to
// go there: a container's /dev/shm is 64 MB unless it is given more, less
// than one etcd member's preallocated log or two PostgreSQL data
// directories.
const shmRoom = 1 << 30

// ShmUsable reports whether ShmDir is a directory with room for servers'
// directories (a gigabyte free).
func ShmUsable() bool { return hasRoom(ShmDir, shmRoom) }

// hasRoom reports whether dir is on a file system with at least need
// bytes free for this process.
func hasRoom(dir string, need uint64) bool {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return false
	}
	return st.Bavail*uint64(st.Bsize) >= need
}

// MkdirTemp makes a directory named prefix + Tag() + something, owned by
// this process: in ShmDir where it can (ShmUsable), else in the system's
// temporary directory. RemoveStaleTemp removes it once its owner is gone.
func MkdirTemp(prefix string) (string, error) {
	if ShmUsable() {
		if dir, err := os.MkdirTemp(ShmDir, prefix+Tag()); err == nil {
			return dir, nil
		}
	}
	return os.MkdirTemp("", prefix+Tag())
}

// RemoveStaleTemp is RemoveStale on both places MkdirTemp makes its
// directories.
func RemoveStaleTemp(prefix string) []string {
	var removed []string
	for _, base := range []string{ShmDir, os.TempDir()} {
		removed = append(removed, RemoveStale(base, prefix, nil)...)
	}
	return removed
}

// Proc is a process as /proc/N/stat tells it: its pid, its parent's, its
// command name and its state ("R", "S", "T" when stopped, "Z" a zombie).
type Proc struct {
	Pid, PPid int
	Comm      string
	State     string
}

// TailLines returns the last n lines of s (a process's log).
func TailLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
