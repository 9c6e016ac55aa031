package etcdproc_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/locklab/locklab/internal/tooling/dockerbox"
	"github.com/locklab/locklab/internal/tooling/dockerbox/boxtest"
	"github.com/locklab/locklab/internal/tooling/tcpproxy"
	"github.com/locklab/locklab/stores/etcd/etcdproc"
	"github.com/locklab/locklab/stores/etcd/etcdproc/etcdtest"
)

// requireDocker skips the test when no Docker engine answers.
func requireDocker(t *testing.T) {
	t.Helper()
	if _, err := dockerbox.Connect(context.Background()); err != nil {
		t.Skipf("docker backend: %v", err)
	}
}

// noLeftovers fails t when a container or network labelled label is left.
func noLeftovers(t *testing.T, label string) {
	t.Helper()
	cs, ns, err := dockerbox.Owned(context.Background(), os.Getpid(), label)
	require.NoError(t, err)
	assert.Empty(t, cs, "containers left")
	assert.Empty(t, ns, "networks left")
}

// TestDocker: three members in containers on a network of their own, named
// and labelled after the cluster; the faults of the process backend (a
// leader killed and restarted on its data directory as the same member,
// SIGSTOP and SIGCONT, a partition through a proxy) and a Close that
// leaves no container or network.
func TestDocker(t *testing.T) {
	if testing.Short() {
		t.Skip("containers of the etcd or PostgreSQL images: the full run's (CI, make test-long)")
	}
	requireDocker(t)
	ctx := ctxFor(t)
	began := time.Now()
	c := etcdtest.Start(t, etcdproc.Options{Backend: etcdproc.BackendDocker, Label: t.Name()})
	t.Logf("etcd cluster ready in %v: %s", time.Since(began).Round(time.Millisecond), c.Describe())
	assert.Equal(t, etcdproc.BackendDocker, c.Backend())
	cs, ns, err := dockerbox.Owned(ctx, os.Getpid(), t.Name())
	require.NoError(t, err)
	require.Len(t, ns, 1)
	assert.Regexp(t, `^locklab-\d+-[0-9a-f]{8}-etcd-TestDocker$`, ns[0])
	require.Len(t, cs, 3)
	for _, m := range c.Members() {
		assert.Contains(t, strings.Join(cs, " "), "/"+ns[0]+"-"+m.Name)
		assert.True(t, strings.HasSuffix(m.ClientURL, ":2379"), m.ClientURL)
		assert.NotEqual(t, "127.0.0.1", m.ClientURL)
		assert.NotZero(t, m.ID)
		assert.True(t, m.Running())
		assert.NotZero(t, m.Pid())
	}

	cli := etcdtest.Client(t, c)
	_, err = cli.Put(ctx, "k", "before")
	require.NoError(t, err)
	for _, m := range c.Members() {
		assert.Equal(t, "before", get(t, m, "k", false), "%s serves the write", m.Name)
	}

	// kill -9 of the leader: a new one; the old one comes back as itself.
	began = time.Now()
	old, err := c.KillLeader(ctx)
	require.NoError(t, err)
	assert.False(t, old.Running())
	assert.Zero(t, old.Pid())
	leader, err := c.Leader(ctx)
	require.NoError(t, err)
	assert.NotEqual(t, old.Name, leader.Name, "a new leader")
	t.Logf("new leader %s in %v", leader.Name, time.Since(began).Round(time.Millisecond))
	_, err = cli.Put(ctx, "k", "during")
	require.NoError(t, err, "two of three take writes")
	id := old.ID
	began = time.Now()
	require.NoError(t, old.Restart(ctx))
	t.Logf("member restarted in %v", time.Since(began).Round(time.Millisecond))
	st, err := old.Status(ctx)
	require.NoError(t, err)
	assert.Equal(t, id, st.Header.MemberId, "the same member came back")
	assert.Equal(t, "during", get(t, old, "k", true), "with its data directory, and caught up")

	// SIGSTOP of the leader: replaced, silent, a follower once resumed.
	old, err = c.Leader(ctx)
	require.NoError(t, err)
	require.NoError(t, old.Stop())
	assert.False(t, old.Running())
	assert.NotZero(t, old.Pid(), "paused, not dead")
	leader, err = c.Leader(ctx)
	require.NoError(t, err)
	assert.NotEqual(t, old.Name, leader.Name)
	_, err = old.Status(ctx)
	require.ErrorIs(t, err, context.DeadlineExceeded, "a paused member answers nothing")
	require.NoError(t, old.Cont())
	require.NoError(t, c.WaitHealthy(ctx))

	// A partition through a proxy in front of a member's address: its
	// clients hear nothing, its peers still reach it.
	m := c.Member(0)
	p, err := tcpproxy.New(strings.TrimPrefix(m.ClientURL, "http://"))
	require.NoError(t, err)
	defer p.Close()
	pc, err := clientv3.New(etcdproc.ClientConfig("http://" + p.Addr()))
	require.NoError(t, err)
	defer pc.Close()
	_, err = pc.Put(ctx, "p", "1")
	require.NoError(t, err)
	p.Cut()
	wctx, cancel := context.WithTimeout(ctx, time.Second)
	_, err = pc.Get(wctx, "p")
	cancel()
	require.Error(t, err, "cut off")
	_, err = cli.Put(ctx, "p", "2")
	require.NoError(t, err)
	assert.Equal(t, "2", get(t, m, "p", false), "the member itself still follows its peers")
	p.Heal()
	resp, err := pc.Get(ctx, "p")
	require.NoError(t, err, "healed")
	assert.Equal(t, "2", string(resp.Kvs[0].Value))

	require.NoError(t, c.Member(1).Stop(), "Close removes a paused member too")
	began = time.Now()
	require.NoError(t, c.Close())
	t.Logf("closed in %v", time.Since(began).Round(time.Millisecond))
	require.NoError(t, c.Close(), "a second Close")
	noLeftovers(t, t.Name())
}

const dockerHelperEnv = "LOCKLAB_ETCDPROC_DOCKER_HELPER"

// TestHelperDockerCluster is not a test: TestDockerInterrupt runs it in a
// process of its own, which starts a docker cluster, says so, and waits
// for a signal.
func TestHelperDockerCluster(t *testing.T) {
	boxtest.Helper(t, dockerHelperEnv, func() error {
		_, err := etcdproc.Start(context.Background(), etcdproc.Options{Backend: etcdproc.BackendDocker})
		return err
	})
}

// TestDockerInterrupt: SIGINT to a process with a docker cluster open
// removes its containers and network before the process ends.
func TestDockerInterrupt(t *testing.T) {
	if testing.Short() {
		t.Skip("containers of the etcd or PostgreSQL images: the full run's (CI, make test-long)")
	}
	requireDocker(t)
	boxtest.Interrupt(t, "TestHelperDockerCluster", dockerHelperEnv, 3, nil)
}

// BenchmarkStartDocker: the start of a three-member cluster in containers
// (its image already built), until every member serves a linearizable
// read, and its Close.
func BenchmarkStartDocker(b *testing.B) {
	if _, err := dockerbox.Connect(context.Background()); err != nil {
		b.Skipf("docker backend: %v", err)
	}
	ctx := context.Background()
	for b.Loop() {
		c, err := etcdproc.Start(ctx, etcdproc.Options{Backend: etcdproc.BackendDocker})
		if err != nil {
			b.Fatal(err)
		}
		c.Close()
	}
}
