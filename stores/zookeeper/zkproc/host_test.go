package zkproc_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/locklab/locklab/internal/tooling/serverproc"
	"github.com/locklab/locklab/internal/tooling/serverproc/proctest"
	"github.com/locklab/locklab/stores/zookeeper/zkproc"
	"github.com/locklab/locklab/stores/zookeeper/zkproc/zktest"
)

// TestHostClassesCurrent: the classes zkproc embeds were compiled from
// host/ZkHost.java as it is (go generate writes the source's SHA-256
// beside them), and each of them is there.
func TestHostClassesCurrent(t *testing.T) {
	src, err := os.ReadFile("host/ZkHost.java")
	require.NoError(t, err)
	sum, err := os.ReadFile("host/ZkHost.sum")
	require.NoError(t, err)
	h := sha256.Sum256(src)
	require.Equal(t, hex.EncodeToString(h[:])+"  host/ZkHost.java", strings.TrimSpace(string(sum)),
		"host/ZkHost.java changed since its classes were compiled: run go generate ./stores/zookeeper/zkproc")
	for _, c := range []string{"ZkHost.class", "ZkHost$Peer.class"} {
		assert.FileExists(t, filepath.Join("host", c))
	}
}

// jvmsOf lists the JVMs whose command line names dir: an ensemble's.
func jvmsOf(t *testing.T, dir string) []int {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	require.NoError(t, err)
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && strings.Contains(string(b), dir) && strings.Contains(string(b), "java") {
			out = append(out, pid)
		}
	}
	return out
}

// TestHosted: a hosted ensemble runs its three servers in one JVM, which
// a kill, a restart on an emptied directory and a reset leave running; a
// server cannot be paused alone; Close leaves no process and no directory.
func TestHosted(t *testing.T) {
	t.Parallel()
	ctx := ctxFor(t)
	e, err := zkproc.Start(ctx, zkproc.Options{Hosted: true})
	require.NoError(t, err)
	defer e.Close()
	assert.Contains(t, e.Describe(), "3 servers in one JVM 127.0.0.1:")
	jvms := jvmsOf(t, e.Dir)
	require.Len(t, jvms, 1, "one JVM")
	ms := modes(t, e)
	assert.Equal(t, 1, count(ms, "leader"), "%v", ms)
	assert.Equal(t, 2, count(ms, "follower"), "%v", ms)

	leader, err := e.Leader(ctx)
	require.NoError(t, err)
	require.ErrorIs(t, leader.Stop(), zkproc.ErrHosted)
	assert.True(t, leader.Running(), "a refused pause leaves it running")

	old, err := e.KillLeader(ctx)
	require.NoError(t, err)
	assert.False(t, old.Running())
	_, err = zkproc.FourLetter(ctx, old.Addr(), "ruok")
	require.Error(t, err, "a killed server's port is closed")
	now, err := e.Leader(ctx)
	require.NoError(t, err)
	assert.NotEqual(t, old.Name(), now.Name())
	require.NoError(t, old.RestartEmpty(ctx))
	assert.Equal(t, "follower", modes(t, e)[old.Name()])
	require.NoError(t, e.Reset(ctx))
	ms = modes(t, e)
	assert.Equal(t, 1, count(ms, "leader"), "%v", ms)
	assert.Equal(t, 2, count(ms, "follower"), "%v", ms)
	assert.Equal(t, jvms, jvmsOf(t, e.Dir), "the same JVM throughout")
	assert.Contains(t, old.LogTail(2000), "myid="+strconv.Itoa(old.ID), "the JVM's log has the peer's lines")

	require.NoError(t, e.Close())
	assert.False(t, proctest.Alive(jvms[0]), "the JVM is gone")
	assert.NoDirExists(t, e.Dir)
	require.Error(t, old.Restart(ctxFor(t)), "a closed ensemble starts nothing")
}

// TestHostDies: when the JVM of a hosted ensemble dies, its servers are
// not running, and the wait for a healthy ensemble fails at once with its
// log rather than at its deadline.
func TestHostDies(t *testing.T) {
	t.Parallel()
	e := zktest.Start(t, zkproc.Options{Hosted: true})
	jvms := jvmsOf(t, e.Dir)
	require.Len(t, jvms, 1)
	require.NoError(t, syscall.Kill(jvms[0], syscall.SIGKILL))
	s := e.Server(0)
	err := s.Restart(ctxFor(t))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "JVM exited")
	assert.Error(t, e.WaitHealthy(ctxFor(t)))
}

// TestHostedRefused: a hosted ensemble is the process backend's, and has
// more than one server.
func TestHostedRefused(t *testing.T) {
	_, err := zkproc.Start(ctxFor(t), zkproc.Options{Hosted: true, Backend: zkproc.BackendDocker})
	require.ErrorContains(t, err, "process backend only")
	_, err = zkproc.Start(ctxFor(t), zkproc.Options{Hosted: true, Servers: 1})
	require.ErrorContains(t, err, "more than one server")
}

// TestHostedPortTaken: a peer whose client port another process holds
// fails its start as a port in use (serverproc.ErrPortTaken), which a
// restart tries again.
func TestHostedPortTaken(t *testing.T) {
	t.Parallel()
	ctx := ctxFor(t)
	e := zktest.Start(t, zkproc.Options{Hosted: true})
	leader, err := e.Leader(ctx)
	require.NoError(t, err)
	s := e.Server((leader.Index + 1) % 3)
	s.Kill()
	l, err := net.Listen("tcp", s.Addr())
	require.NoError(t, err)
	defer l.Close()
	wctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	require.ErrorIs(t, s.Restart(wctx), serverproc.ErrPortTaken)
	l.Close()
	require.NoError(t, s.Restart(ctx), "the port free again")
	assert.Equal(t, "follower", modes(t, e)[s.Name()])
}
