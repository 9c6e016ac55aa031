package etcd

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/locklab/locklab/harness"
	"github.com/locklab/locklab/harness/harnesstest"
	"github.com/locklab/locklab/stores/etcd/etcdproc"
	"github.com/locklab/locklab/stores/etcd/etcdproc/etcdtest"
)

// TestGuardedWriteRefusesStaleRevision: on a real etcd cluster, c1 takes
// the lock (a lease grant and a Txn) and stops past its TTL; c2 takes the
// lock and writes; c1's Txn compares its lock key's create revision, which
// its revoked lease took with it, and is refused: the run is SAFE, where
// pause-past-ttl's plain write of the same holder is accepted.
func TestGuardedWriteRefusesStaleRevision(t *testing.T) {
	nodes := []harness.Node{NewNode("n1", etcdtest.Start(t, etcdproc.Options{}))}
	const schedule = "c1 c1 c1 c2 c2 c2 c1"
	for _, strategy := range []string{"etcd-lease", "etcd-mutex"} {
		if out, stale := harnesstest.GuardedRun(t, nodes, "pause-past-ttl-guarded", strategy, schedule); out != harness.Safe || stale != "refused" {
			t.Errorf("%s: %v, c1's stale write %s; want SAFE, refused", strategy, out, stale)
		}
	}
	if out, stale := harnesstest.GuardedRun(t, nodes, "pause-past-ttl", "etcd-lease", "c1 c1 c1 c2 c2 c2 c1"); out != harness.Violated || stale != "accepted" {
		t.Errorf("etcd-lease on pause-past-ttl: %v, c1's stale write %s; want VIOLATED, accepted", out, stale)
	}
}

// TestGuardedResourcesOncePerKey: the runs of a cell prepare the same
// resource over and over, and close deletes each key once: a cell of a
// thousand runs once ran out of close's time deleting the same key a
// thousand times. The key is gone after close.
func TestGuardedResourcesOncePerKey(t *testing.T) {
	ctx := context.Background()
	n := NewNode("n1", etcdtest.Start(t, etcdproc.Options{}))
	s, err := newStore(n)
	require.NoError(t, err)
	for range 3 {
		require.NoError(t, s.PrepareGuarded(ctx, "lock:guarded-once"))
	}
	assert.Len(t, s.resources, 1)
	require.NoError(t, s.Close(ctx))
	cli, err := n.Cluster.Client()
	require.NoError(t, err)
	defer cli.Close()
	resp, err := cli.Get(ctx, resourcePrefix+"lock:guarded-once")
	require.NoError(t, err)
	assert.Zero(t, resp.Count, "close left the resource")
}
