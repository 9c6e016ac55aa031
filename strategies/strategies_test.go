package strategies_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/internal/redistest"
	"github.com/locklab/locklab/strategies"
	"github.com/locklab/locklab/strategies/strategytest"
)

// TestConformance runs the suite for every registered strategy on real
// redis-server processes: one for single-node strategies, with a replica
// for those that wait for one (set-nx-px-wait), five for multi-node ones.
func TestConformance(t *testing.T) {
	servers := redistest.Start(t, 5)
	redistest.StartReplica(t, servers[0])
	nodes := make([]locklab.ConnSource, len(servers))
	for i, s := range servers {
		nodes[i] = s.Pool
	}
	for _, name := range strategies.Names() {
		d, err := strategies.Info(name)
		require.NoError(t, err)
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

// TestOptionsScopedToStrategies: a Config field only some strategies read
// is refused by the others, with a message naming those that read it.
func TestOptionsScopedToStrategies(t *testing.T) {
	pool := locklab.NewPool("127.0.0.1:1") // never dialled
	defer pool.Close()
	cases := []struct {
		strategy string
		cfg      locklab.Config
		readers  string
	}{
		{"set-nx-px-del", locklab.Config{Pool: pool, DriftFactor: 0.1}, "redlock"},
		{"setnx-del", locklab.Config{Pool: pool, NodeTimeout: time.Second}, "redlock"},
		{"redlock", locklab.Config{Nodes: []locklab.ConnSource{pool}, Notify: true}, "hash-reentrant, set-nx-px"},
		{"set-nx-px", locklab.Config{Pool: pool, Watchdog: true}, "hash-reentrant"},
	}
	for _, c := range cases {
		_, err := strategies.New(c.strategy, c.cfg)
		require.ErrorIs(t, err, locklab.ErrInvalid, c.strategy)
		assert.Contains(t, err.Error(), "strategies that do: "+c.readers, "%s: the message names the strategies that read the field", c.strategy)
	}
	_, err := strategies.New("set-nx-px", locklab.Config{Pool: pool, Notify: true})
	assert.NoError(t, err, "set-nx-px reads Notify")
	_, err = strategies.New("redlock", locklab.Config{Nodes: []locklab.ConnSource{pool}, DriftFactor: 0.1, NodeTimeout: time.Second})
	assert.NoError(t, err, "redlock reads DriftFactor and NodeTimeout")
}
