// The temporary directory of a cluster, in memory where it can be, and the
// removal of those that a killed run left behind.

package etcdproc

import (
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
func RemoveStale() []string { return procid.RemoveStaleTemp(dirPrefix) }
