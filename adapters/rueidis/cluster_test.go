package rueidis_test

import (
	"testing"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/adapters/internal/adaptertest"
	locklabrueidis "github.com/locklab/locklab/adapters/rueidis"
)

// shared is the Redis Cluster of the package's tests; TestMain closes it.
var shared adaptertest.Cluster

func newClusterSource(tb testing.TB, addrs []string) locklab.ConnSource {
	return locklabrueidis.New(newClient(tb, addrs...))
}

// The adapter on a Redis Cluster, through rueidis's cluster client on
// three masters with a replica each.
func TestCluster(t *testing.T) {
	adaptertest.RunCluster(t, &shared, newSource, newClusterSource)
}
