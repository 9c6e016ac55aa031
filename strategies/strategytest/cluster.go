package strategytest

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/strategies"
)

// ClusterKeys are lock keys of every shape a Redis Cluster hashes
// differently: plain keys, keys with a hash tag of their own, and keys
// whose braces make no tag.
var ClusterKeys = []string{"orders:42", "users:7", "{tag}:x", "{user:7}:lock", "a{b", "a}b", "{}x"}

// RunCluster runs the suite on a Redis Cluster for every registered
// strategy. newSource returns a connection source on the cluster (a
// cluster client's adapter, which is a strategies.ClusterSource); it is
// called from several goroutines at once. A strategy that can run on a
// cluster passes the whole suite there, and locks and releases every key of
// ClusterKeys; one that cannot (Description.NoCluster) must be refused by
// New with locklab.ErrInvalid and its reason, whatever the Config.
func RunCluster(t *testing.T, newSource func() locklab.ConnSource) {
	src := newSource()
	cs, ok := src.(strategies.ClusterSource)
	require.True(t, ok && cs.RedisCluster(), "%T does not say it reaches a Redis Cluster (strategies.ClusterSource)", src)
	for _, name := range strategies.Names() {
		d, err := strategies.Info(name)
		require.NoError(t, err)
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			if slices.Contains(d.Options, strategies.OptStore) {
				t.Skip("a strategy of another store than Redis")
			}
			if d.NoCluster != "" {
				refused(t, name, d, newSource)
				return
			}
			if d.Properties.MultiNode {
				t.Fatalf("%s is multi-node but declares it runs on a cluster", name)
			}
			newConfig := func() locklab.Config { return locklab.Config{Pool: newSource()} }
			t.Run("ClusterKeys", func(t *testing.T) {
				t.Parallel()
				clusterKeys(t, name, newConfig)
			})
			Run(t, name, newConfig)
		})
	}
}

// refused: New fails on a cluster source, in every place a Config takes
// one, with the strategy's reason.
func refused(t *testing.T, name string, d strategies.Description, newSource func() locklab.ConnSource) {
	cfgs := []locklab.Config{{Pool: newSource()}}
	if d.Properties.MultiNode {
		cfgs = []locklab.Config{
			{Nodes: []locklab.ConnSource{newSource(), newSource(), newSource()}},
			{Nodes: []locklab.ConnSource{deadPool(t), deadPool(t), newSource()}},
		}
	}
	for _, cfg := range cfgs {
		_, err := strategies.New(name, cfg)
		require.ErrorIs(t, err, locklab.ErrInvalid)
		assert.ErrorContains(t, err, "cannot run on a Redis Cluster: "+d.NoCluster)
	}
	t.Logf("%s refuses a Redis Cluster: %s", name, d.NoCluster)
}

// clusterKeys locks and releases each key of ClusterKeys twice, with a
// second client refused in between; a fenced strategy's second fence is
// the greater.
func clusterKeys(t *testing.T, name string, newConfig func() locklab.Config) {
	ctx := context.Background()
	a, err := strategies.New(name, newConfig())
	require.NoError(t, err)
	b, err := strategies.New(name, newConfig())
	require.NoError(t, err)
	d, _ := strategies.Info(name)
	for _, k := range ClusterKeys {
		k = k + ":" + t.Name()
		var last int64
		for range 2 {
			lease, err := a.Acquire(ctx, k, time.Minute)
			require.NoError(t, err, k)
			_, err = b.Acquire(ctx, k, time.Minute)
			require.ErrorIs(t, err, locklab.ErrNotAcquired, k)
			if d.Properties.Fencing {
				assert.Greater(t, lease.Fence, last, k)
				last = lease.Fence
			}
			require.NoError(t, a.Release(ctx, lease), k)
		}
	}
}
