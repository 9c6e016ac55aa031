// The servers a matrix of Redis's strategies runs on, started as
// `locklab matrix` starts them.

package redis

import (
	"context"
	"errors"

	"github.com/locklab/locklab/harness"
	"github.com/locklab/locklab/harness/node"
)

// StartMatrixNodes starts the Redis servers a whole matrix runs on, as
// `locklab matrix` does: three nodes with opts (its N is set to 3), the
// first with an asynchronous replica for the scenarios that fail it over.
// stop stops them.
func StartMatrixNodes(ctx context.Context, opts node.Options) (nodes []harness.Node, stop func() error, err error) {
	opts.N = 3
	c, err := node.Start(ctx, opts)
	if err != nil {
		return nil, nil, err
	}
	r, err := c.Replicated(ctx, c.Nodes()[0])
	if err != nil {
		return nil, nil, errors.Join(err, c.Close())
	}
	return []harness.Node{r, c.Nodes()[1], c.Nodes()[2]}, c.Close, nil
}
