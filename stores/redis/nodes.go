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
