package etcdproc_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/locklab/locklab/internal/tooling/serverproc/proctest"
	"github.com/locklab/locklab/stores/etcd/etcdproc"
	"github.com/locklab/locklab/stores/etcd/etcdproc/etcdtest"
)

// ctxFor is a context for one step of a test: long enough for a start or
// an election on a loaded machine, short enough to fail a test that hangs.
func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// get reads key with a linearizable read through m's endpoint alone, or
// a serializable one (m's own state) when serializable is set.
func get(t *testing.T, m *etcdproc.Member, key string, serializable bool) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var opts []clientv3.OpOption
	if serializable {
		opts = append(opts, clientv3.WithSerializable())
	}
	resp, err := m.Client().Get(ctx, key, opts...)
	require.NoError(t, err, "get %s from %s", key, m.Name)
	if len(resp.Kvs) == 0 {
		return ""
	}
	return string(resp.Kvs[0].Value)
}

func TestBinaryVersion(t *testing.T) {
	bin, err := etcdproc.Binary()
	require.NoError(t, err)
	assert.Regexp(t, `^3\.\d+\.\d+`, etcdproc.Version(bin))

	t.Setenv("LOCKLAB_ETCD", filepath.Join(t.TempDir(), "no-etcd"))
	_, err = etcdproc.Binary()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "LOCKLAB_ETCD")
	_, err = etcdproc.Start(ctxFor(t), etcdproc.Options{})
	require.Error(t, err, "Start runs the binary Binary names")
}

// TestStartClose: three members that agree on one leader and each serve
// what was written through another; Close leaves no process and no
// directory.
func TestStartClose(t *testing.T) {
	ctx := ctxFor(t)
	c, err := etcdproc.Start(ctx, etcdproc.Options{})
	require.NoError(t, err)
	defer c.Close()

	eps := c.Endpoints()
	require.Len(t, eps, etcdproc.DefaultMembers)
	assert.Contains(t, c.Describe(), "3 member processes http://127.0.0.1:")
	ids := map[uint64]bool{}
	for i, m := range c.Members() {
		assert.Equal(t, m, c.Member(i))
		assert.Equal(t, eps[i], m.ClientURL)
		assert.True(t, strings.HasPrefix(m.ClientURL, "http://127.0.0.1:"), m.ClientURL)
		assert.NotEqual(t, m.ClientURL, m.PeerURL)
		assert.NotZero(t, m.ID)
		ids[m.ID] = true
		assert.True(t, m.Running())
		assert.DirExists(t, m.DataDir)
		assert.Same(t, m, c.ByID(m.ID))
	}
	assert.Len(t, ids, len(eps), "distinct member ids")

	cli := etcdtest.Client(t, c)
	_, err = cli.Put(ctx, "k", "v1")
	require.NoError(t, err)
	for _, m := range c.Members() {
		assert.Equal(t, "v1", get(t, m, "k", false), "%s serves the write", m.Name)
	}

	leader, err := c.Leader(ctx)
	require.NoError(t, err)
	for _, m := range c.Members() {
		st, err := m.Status(ctx)
		require.NoError(t, err)
		assert.Equal(t, m.ID, st.Header.MemberId, "%s answers on its own URL", m.Name)
		assert.Equal(t, leader.ID, st.Leader, "%s agrees on the leader", m.Name)
		assert.Regexp(t, `^3\.`, st.Version)
	}

	var pids []int
	for _, m := range c.Members() {
		pids = append(pids, m.Pid())
	}
	require.NoError(t, c.Member(1).Stop(), "Close kills a paused member too")
	require.NoError(t, c.Close())
	require.NoError(t, c.Close(), "a second Close")
	for _, pid := range pids {
		assert.False(t, proctest.Alive(pid), "process %d gone", pid)
	}
	assert.NoDirExists(t, c.Dir)
	for _, m := range c.Members() {
		assert.False(t, m.Running())
		assert.Zero(t, m.Pid())
	}
	require.Error(t, c.Member(0).Restart(ctx), "a closed cluster starts nothing")
	assert.Zero(t, c.Member(0).Pid())
}

// TestKillLeaderRestart: the others elect a new leader and keep taking
// writes; the killed member restarts on its data directory as the same
// member and catches up; without a quorum, writes stop.
func TestKillLeaderRestart(t *testing.T) {
	ctx := ctxFor(t)
	c := etcdtest.Start(t, etcdproc.Options{})
	cli := etcdtest.Client(t, c)
	_, err := cli.Put(ctx, "k", "before")
	require.NoError(t, err)

	old, err := c.KillLeader(ctx)
	require.NoError(t, err)
	assert.False(t, old.Running())
	assert.Zero(t, old.Pid())
	select {
	case <-old.Exited():
	default:
		t.Fatal("Kill returns once the process exited")
	}
	leader, err := c.Leader(ctx)
	require.NoError(t, err)
	assert.NotEqual(t, old.Name, leader.Name, "a new leader")
	_, err = cli.Put(ctx, "k", "during")
	require.NoError(t, err, "two of three take writes")

	id := old.ID
	require.NoError(t, old.Restart(ctx))
	assert.True(t, old.Running())
	st, err := old.Status(ctx)
	require.NoError(t, err)
	assert.Equal(t, id, st.Header.MemberId, "the same member came back")
	assert.Equal(t, "during", get(t, old, "k", true), "its own state has the write it missed")

	// Two members down: no quorum, no write.
	a, b := c.Member((old.Index+1)%3), c.Member((old.Index+2)%3)
	a.Kill()
	b.Kill()
	wctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	_, err = old.Client().Put(wctx, "k", "lost")
	cancel()
	require.Error(t, err, "one member of three takes no write")
	require.NoError(t, a.Restart(ctx))
	_, err = old.Client().Put(ctx, "k", "after")
	require.NoError(t, err, "two of three again")
	require.NoError(t, b.Restart(ctx))
	require.NoError(t, c.WaitHealthy(ctx))
	assert.Equal(t, "after", get(t, b, "k", true))
}

// TestStopCont: a paused leader is replaced, answers nothing while paused,
// and rejoins as a follower when resumed.
func TestStopCont(t *testing.T) {
	ctx := ctxFor(t)
	c := etcdtest.Start(t, etcdproc.Options{})
	old, err := c.Leader(ctx)
	require.NoError(t, err)
	require.NoError(t, old.Stop())
	assert.False(t, old.Running())
	assert.NotZero(t, old.Pid(), "paused, not dead")

	leader, err := c.Leader(ctx)
	require.NoError(t, err)
	assert.NotEqual(t, old.Name, leader.Name)
	_, err = old.Status(ctx)
	require.ErrorIs(t, err, context.DeadlineExceeded, "a paused member answers nothing")
	_, err = leader.Client().Put(ctx, "k", "v")
	require.NoError(t, err)

	require.NoError(t, old.Cont())
	require.NoError(t, c.WaitHealthy(ctx))
	assert.Equal(t, "v", get(t, old, "k", false))
	now, err := c.Leader(ctx)
	require.NoError(t, err)
	assert.NotEqual(t, old.Name, now.Name, "the resumed member follows")
}

// TestStartFailsAtExit: a member that exits at start (etcd refuses an
// election timeout under five heartbeats) fails Start with its log, and
// nothing is left behind.
func TestStartFailsAtExit(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	_, err := etcdproc.Start(ctxFor(t), etcdproc.Options{
		HeartbeatInterval: 100 * time.Millisecond, ElectionTimeout: 200 * time.Millisecond,
		StartTimeout: time.Hour, // an exit is seen at once, not at the timeout
	})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "exited")
	assert.Contains(t, err.Error(), "election-timeout", "the log's tail says why")
	ents, _ := os.ReadDir(tmp)
	assert.Empty(t, ents, "the directory is removed")
}

const helperEnv = "LOCKLAB_ETCDPROC_HELPER"

// TestHelperCluster is not a test: TestMembersDieWithParent runs it in a
// process of its own, which starts a one-member cluster, prints its pid
// and directory, and waits to be killed.
func TestHelperCluster(t *testing.T) {
	proctest.Helper(t, helperEnv, func() (int, string, error) {
		c, err := etcdproc.Start(context.Background(), etcdproc.Options{Members: 1})
		if err != nil {
			return 0, "", err
		}
		return c.Member(0).Pid(), c.Dir, nil
	})
}

// TestMembersDieWithParent: a process killed before it could close its
// cluster takes the members with it, and the next Start's sweep removes
// its directory.
func TestMembersDieWithParent(t *testing.T) {
	proctest.DiesWithParent(t, "TestHelperCluster", helperEnv, etcdproc.RemoveStale)
}

// BenchmarkStart: the start of a three-member cluster, until every
// member serves a linearizable read, and its Close.
func BenchmarkStart(b *testing.B) {
	ctx := context.Background()
	for b.Loop() {
		c, err := etcdproc.Start(ctx, etcdproc.Options{})
		if err != nil {
			b.Fatal(err)
		}
		c.Close()
	}
}

// BenchmarkFailover: from killing the leader to a new leader, with the
// restart of the killed member (untimed) between rounds.
func BenchmarkFailover(b *testing.B) {
	ctx := context.Background()
	c := etcdtest.Start(b, etcdproc.Options{})
	for b.Loop() {
		old, err := c.KillLeader(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := c.Leader(ctx); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		if err := old.Restart(ctx); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}

// TestOneMember: a cluster of one member serves alone, and says so in
// the singular.
func TestOneMember(t *testing.T) {
	c, err := etcdproc.Start(ctxFor(t), etcdproc.Options{Members: 1})
	require.NoError(t, err)
	defer c.Close()
	assert.Contains(t, c.Describe(), "1 member process http://127.0.0.1:")
	leader, err := c.Leader(ctxFor(t))
	require.NoError(t, err)
	assert.Same(t, c.Member(0), leader)
}
