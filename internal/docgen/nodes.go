package docgen

import (
	"context"
	"errors"

	"github.com/locklab/locklab/harness"
	"github.com/locklab/locklab/harness/node"
)

// StartNodes starts the servers generation runs on: three redis-server
// processes on loopback ports, the first with an asynchronous replica for
// the failover scenario, as `locklab matrix --backend process` does. The
// caller calls stop when done.
func StartNodes(ctx context.Context) (nodes []harness.Node, stop func() error, err error) {
	c, err := node.Start(ctx, node.Options{Backend: node.BackendProcess, N: 3})
	if err != nil {
		return nil, nil, err
	}
	r, err := c.Replicated(ctx, c.Nodes()[0])
	if err != nil {
		return nil, nil, errors.Join(err, c.Close())
	}
	return []harness.Node{r, c.Nodes()[1], c.Nodes()[2]}, c.Close, nil
}
