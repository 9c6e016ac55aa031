// The servers a session plays on: its own Redis servers, with a replica of
// n1 when its level fails over, or its own etcd cluster or PostgreSQL
// server when its strategy locks there; kept while the next level fits
// them.

package play

import (
	"context"
	"errors"
	"fmt"

	"github.com/locklab/locklab/harness"
	"github.com/locklab/locklab/internal/tooling/backends"
)

// Servers are the Redis servers one session plays on: its own, so that its
// faults (a restart, a failover) touch nobody else's run.
type Servers interface {
	// Nodes are the servers, n1 first.
	Nodes() []harness.Node
	// Fits reports whether they can run a level.
	Fits(l Level) bool
	// Close stops them and removes everything they left.
	Close() error
}

// StartServers starts the servers for a level.
type StartServers func(ctx context.Context, l Level) (Servers, error)

// ClusterServers starts the Main store's servers per session on backend
// ("docker" or "process"; "" picks as the store does) with its registered
// harness.Driver (StartNodes): the level's node count, and a replica of n1
// when it fails over. The addrs backend cannot give each participant
// servers of their own and is refused. A level of another store gets
// servers of that store instead, as local processes whatever the backend
// (StoreServers).
func ClusterServers(backend, image string) StartServers {
	return func(ctx context.Context, l Level) (Servers, error) {
		if l.Store != "" {
			return StoreServers(ctx, l)
		}
		d, err := harness.MainStore()
		if err != nil {
			return nil, err
		}
		s, err := d.StartNodes(ctx, harness.NodesOptions{Backend: backend, Image: image, N: l.Nodes, Replica: l.Replica, Label: "play"})
		if err != nil {
			return nil, err
		}
		if s.Backend == backends.Addrs {
			s.Close()
			return nil, errors.New("play starts servers of its own for every participant: use the process or docker backend, not addrs")
		}
		return &clusterServers{s: s, replica: l.Replica}, nil
	}
}

type clusterServers struct {
	s       *harness.StartedNodes
	replica bool
}

func (s *clusterServers) Nodes() []harness.Node { return s.s.Nodes }
func (s *clusterServers) Close() error          { return s.s.Close() }

// Fits: a Redis level, enough nodes, and a replica exactly when the level
// fails over (a replicated n1 that failed over once serves as master of a
// fresh one).
func (s *clusterServers) Fits(l Level) bool {
	return l.Store == "" && len(s.s.Nodes) >= l.Nodes && s.replica == l.Replica
}

// StoreServers starts the servers of a level whose strategy locks on
// another store than Redis, with the store's registered harness.Driver (a
// three-member etcd cluster, a throwaway PostgreSQL server, a ZooKeeper
// ensemble), local processes of their own, which Close stops and removes
// with their directories.
func StoreServers(ctx context.Context, l Level) (Servers, error) {
	if l.Store == "" {
		return nil, fmt.Errorf("level %s plays on Redis", l.ID)
	}
	d, err := harness.LookupStore(l.Store)
	if err != nil {
		return nil, err
	}
	if err := harness.StoreInstalled(l.Store); err != nil {
		return nil, err
	}
	ns, err := d.Start(ctx, backends.Process, 1)
	if err != nil {
		return nil, err
	}
	return &storeServers{n: ns[0], store: l.Store}, nil
}

type storeServers struct {
	n     harness.StoreNode
	store string
}

func (s *storeServers) Nodes() []harness.Node { return []harness.Node{s.n} }
func (s *storeServers) Close() error          { return s.n.Close() }

// Fits: a level of the same store (each is one node of the harness).
func (s *storeServers) Fits(l Level) bool { return l.Store == s.store }

// storeTitle is how messages name what a level plays on.
func storeTitle(store string) string { return harness.StoreTitle(store) }
