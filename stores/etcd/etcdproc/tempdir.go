// The temporary directory of a cluster, in memory where it can be, and the
// removal of those that a killed run left behind.

package etcdproc

import (
	"os"
	"sync"

	"github.com/locklab/locklab/internal/tooling/procid"
)

// dirPrefix starts the name of the temporary directories: dirPrefix + pid
// + "-" + start time + "-" + random, naming the process that owns it.
const dirPrefix = "locklab-etcd-"

var sweep sync.Once

// RemoveStale removes the temporary directories of clusters whose owning
// process is gone (a run killed before it could close them; its etcd
// processes died with it). Those of live processes stay. Start calls it
// once per process; it returns the directories it removed.
func RemoveStale() []string {
	var removed []string
	for _, base := range []string{shmDir, os.TempDir()} {
		removed = append(removed, procid.RemoveStale(base, dirPrefix, nil)...)
	}
	return removed
}

// shmDir is the memory-backed file system of Linux.
const shmDir = "/dev/shm"

// mkdirTemp makes a cluster's directory: in shmDir where it can, else in
// the system's temporary directory.
func mkdirTemp(pattern string) (string, error) {
	if dir, err := os.MkdirTemp(shmDir, pattern); err == nil {
		return dir, nil
	}
	return os.MkdirTemp("", pattern)
}
