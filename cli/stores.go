// The stores other than Redis a command's strategies lock on: a PostgreSQL
// server for the postgres family and a three-member etcd cluster for the
// etcd family (stores), each a throwaway run on the backend the
// Redis nodes run on (local processes or containers), started only when a
// strategy of that family is asked for.

package cli

import (
	"context"
	"fmt"
	"io"

	"github.com/locklab/locklab/harness"
	"github.com/locklab/locklab/internal/tooling/backends"
	"github.com/locklab/locklab/stores"
)

// startStores starts the servers that the strategies named lock on beyond
// Redis, on backend, that of the Redis nodes (redisnode.Cluster.Backend); none
// when no strategy of another store is named. The caller closes them.
func (g *globals) startStores(ctx context.Context, w io.Writer, backend string, names []string) (*stores.Servers, error) {
	if err := g.storesGiven(names); err != nil {
		return nil, err
	}
	return stores.Start(ctx, backend, names, func(line string) { fmt.Fprintln(w, line) })
}

// storesGiven checks that the backend gives the stores the strategies
// named lock on.
func (g *globals) storesGiven(names []string) error {
	for _, name := range names {
		if st := stores.Of(name); st != "" && g.addrsBackend() {
			return fmt.Errorf("strategy %s locks on %s, which the addrs backend does not give: use --backend process or docker", name, st)
		}
	}
	return nil
}

// storesBackend is the backend the other stores' servers run on, the Redis
// nodes' (stores.Backend), when a strategy named locks on one; "" when
// none does.
func (g *globals) storesBackend(ctx context.Context, names []string) (string, error) {
	for _, name := range names {
		if stores.Of(name) != "" {
			return stores.Backend(ctx, g.backend)
		}
	}
	return "", nil
}

// nodesOf returns the nodes case cs runs on: its store's, or redis.
func nodesOf(s *stores.Servers, cs harness.Case, redis []harness.Node) []harness.Node {
	if n := s.Nodes[cs.Strategy.Family]; len(n) > 0 {
		return n
	}
	return redis
}

// addrsBackend reports whether the command runs on the servers --addr
// names, which give no store but Redis.
func (g *globals) addrsBackend() bool {
	return g.backend == backends.Addrs || g.backend == "" && len(g.addrs) > 0
}
