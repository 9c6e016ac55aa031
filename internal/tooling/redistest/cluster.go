package redistest

import (
	"context"
	"testing"
	"time"

	"github.com/locklab/locklab/internal/tooling/redisproc"
)

// Cluster is a Redis Cluster of redis-server processes (see
// redisproc.StartCluster).
type Cluster = redisproc.Cluster

// StartCluster starts a Redis Cluster of three masters, each with one
// replica, waits until it is ready and stops it when the test ends.
func StartCluster(tb testing.TB) *Cluster {
	tb.Helper()
	return StartClusterOptions(tb, redisproc.ClusterOptions{})
}

// StartClusterOptions is StartCluster with options.
func StartClusterOptions(tb testing.TB, o redisproc.ClusterOptions) *Cluster {
	tb.Helper()
	c, err := redisproc.StartCluster(o)
	if err != nil {
		tb.Fatalf("starting a Redis Cluster: %v", err)
	}
	tb.Cleanup(c.Close)
	return c
}

// KeySlot is key's hash slot as the cluster computes it (CLUSTER KEYSLOT).
func KeySlot(tb testing.TB, c *Cluster, key string) int {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := c.KeySlot(ctx, key)
	if err != nil {
		tb.Fatalf("CLUSTER KEYSLOT %q: %v", key, err)
	}
	return s
}
