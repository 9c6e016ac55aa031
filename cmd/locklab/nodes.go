// The Redis nodes a command runs on: started on the chosen backend, with a
// replica where a failover scenario needs one.

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/locklab/locklab/harness"
	"github.com/locklab/locklab/harness/node"
	"github.com/locklab/locklab/strategies"
)

// errViolation is returned, with --fail-on-violation, when a run found what
// it looked for: exit status 1.
var errViolation = errors.New("violation found")

// cluster starts n Redis nodes on the chosen backend; the caller closes it.
func (g *globals) cluster(ctx context.Context, w io.Writer, n int) (*node.Cluster, []harness.Node, error) {
	opts := node.Options{Backend: g.backend, N: n, Image: g.image, Addrs: g.addrs}
	if len(g.addrs) > 0 {
		if opts.Backend == "" {
			opts.Backend = node.BackendAddrs
		}
		if opts.Backend == node.BackendAddrs {
			opts.N = len(g.addrs)
		}
	}
	c, err := node.Start(ctx, opts)
	if err != nil {
		return nil, nil, err
	}
	fmt.Fprintf(w, "Redis: %s\n", c.Describe())
	out := make([]harness.Node, 0, len(c.Nodes()))
	for _, nd := range c.Nodes() {
		out = append(out, nd)
	}
	return c, out, nil
}

// withReplica gives the first node an asynchronous replica when need is
// set (needsReplica), where the backend can start one.
func withReplica(ctx context.Context, c *node.Cluster, nodes []harness.Node, need bool) []harness.Node {
	if !need || c.Backend() == node.BackendAddrs {
		return nodes
	}
	r, err := c.Replicated(ctx, c.Nodes()[0])
	if err != nil {
		return nodes // the failover scenarios are then n/a
	}
	return append([]harness.Node{r}, nodes[1:]...)
}

// needsReplica reports whether a case fails over or waits for a replica.
func needsReplica(cases ...harness.Case) bool {
	for _, cs := range cases {
		if slices.Contains(cs.Scenario.Needs, node.Failover) || cs.Strategy.Replica {
			return true
		}
	}
	return false
}

// namesNeedReplica is needsReplica for the matrix, which resolves its
// names itself: whether a scenario fails over or a strategy (empty: all
// registered) waits for a replica. Names it does not know are the
// matrix's to refuse.
func namesNeedReplica(scenarios, strats []string) bool {
	for _, name := range scenarios {
		if sc, err := harness.Lookup(name); err == nil && slices.Contains(sc.Needs, node.Failover) {
			return true
		}
	}
	if len(strats) == 0 {
		strats = strategies.Names()
	}
	for _, name := range strats {
		if d, err := strategies.Info(name); err == nil && d.Replica {
			return true
		}
	}
	return false
}

func scenarioNames() []string {
	var out []string
	for _, sc := range harness.Scenarios() {
		out = append(out, sc.Name)
	}
	return out
}
