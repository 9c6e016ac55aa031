package etcdproc_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/locklab/locklab/internal/tooling/cpuload"
	"github.com/locklab/locklab/stores/etcd/etcdproc"
	"github.com/locklab/locklab/stores/etcd/etcdproc/etcdtest"
)

// raft is what a member says of the cluster's leadership: the leader's id
// and the raft term.
type raft struct{ leader, term uint64 }

// leadership asks every member for the leader and term it knows.
func leadership(ctx context.Context, t *testing.T, c *etcdproc.Cluster) map[string]raft {
	t.Helper()
	out := map[string]raft{}
	for _, m := range c.Members() {
		st, err := m.Status(ctx)
		require.NoError(t, err, "%s's status", m.Name)
		out[m.Name] = raft{st.Leader, st.RaftTerm}
	}
	return out
}

// TestNoElectionUnderLoad: with the default timings (a heartbeat every
// DefaultHeartbeatInterval, an election after DefaultElectionTimeout of
// silence), a cluster on a machine whose every core is busy elects no
// leader it was not asked to: through a thousand writes, with every
// member's status read after each hundred, every member names the leader
// and the raft term of the start. A follower that timed out would have
// raised the term (etcd 3.4 runs no pre-vote), won or not.
func TestNoElectionUnderLoad(t *testing.T) {
	cpuload.Skip(t)
	const writes = 1000
	ctx := ctxFor(t)
	c := etcdtest.Start(t, etcdproc.Options{})
	cli := etcdtest.Client(t, c)
	_, err := c.Leader(ctx)
	require.NoError(t, err)
	start := leadership(ctx, t, c)

	stop := cpuload.Burn(t)
	for i := range writes {
		_, err := cli.Put(ctx, "k", strconv.Itoa(i))
		require.NoError(t, err)
		if i%100 == 99 {
			require.Equal(t, start, leadership(ctx, t, c), "after %d writes under load", i+1)
		}
	}
	stop()
	assert.Equal(t, start, leadership(ctx, t, c))
}
