package etcd

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/locklab/locklab/stores/etcd/etcdproc"
	"github.com/locklab/locklab/stores/etcd/etcdproc/etcdtest"
)

// TestEmptyCompactsBehindEveryRun: two stores run on one cluster, as two
// workers do. Once the history has grown by compactEvery revisions, a
// store's Empty compacts it, but never past the revision the other
// store's run started from, from which a waiter of that run may watch:
// only when that store has emptied again is the history compacted up to
// where the first store's run starts. Once a run has killed or restarted
// a member, the history is compacted no more.
func TestEmptyCompactsBehindEveryRun(t *testing.T) {
	ctx := context.Background()
	n := NewNode("n1", etcdtest.Start(t, etcdproc.Options{}))
	a, err := newStore(n)
	require.NoError(t, err)
	defer a.Close(ctx)
	b, err := newStore(n)
	require.NoError(t, err)
	defer b.Close(ctx)
	a.Key("lock:compact")
	b.Key("lock:compact~w1")
	cli, err := n.Cluster.Client()
	require.NoError(t, err)
	defer cli.Close()

	// readable reports whether the history at rev can still be read.
	readable := func(rev int64) bool {
		t.Helper()
		_, err := cli.Get(ctx, "lock:compact", clientv3.WithRev(rev))
		if errors.Is(err, rpctypes.ErrCompacted) {
			return false
		}
		require.NoError(t, err)
		return true
	}
	// grow writes compactEvery revisions.
	grow := func() {
		var wg sync.WaitGroup
		for w := range 8 {
			wg.Go(func() {
				for i := w; i < compactEvery; i += 8 {
					_, err := cli.Put(ctx, "lock:compact/"+strconv.Itoa(i), "")
					if err != nil {
						t.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
		_, err := cli.Delete(ctx, "lock:compact/", clientv3.WithPrefix())
		require.NoError(t, err)
	}

	require.NoError(t, b.Empty(ctx)) // b's run starts here
	bStart := n.history.floors[b]
	grow()
	require.NoError(t, a.Empty(ctx)) // a's run starts here
	aStart := n.history.floors[a]
	require.Greater(t, aStart-bStart, int64(compactEvery))
	require.True(t, readable(bStart), "a compacted the history b's run reads from")

	require.NoError(t, b.Empty(ctx)) // b's next run
	require.False(t, readable(aStart-1), "the history before every run was not compacted")
	require.True(t, readable(aStart), "b compacted the history a's run reads from")

	// A run that kills or restarts a member ends the compactions.
	a.Reconnect(0)
	grow()
	require.NoError(t, a.Empty(ctx))
	grow()
	require.NoError(t, b.Empty(ctx))
	require.True(t, readable(aStart), "the cluster was compacted after a member was restarted")
}
