package etcd

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/locklab/locklab/harness"
	"github.com/locklab/locklab/harness/fault"
	"github.com/locklab/locklab/harness/harnesstest"
	"github.com/locklab/locklab/stores/etcd/etcdproc"
	"github.com/locklab/locklab/stores/etcd/etcdproc/etcdtest"
)

// TestEtcdMemberLosesData: member-loses-data's cells, as the matrix
// explores them, on a real cluster: a follower lags (killed) while c1
// takes the lock, and another member comes back with an emptied data
// directory while the leader is down; etcd bootstraps it afresh, the
// lagging member leads, and c2 acquires beside c1 on either lock.
func TestEtcdMemberLosesData(t *testing.T) {
	if testing.Short() {
		t.Skip("kills and restarts members of a cluster")
	}
	nodes := []harness.Node{NewNode("n1", etcdtest.Start(t, etcdproc.Options{}))}
	began := time.Now()
	m, err := harness.Matrix(context.Background(), harness.MatrixOptions{
		Strategies:       []string{"etcd-lease", "etcd-mutex"},
		Scenarios:        []string{"member-loses-data"},
		Stores:           map[string][]harness.Node{Name: nodes},
		StorePreemptions: harness.StorePreemptions, StoreSchedules: harness.StoreSchedules,
	})
	require.NoError(t, err)
	for _, st := range []string{"etcd-lease", "etcd-mutex"} {
		c, ok := m.Cell(st, "member-loses-data")
		require.True(t, ok, st)
		t.Logf("%s: %s %q after %d schedules, %v (%s)", st, c.Outcome, c.Message, c.Schedules, c.Elapsed.Round(time.Millisecond), c.Schedule)
		if c.Counterexample != nil {
			for _, e := range c.Counterexample.Events {
				if len(e.Notes) > 0 {
					t.Logf("  %d %s %v", e.Step, e.Label, e.Notes)
				}
			}
		}
		assert.Equal(t, harness.Violated, c.Outcome, "%s: %s", st, c.Message)
	}
	t.Logf("both cells in %v", time.Since(began).Round(time.Millisecond))
	healthy(t, nodes[0].(*Node))
}

// TestEtcdMemberLossRecovers: after a run whose member lost its data, the
// next run starts on a whole cluster of one history: every member runs and
// serves a linearizable read, they agree on the revision, the lock's
// prefix is empty, and the same schedule plays out as it did.
func TestEtcdMemberLossRecovers(t *testing.T) {
	if testing.Short() {
		t.Skip("kills and restarts members of a cluster")
	}
	n := NewNode("n1", etcdtest.Start(t, etcdproc.Options{}))
	cs := harnesstest.Case(t, "member-loses-data", "etcd-lease")
	var verdicts []harness.Outcome
	for range 2 {
		began := time.Now()
		h, err := harness.Run(context.Background(), harness.RunOptions{Case: cs, Nodes: []harness.Node{n}})
		require.NoError(t, err)
		t.Logf("%s in %v: %s", h.Verdict.Outcome, time.Since(began).Round(time.Millisecond), h.Schedule)
		for _, e := range h.Events {
			if len(e.Notes) > 0 {
				t.Logf("  %d %s %v", e.Step, e.Label, e.Notes)
			}
		}
		verdicts = append(verdicts, h.Verdict.Outcome)
		healthy(t, n)
	}
	assert.Equal(t, verdicts[0], verdicts[1], "the second run plays as the first")
	assert.True(t, fault.Supports(n, fault.MemberLoss))
}

// healthy checks that n's cluster is whole and of one history, with
// nothing left under any lock's prefix.
func healthy(t *testing.T, n *Node) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl := n.Cluster
	for _, m := range cl.Members() {
		require.True(t, m.Running(), "%s runs", m.Name)
	}
	require.NoError(t, cl.WaitHealthy(ctx))
	cli := etcdtest.Client(t, cl)
	put, err := cli.Put(ctx, "member-loss-probe", "x")
	require.NoError(t, err)
	for _, m := range cl.Members() {
		resp, err := m.Client().Get(ctx, "member-loss-probe")
		require.NoError(t, err, "a linearizable read through %s", m.Name)
		require.Equal(t, int64(1), resp.Count, "through %s", m.Name)
		assert.Equal(t, put.Header.Revision, resp.Header.Revision, "%s's revision", m.Name)
	}
	_, err = cli.Delete(ctx, "member-loss-probe")
	require.NoError(t, err)
	left, err := cli.Get(ctx, "", clientv3.WithFromKey(), clientv3.WithKeysOnly())
	require.NoError(t, err)
	var keys []string
	for _, kv := range left.Kvs {
		if k := string(kv.Key); k != "health" {
			keys = append(keys, k)
		}
	}
	assert.Empty(t, keys, fmt.Sprintf("keys left: %v", keys))
}
