package goredis_test

import (
	"testing"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/adapters/goredis"
	"github.com/locklab/locklab/adapters/internal/adaptertest"
)

// shared is the Redis Cluster of the package's tests; TestMain closes it.
var shared adaptertest.Cluster

func newClusterSource(tb testing.TB, addrs []string) locklab.ConnSource {
	c := clusterClient(addrs)
	tb.Cleanup(func() { c.Close() })
	return goredis.New(c)
}

// The adapter on a Redis Cluster, through a ClusterClient on three masters
// with a replica each.
func TestCluster(t *testing.T) {
	adaptertest.RunCluster(t, &shared, newSource, newClusterSource)
}
