package strategies_test

import (
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/internal/tooling/redistest"
	"github.com/locklab/locklab/strategies"
	"github.com/locklab/locklab/strategies/incr_expire"
	"github.com/locklab/locklab/strategies/redlock"
	"github.com/locklab/locklab/strategies/reentrant"
	"github.com/locklab/locklab/strategies/setnx_getset"
	"github.com/locklab/locklab/strategies/setnxex"
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
		{"set-nx-px-del", locklab.Config{Pool: pool, Watchdog: true}, "hash-reentrant, set-nx-px"},
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

// TestConstructorsRefuseOptionsTheyDoNotRead: a strategy built with its own
// package's constructor, not through the registry, refuses a Config field
// it does not read too, and accepts those its description says it reads.
func TestConstructorsRefuseOptionsTheyDoNotRead(t *testing.T) {
	pool := locklab.NewPool("127.0.0.1:1") // never dialled
	defer pool.Close()
	constructors := map[string]func(locklab.Config) (any, error){
		"setnx-del":           func(c locklab.Config) (any, error) { return setnx_getset.NewSetNXDel(c) },
		"setnx-getset":        func(c locklab.Config) (any, error) { return setnx_getset.NewSetNXGetSet(c) },
		"setnx-getset-lua":    func(c locklab.Config) (any, error) { return setnx_getset.NewSetNXGetSetLua(c) },
		"setnx-forever":       func(c locklab.Config) (any, error) { return setnx_getset.NewSetNXForever(c) },
		"setnx-expire-always": func(c locklab.Config) (any, error) { return setnxex.NewSetNXExpireAlways(c) },
		"incr-expire":         func(c locklab.Config) (any, error) { return incr_expire.NewIncrExpire(c) },
		"incr-expire-lua":     func(c locklab.Config) (any, error) { return incr_expire.NewIncrExpireLua(c) },
		"incr-expire-multi":   func(c locklab.Config) (any, error) { return incr_expire.NewIncrExpireMulti(c) },
		"setnx-expire":        func(c locklab.Config) (any, error) { return setnxex.NewSetNXExpire(c) },
		"set-nx-px-del":       func(c locklab.Config) (any, error) { return setnxex.NewSetNXPXDel(c) },
		"set-nx-px-getdel":    func(c locklab.Config) (any, error) { return setnxex.NewSetNXPXGetDel(c) },
		"set-nx-px":           func(c locklab.Config) (any, error) { return setnxex.NewSetNXPX(c) },
		"set-nx-px-wait":      func(c locklab.Config) (any, error) { return setnxex.NewSetNXPXWait(c) },
		"hash-reentrant":      func(c locklab.Config) (any, error) { return reentrant.New(c) },
		"redlock":             func(c locklab.Config) (any, error) { return redlock.New(c) },
	}
	require.ElementsMatch(t, strategies.Names(), slices.Collect(maps.Keys(constructors)), "a constructor for every registered strategy")
	set := map[string]func(*locklab.Config){
		strategies.OptDriftFactor: func(c *locklab.Config) { c.DriftFactor = 0.1 },
		strategies.OptNodeTimeout: func(c *locklab.Config) { c.NodeTimeout = time.Second },
		strategies.OptNotify:      func(c *locklab.Config) { c.Notify = true },
		strategies.OptWatchdog:    func(c *locklab.Config) { c.Watchdog = true },
		strategies.OptStore:       func(c *locklab.Config) { c.Store = struct{}{} },
	}
	for name, build := range constructors {
		d, err := strategies.Info(name)
		require.NoError(t, err)
		for opt, apply := range set {
			cfg := locklab.Config{Pool: pool}
			if d.Properties.MultiNode {
				cfg = locklab.Config{Nodes: []locklab.ConnSource{pool}}
			}
			apply(&cfg)
			_, err := build(cfg)
			if slices.Contains(d.Options, opt) {
				assert.NoError(t, err, "%s reads Config.%s", name, opt)
				continue
			}
			require.ErrorIs(t, err, locklab.ErrInvalid, "%s with Config.%s", name, opt)
			assert.Contains(t, err.Error(), "strategy "+name+" does not read Config."+opt)
		}
	}
}
