package strategies_test

import (
	"testing"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/internal/redistest"
	"github.com/locklab/locklab/strategies"
	"github.com/locklab/locklab/strategies/strategytest"
)

// TestConformance runs the suite for every registered strategy on real
// redis-server processes: one for single-node strategies, five for
// multi-node ones.
func TestConformance(t *testing.T) {
	servers := redistest.Start(t, 5)
	nodes := make([]locklab.ConnSource, len(servers))
	for i, s := range servers {
		nodes[i] = s.Pool
	}
	for _, name := range strategies.Names() {
		d, err := strategies.Info(name)
		if err != nil {
			t.Fatal(err)
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			strategytest.Run(t, name, func() locklab.Config {
				if d.Properties.MultiNode {
					return locklab.Config{Nodes: nodes}
				}
				return locklab.Config{Pool: servers[0].Pool}
			})
		})
	}
}
