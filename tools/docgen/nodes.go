package docgen

import (
	"context"
	"fmt"

	"github.com/locklab/locklab/harness"
	"github.com/locklab/locklab/internal/tooling/backends"
	"github.com/locklab/locklab/stores"
	"github.com/locklab/locklab/stores/redis"
	"github.com/locklab/locklab/stores/redis/redisnode"
	"github.com/locklab/locklab/strategies"
)

// StartNodes starts the servers generation runs on: three redis-server
// processes on loopback ports, the first with an asynchronous replica for
// the failover scenario, as `locklab matrix --backend process` does. The
// caller calls stop when done.
func StartNodes(ctx context.Context) (nodes []harness.Node, stop func() error, err error) {
	return redis.StartMatrixNodes(ctx, redisnode.Options{Backend: backends.Process})
}

// StartStores starts the servers of the other stores the matrix and the
// family pages run on, as `locklab matrix` does (package stores): a
// PostgreSQL server and a three-member etcd cluster, as local processes.
// Generation needs every store installed (make servers). The caller calls stop
// when done.
func StartStores(ctx context.Context) (nodes map[string][]harness.Node, stop func() error, err error) {
	var names []string
	for _, d := range harness.Stores() {
		if err := stores.Installed(d.Name); err != nil {
			return nil, nil, fmt.Errorf("the docs run the %s strategies: %w", d.Name, err)
		}
	}
	for _, d := range strategies.All() {
		if stores.Of(d.Name) != "" {
			names = append(names, d.Name)
		}
	}
	s, err := stores.Start(ctx, backends.Process, names, nil)
	if err != nil {
		return nil, nil, err
	}
	return s.Nodes, s.Close, nil
}

// faultServer starts one more server of a store for the matrix's cells
// that fault it (harness.MatrixOptions.StartFaultServer).
var faultServer = stores.FaultServer(backends.Process)
