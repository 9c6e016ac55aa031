package zkproc_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/locklab/locklab/internal/tooling/dockerbox"
	"github.com/locklab/locklab/internal/tooling/dockerbox/boxtest"
	"github.com/locklab/locklab/internal/tooling/tcpproxy"
	"github.com/locklab/locklab/stores/zookeeper/zkproc"
)

// requireDocker skips the test when no Docker engine answers, and in the
// quick run.
func requireDocker(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("containers of the ZooKeeper image: the full run's (CI, make test-long)")
	}
	if _, err := dockerbox.Connect(context.Background()); err != nil {
		t.Skipf("docker backend: %v", err)
	}
}

// startDocker starts a docker ensemble, closed when the test ends; the
// test skips, saying why, where no image can be built from this host.
func startDocker(t *testing.T, label string) *zkproc.Ensemble {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	e, err := zkproc.Start(ctx, zkproc.Options{Backend: zkproc.BackendDocker, Label: label})
	if errors.Is(err, zkproc.ErrNoImage) {
		t.Skipf("docker backend: %v", err)
	}
	require.NoError(t, err)
	t.Cleanup(func() { e.Close() })
	return e
}

// TestDocker: three servers in containers on a network of their own,
// named and labelled after the ensemble; the faults of the process backend
// (a leader killed, a new one elected, the old one restarted on its data
// directory as a follower; SIGSTOP and SIGCONT; a partition through a
// proxy) and a Close that leaves no container or network.
func TestDocker(t *testing.T) {
	requireDocker(t)
	ctx := ctxFor(t)
	began := time.Now()
	e := startDocker(t, t.Name())
	t.Logf("zookeeper ensemble ready in %v: %s", time.Since(began).Round(time.Millisecond), e.Describe())
	assert.Equal(t, zkproc.BackendDocker, e.Backend())
	cs, ns, err := dockerbox.Owned(ctx, os.Getpid(), t.Name())
	require.NoError(t, err)
	require.Len(t, ns, 1)
	assert.Regexp(t, `^locklab-\d+-[0-9a-f]{8}-zookeeper-TestDocker$`, ns[0])
	require.Len(t, cs, 3)
	ms := modes(t, e)
	assert.Equal(t, 1, count(ms, "leader"), "%v", ms)
	assert.Equal(t, 2, count(ms, "follower"), "%v", ms)
	for _, s := range e.Servers() {
		assert.Contains(t, strings.Join(cs, " "), "/"+ns[0]+"-"+s.Name())
		assert.True(t, strings.HasSuffix(s.Addr(), ":2181"), s.Addr())
		assert.False(t, strings.HasPrefix(s.Addr(), "127."), s.Addr())
		assert.True(t, s.Running())
		assert.NotZero(t, s.Pid())
	}

	// kill -9 of the leader: a new one; the old one comes back, following.
	began = time.Now()
	old, err := e.KillLeader(ctx)
	require.NoError(t, err)
	assert.False(t, old.Running())
	assert.Zero(t, old.Pid())
	leader, err := e.Leader(ctx)
	require.NoError(t, err)
	assert.NotEqual(t, old.Name(), leader.Name(), "a new leader")
	t.Logf("new leader %s in %v", leader.Name(), time.Since(began).Round(time.Millisecond))
	began = time.Now()
	require.NoError(t, old.Restart(ctx))
	t.Logf("server restarted in %v", time.Since(began).Round(time.Millisecond))
	st, err := old.Status(ctx)
	require.NoError(t, err)
	assert.Equal(t, "follower", st.Mode)
	assert.Greater(t, st.Epoch(), uint32(1), "synced with the new leader's epoch")
	assert.Contains(t, old.LogTail(400), "Reading snapshot", "it started on its data directory")

	// SIGSTOP of the leader: replaced, silent, a follower once resumed.
	old, err = e.Leader(ctx)
	require.NoError(t, err)
	require.NoError(t, old.Stop())
	assert.False(t, old.Running())
	assert.NotZero(t, old.Pid(), "paused, not dead")
	leader, err = e.Leader(ctx)
	require.NoError(t, err)
	assert.NotEqual(t, old.Name(), leader.Name())
	_, err = old.Mode(ctx)
	require.ErrorIs(t, err, context.DeadlineExceeded, "a paused server answers nothing")
	require.NoError(t, old.Cont())
	require.NoError(t, e.WaitHealthy(ctx))

	// A partition through a proxy in front of a server's address: its
	// clients hear nothing; the server itself still serves.
	s := e.Server(0)
	p, err := tcpproxy.New(s.Addr())
	require.NoError(t, err)
	defer p.Close()
	_, err = zkproc.FourLetter(ctx, p.Addr(), "srvr")
	require.NoError(t, err)
	p.Cut()
	_, err = zkproc.FourLetter(ctx, p.Addr(), "srvr")
	require.Error(t, err, "cut off")
	_, err = s.Mode(ctx)
	require.NoError(t, err, "the server serves")
	p.Heal()
	_, err = zkproc.FourLetter(ctx, p.Addr(), "srvr")
	require.NoError(t, err, "healed")

	require.NoError(t, e.Server(1).Stop(), "Close removes a paused server too")
	began = time.Now()
	require.NoError(t, e.Close())
	t.Logf("closed in %v", time.Since(began).Round(time.Millisecond))
	require.NoError(t, e.Close(), "a second Close")
	cs, ns, err = dockerbox.Owned(context.Background(), os.Getpid(), t.Name())
	require.NoError(t, err)
	assert.Empty(t, cs, "containers left")
	assert.Empty(t, ns, "networks left")
}

const dockerHelperEnv = "LOCKLAB_ZKPROC_DOCKER_HELPER"

// TestHelperDockerEnsemble is not a test: TestDockerInterrupt runs it in
// a process of its own, which starts a docker ensemble, says so, and
// waits for a signal.
func TestHelperDockerEnsemble(t *testing.T) {
	boxtest.Helper(t, dockerHelperEnv, func() error {
		_, err := zkproc.Start(context.Background(), zkproc.Options{Backend: zkproc.BackendDocker})
		return err
	})
}

// TestDockerInterrupt: SIGINT to a process with a docker ensemble open
// removes its containers and network before the process ends.
func TestDockerInterrupt(t *testing.T) {
	requireDocker(t)
	boxtest.Interrupt(t, "TestHelperDockerEnsemble", dockerHelperEnv, 3,
		func(msg string) bool { return strings.Contains(msg, zkproc.ErrNoImage.Error()) })
}

// BenchmarkStartDocker: the start of a three-server ensemble in
// containers (its image already built), until a quorum serves with one
// leader, and its Close.
func BenchmarkStartDocker(b *testing.B) {
	if _, err := dockerbox.Connect(context.Background()); err != nil {
		b.Skipf("docker backend: %v", err)
	}
	ctx := context.Background()
	for b.Loop() {
		e, err := zkproc.Start(ctx, zkproc.Options{Backend: zkproc.BackendDocker})
		if err != nil {
			b.Fatal(err)
		}
		e.Close()
	}
}
