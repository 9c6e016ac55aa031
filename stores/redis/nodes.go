// The servers Redis's runs are given: those of a matrix of its strategies,
// started as `locklab matrix` starts them, and those of locklab play's
// levels (Driver.StartNodes).

package redis

import (
	"context"
	"errors"
	"fmt"

	"github.com/locklab/locklab/harness"
	"github.com/locklab/locklab/internal/tooling/backends"
	"github.com/locklab/locklab/stores/redis/redisnode"
)

// StartMatrixNodes starts the Redis servers a whole matrix runs on, as
// `locklab matrix` does: three nodes with opts (its N is set to 3), the
// first with an asynchronous replica for the scenarios that fail it over.
// stop stops them.
func StartMatrixNodes(ctx context.Context, opts redisnode.Options) (nodes []harness.Node, stop func() error, err error) {
	opts.N = 3
	s, err := startNodes(ctx, opts, true)
	if err != nil {
		return nil, nil, err
	}
	return s.Nodes, s.Close, nil
}

// startNodes starts a redisnode.Cluster with opts, n1 with an asynchronous
// replica when replica says so and the backend can start one (not on
// servers given by address).
func startNodes(ctx context.Context, opts redisnode.Options, replica bool) (*harness.StartedNodes, error) {
	c, err := redisnode.Start(ctx, opts)
	if err != nil {
		return nil, err
	}
	s := &harness.StartedNodes{Backend: c.Backend(), Close: c.Close}
	for _, n := range c.Nodes() {
		s.Nodes = append(s.Nodes, n)
	}
	if replica && c.Backend() != backends.Addrs {
		r, err := c.Replicated(ctx, c.Nodes()[0])
		if err != nil {
			return nil, errors.Join(fmt.Errorf("a replica for n1: %w", err), c.Close())
		}
		s.Nodes[0] = r
	}
	return s, nil
}

// faultPair is a master and its asynchronous replica started for the
// matrix's cells that fail a Redis server over (Driver.StartFault): a
// redisnode.Replicated of a cluster of its own, which Close stops.
type faultPair struct {
	*redisnode.Replicated
	c *redisnode.Cluster
}

// Close stops the pair's two servers.
func (p *faultPair) Close() error { return p.c.Close() }

// startFault starts one master with an asynchronous replica on backend
// (StartFailoverPair), for the matrix's failover cells (Driver.StartFault).
func startFault(ctx context.Context, backend string) (harness.StoreNode, error) {
	return StartFailoverPair(ctx, redisnode.Options{Backend: backend})
}

// StartFailoverPair starts one master with an asynchronous replica, with
// opts (its N is set to 1), for the workers of a failover cell beyond its
// first, which runs on the matrix's own n1 and its replica: each worker's
// runs fail over a pair of their own, named n1 as n1 is. Close stops it.
// Servers given by address have none to start.
func StartFailoverPair(ctx context.Context, opts redisnode.Options) (harness.StoreNode, error) {
	if opts.Backend == backends.Addrs {
		return nil, errors.New("redis: no server to start for a failover on servers given by address")
	}
	opts.N, opts.Label = 1, "failover"
	c, err := redisnode.Start(ctx, opts)
	if err != nil {
		return nil, err
	}
	// The replica's first sync as CatchUp's full resyncs go: through a
	// file, on a master whose cron notices the snapshot's end within
	// 10ms; a diskless one waits for the master's next second.
	if _, err := c.Nodes()[0].Do(ctx, "CONFIG", "SET", "repl-diskless-sync", "no", "rdb-del-sync-files", "yes", "hz", "100"); err != nil {
		return nil, errors.Join(err, c.Close())
	}
	r, err := c.Replicated(ctx, c.Nodes()[0])
	if err != nil {
		return nil, errors.Join(fmt.Errorf("a replica for a failover cell's server: %w", err), c.Close())
	}
	return &faultPair{Replicated: r, c: c}, nil
}
