// What earlier runs left behind: the containers and networks of a process
// that is gone, removed when a docker cluster starts.

package redisnode

import (
	"context"

	"github.com/locklab/locklab/internal/tooling/dockerbox"
)

// RemoveStale removes the containers and networks that an earlier run on
// this host left behind: those labelled locklab whose owning process is gone
// (the etcd and PostgreSQL containers of stores/etcd/etcdproc and
// stores/postgres/pgproc too). Those of live processes (such as parallel test
// binaries) stay. Start calls it on the docker backend; it does nothing when
// no engine answers.
func RemoveStale(ctx context.Context) error { return dockerbox.RemoveStale(ctx) }
