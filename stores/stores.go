// Package stores holds the stores that locklab's locks run on, one folder
// each (stores/redis, stores/etcd, stores/postgres, stores/zookeeper), and
// starts the servers of those other than Redis for the CLI, play and the
// documentation generator (Redis's are the nodes stores/redis/redisnode
// starts).
// Importing it registers every store with the harness; each store's
// folder registers itself (harness.RegisterStore), as database/sql's
// drivers do, and this package is the one list of them.
//
// Adding a store is a folder beside the others, an import here, and its
// strategies' package (docs/development.md has the checklist).
package stores

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/locklab/locklab/harness"
	"github.com/locklab/locklab/internal/tooling/backends"
	"github.com/locklab/locklab/internal/tooling/dockerbox"
	_ "github.com/locklab/locklab/stores/etcd"      // registers the etcd store
	_ "github.com/locklab/locklab/stores/postgres"  // registers the PostgreSQL store
	_ "github.com/locklab/locklab/stores/redis"     // registers the Redis store
	_ "github.com/locklab/locklab/stores/zookeeper" // registers the ZooKeeper store
	"github.com/locklab/locklab/strategies"
	_ "github.com/locklab/locklab/strategies/etcdlock" // registers the etcd family
	_ "github.com/locklab/locklab/strategies/pglock"   // registers the postgres family
	_ "github.com/locklab/locklab/strategies/zklock"   // registers the zookeeper family
)

// Servers are the servers started, as nodes by store, for
// harness.MatrixOptions.Stores.
type Servers struct {
	Nodes map[string][]harness.Node
}

// First returns the node every cell of store runs on, nil when none was
// started.
func (s *Servers) First(store string) harness.StoreNode {
	if s == nil || len(s.Nodes[store]) == 0 {
		return nil
	}
	return s.Nodes[store][0].(harness.StoreNode)
}

// Of names the store that strategy name locks on when it is not Redis,
// the harness's Main store, whose servers the caller starts itself
// ("postgres", "etcd"); else "". A strategy whose store is not registered
// is an error of harness.Resolve's, which names the package to import.
func Of(name string) string {
	if d, err := harness.StrategyStore(name); err == nil && !d.Main {
		return d.Name
	}
	return ""
}

// Installed reports whether the servers of store can be started here: an
// error saying how to install them otherwise.
func Installed(store string) error { return harness.StoreInstalled(store) }

// Names are the registered strategies of the stores other than Redis whose
// servers are installed here.
func Names() []string {
	var out []string
	for _, d := range strategies.All() {
		if st := Of(d.Name); st != "" && Installed(st) == nil {
			out = append(out, d.Name)
		}
	}
	return out
}

// Backend resolves the backend the servers run on from the Redis nodes'
// (redisnode.Options.Backend or redisnode.Cluster.Backend): "docker" and
// "process" are themselves; "" is docker when a Docker engine answers, else
// process, as redisnode picks; any other (addrs) gives no store but Redis.
func Backend(ctx context.Context, redis string) (string, error) {
	switch redis {
	case backends.Docker, backends.Process:
		return redis, nil
	case "":
		if _, err := dockerbox.Connect(ctx); err == nil {
			return backends.Docker, nil
		}
		return backends.Process, nil
	}
	return "", fmt.Errorf("the %s backend gives Redis servers only: use --backend process or docker", redis)
}

// Start starts the servers the strategies named lock on beyond Redis,
// on backend ("process" or "docker", see Backend), each once, all at once;
// none when no strategy of another store is named. say, when set, is told
// each store's servers started, in a line. The caller closes them.
func Start(ctx context.Context, backend string, names []string, say func(string)) (*Servers, error) {
	return start(ctx, backend, names, say, false)
}

// StartShared is Start for a matrix whose cells that kill, restart or
// fail over a server run on servers of their own
// (harness.MatrixOptions.StartFaultServer, FaultServer): a store that
// offers a smaller node for the other cells (harness.Driver.StartShared:
// one etcd member, one ZooKeeper server) starts that one.
func StartShared(ctx context.Context, backend string, names []string, say func(string)) (*Servers, error) {
	return start(ctx, backend, names, say, true)
}

func start(ctx context.Context, backend string, names []string, say func(string), shared bool) (*Servers, error) {
	s := &Servers{Nodes: map[string][]harness.Node{}}
	want := map[string]string{} // store: the first strategy named that locks there
	for _, name := range names {
		if st := Of(name); st != "" && want[st] == "" {
			want[st] = name
		}
	}
	if len(want) > 0 && backend != backends.Process && backend != backends.Docker {
		return nil, fmt.Errorf("stores: backend %q: want %q or %q", backend, backends.Process, backends.Docker)
	}
	ds := harness.Stores()
	started := make([][]harness.StoreNode, len(ds))
	errs := make([]error, len(ds))
	var wg sync.WaitGroup
	for i, d := range ds {
		name := want[d.Name]
		if name == "" {
			continue
		}
		wg.Go(func() {
			var err error
			if shared && d.StartShared != nil {
				var n harness.StoreNode
				if n, err = d.StartShared(ctx, backend); err == nil {
					started[i] = []harness.StoreNode{n}
				}
			} else {
				started[i], err = d.Start(ctx, backend, 1)
			}
			if err != nil {
				errs[i] = fmt.Errorf("starting %s for %s: %w", d.Title, name, err)
			}
		})
	}
	wg.Wait()
	for i, d := range ds {
		for _, n := range started[i] {
			s.Nodes[d.Name] = append(s.Nodes[d.Name], n)
		}
	}
	if err := errors.Join(errs...); err != nil {
		s.Close()
		return nil, err
	}
	if say != nil {
		for i, d := range ds {
			if len(started[i]) > 0 {
				say(d.Title + ": " + d.Describe(started[i][0], started[i][1:]))
			}
		}
	}
	return s, nil
}

// FaultServer starts one more server of a store on backend, for
// harness.MatrixOptions.StartFaultServer: the matrix's cells that kill,
// restart or fail over the server run on such servers, started as they
// need them (harness.Driver.StartFault's where the store has one).
func FaultServer(backend string) func(ctx context.Context, store string) (harness.Node, error) {
	return func(ctx context.Context, store string) (harness.Node, error) {
		d, err := harness.LookupStore(store)
		if err != nil {
			return nil, err
		}
		if d.StartFault != nil {
			return d.StartFault(ctx, backend)
		}
		ns, err := d.Start(ctx, backend, 1)
		if err != nil {
			return nil, err
		}
		return ns[0], nil
	}
}

// Close stops the servers, side by side: each is a process or a container
// of its own, and removing a container costs the engine a while.
func (s *Servers) Close() error {
	if s == nil {
		return nil
	}
	var closers []func() error
	for _, ns := range s.Nodes {
		for _, n := range ns {
			closers = append(closers, n.(harness.StoreNode).Close)
		}
	}
	errs := make([]error, len(closers))
	var wg sync.WaitGroup
	for i, c := range closers {
		wg.Go(func() { errs[i] = c() })
	}
	wg.Wait()
	return errors.Join(errs...)
}
