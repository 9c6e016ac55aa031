package zkproc_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/locklab/locklab/internal/tooling/serverproc/proctest"
	"github.com/locklab/locklab/stores/zookeeper/zkproc"
	"github.com/locklab/locklab/stores/zookeeper/zkproc/zktest"
)

// TestMain starts the shared ensemble beside the tests that start their
// own, except in the helper processes some tests run (the ports' one is
// ports_test.go's).
func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) == "" && os.Getenv(dockerHelperEnv) == "" && os.Getenv("LOCKLAB_ZKPROC_PORTS_HELPER") == "" {
		zktest.Prestart()
	}
	zktest.Main(m)
}

// ctxFor is a context for one step of a test: long enough for a start or
// an election on a loaded machine, short enough to fail a test that hangs.
func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// modes are the servers' modes, by name.
func modes(t *testing.T, e *zkproc.Ensemble) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, s := range e.Servers() {
		if !s.Running() {
			continue
		}
		m, err := s.Mode(ctxFor(t))
		require.NoError(t, err, "%s's mode", s.Name())
		out[s.Name()] = m
	}
	return out
}

// count counts the servers in mode.
func count(ms map[string]string, mode string) int {
	n := 0
	for _, m := range ms {
		if m == mode {
			n++
		}
	}
	return n
}

func TestInstalled(t *testing.T) {
	require.NoError(t, zkproc.Installed())
	jar, err := zkproc.Binary()
	require.NoError(t, err)
	assert.FileExists(t, jar)
	assert.Regexp(t, `^3\.\d+\.\d+`, zkproc.Version())

	t.Setenv("LOCKLAB_ZOOKEEPER", filepath.Join(t.TempDir(), "no-zookeeper.jar"))
	assert.Equal(t, "unknown", zkproc.Version())
	for _, err := range []error{zkproc.Installed(), func() error { _, err := zkproc.Start(ctxFor(t), zkproc.Options{}); return err }()} {
		require.Error(t, err)
		assert.Contains(t, err.Error(), "LOCKLAB_ZOOKEEPER")
		assert.Contains(t, err.Error(), "apt-get install -y zookeeper", "the install hint")
	}
	t.Setenv("LOCKLAB_ZOOKEEPER", "")
	t.Setenv("LOCKLAB_JAVA", filepath.Join(t.TempDir(), "no-java"))
	err = zkproc.Installed()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "apt-get install -y zookeeper")
}

// TestShared: the shared ensemble of three servers has one leader and two
// followers, each answering on its own loopback address.
func TestShared(t *testing.T) {
	t.Parallel()
	e := zktest.Shared(t)
	assert.Equal(t, zkproc.BackendProcess, e.Backend())
	assert.Contains(t, e.Describe(), "3 server processes 127.0.0.1:")
	addrs := e.Addrs()
	require.Len(t, addrs, zkproc.DefaultServers)
	ms := modes(t, e)
	assert.Equal(t, 1, count(ms, "leader"), "%v", ms)
	assert.Equal(t, 2, count(ms, "follower"), "%v", ms)
	leader, err := e.Leader(ctxFor(t))
	require.NoError(t, err)
	assert.Equal(t, "leader", ms[leader.Name()])
	for i, s := range e.Servers() {
		assert.Same(t, s, e.Server(i))
		assert.Equal(t, i, s.Index)
		assert.Equal(t, i+1, s.ID)
		assert.Equal(t, "zk"+strconv.Itoa(i+1), s.Name())
		assert.Equal(t, addrs[i], s.Addr())
		assert.True(t, strings.HasPrefix(s.Addr(), "127.0.0.1:"), s.Addr())
		assert.True(t, s.Running())
		assert.NotZero(t, s.Pid())
		ok, err := zkproc.FourLetter(ctxFor(t), s.Addr(), "ruok")
		require.NoError(t, err)
		assert.Equal(t, "imok", ok)
		id, err := os.ReadFile(filepath.Join(s.DataDir, "myid"))
		require.NoError(t, err)
		assert.Equal(t, strconv.Itoa(s.ID), strings.TrimSpace(string(id)))
		st, err := s.Status(ctxFor(t))
		require.NoError(t, err)
		assert.Regexp(t, `^3\.`, st.Version)
		assert.Contains(t, s.LogTail(1000), "QuorumPeerMain", "the log has the server's lines")
	}
	require.NoError(t, e.WaitHealthy(ctxFor(t)))
}

// TestStartClose: a server on its own is standalone; Close leaves no
// process, paused or not, and no directory.
func TestStartClose(t *testing.T) {
	t.Parallel()
	e, err := zkproc.Start(ctxFor(t), zkproc.Options{Servers: 1})
	require.NoError(t, err)
	defer e.Close()
	s := e.Server(0)
	mode, err := s.Mode(ctxFor(t))
	require.NoError(t, err)
	assert.Equal(t, "standalone", mode)
	assert.Contains(t, e.Describe(), "1 server process, standalone, 127.0.0.1:")
	leader, err := e.Leader(ctxFor(t))
	require.NoError(t, err)
	assert.Same(t, s, leader)
	assert.DirExists(t, e.Dir)

	pid := s.Pid()
	require.True(t, proctest.Alive(pid))
	require.NoError(t, s.Stop(), "Close kills a paused server too")
	require.NoError(t, e.Close())
	require.NoError(t, e.Close(), "a second Close")
	assert.False(t, proctest.Alive(pid), "process %d gone", pid)
	assert.NoDirExists(t, e.Dir)
	assert.False(t, s.Running())
	assert.Zero(t, s.Pid())
	require.Error(t, s.Restart(ctxFor(t)), "a closed ensemble starts nothing")
	assert.Zero(t, s.Pid())
}

// files lists the files of a server's data directory (myid and those of
// version-2) with their inode numbers: a file made anew gets a new one.
func files(t *testing.T, dataDir string) map[string]uint64 {
	t.Helper()
	out := map[string]uint64{}
	for _, dir := range []string{dataDir, filepath.Join(dataDir, "version-2")} {
		ents, err := os.ReadDir(dir)
		require.NoError(t, err)
		for _, e := range ents {
			info, err := e.Info()
			require.NoError(t, err)
			if !e.IsDir() {
				out[filepath.Join(filepath.Base(dir), e.Name())] = info.Sys().(*syscall.Stat_t).Ino
			}
		}
	}
	return out
}

// kept checks that the files of before are still there, the same files:
// the snapshot taken at the first start among them. The epochs are files
// ZooKeeper writes anew (a new file renamed over the old) whenever it
// joins a leader.
func kept(t *testing.T, before, after map[string]uint64) {
	t.Helper()
	require.Contains(t, before, "version-2/snapshot.0")
	require.Contains(t, before, "data/myid")
	for name, ino := range before {
		if strings.HasSuffix(name, "Epoch") {
			assert.Contains(t, after, name)
			continue
		}
		assert.Equal(t, ino, after[name], "%s kept", name)
	}
}

// TestKillRestart: a killed follower leaves a healthy ensemble with the
// same leader; a killed leader is replaced; each restarts on its data
// directory (its files kept, not made anew) as a follower; one server of
// three does not serve. So on a hosted ensemble, whose servers are killed
// and restarted inside one JVM.
func TestKillRestart(t *testing.T) {
	t.Parallel()
	for _, hosted := range []bool{false, true} {
		t.Run(map[bool]string{false: "processes", true: "hosted"}[hosted], func(t *testing.T) {
			t.Parallel()
			killRestart(t, hosted)
		})
	}
}

// killRestart is TestKillRestart on servers that are processes of their
// own, or hosted: peers of one JVM.
func killRestart(t *testing.T, hosted bool) {
	ctx := ctxFor(t)
	e := zktest.Start(t, zkproc.Options{Hosted: hosted})
	leader, err := e.Leader(ctx)
	require.NoError(t, err)
	f := e.Server((leader.Index + 1) % 3)
	f.Kill()
	assert.False(t, f.Running())
	assert.Zero(t, f.Pid())
	if !hosted {
		select {
		case <-f.Exited():
		default:
			t.Fatal("Kill returns once the process exited")
		}
	}
	require.NoError(t, e.WaitHealthy(ctx), "two of three serve")
	now, err := e.Leader(ctx)
	require.NoError(t, err)
	assert.Same(t, leader, now, "a follower's death elects no one")
	before := files(t, f.DataDir)
	require.NoError(t, f.Restart(ctx))
	assert.Equal(t, "follower", modes(t, e)[f.Name()])
	kept(t, before, files(t, f.DataDir))

	st, err := leader.Status(ctx)
	require.NoError(t, err)
	began := time.Now()
	old, err := e.KillLeader(ctx)
	require.NoError(t, err)
	assert.Same(t, leader, old)
	leader, err = e.Leader(ctx)
	require.NoError(t, err)
	t.Logf("new leader %s in %v", leader.Name(), time.Since(began).Round(time.Millisecond))
	assert.NotEqual(t, old.Name(), leader.Name(), "a new leader")
	require.NoError(t, e.WaitHealthy(ctx))
	nst, err := leader.Status(ctx)
	require.NoError(t, err)
	assert.Greater(t, nst.Epoch(), st.Epoch(), "a new epoch")

	before = files(t, old.DataDir)
	require.NoError(t, old.Restart(ctx))
	ost, err := old.Status(ctx)
	require.NoError(t, err)
	assert.Equal(t, "follower", ost.Mode, "the old leader follows")
	assert.Equal(t, nst.Epoch(), ost.Epoch(), "in the new leader's epoch")
	kept(t, before, files(t, old.DataDir))

	// Two servers of three down: the last one stops serving.
	a, b := e.Server((old.Index+1)%3), e.Server((old.Index+2)%3)
	a.Kill()
	b.Kill()
	require.Eventually(t, func() bool {
		_, err := old.Mode(ctx)
		return err == zkproc.ErrNotServing
	}, 10*time.Second, 20*time.Millisecond, "one of three does not serve")
	require.NoError(t, a.Restart(ctx), "two of three again")
	require.NoError(t, b.Restart(ctx))
	ms := modes(t, e)
	assert.Equal(t, 1, count(ms, "leader"), "%v", ms)
	assert.Equal(t, 2, count(ms, "follower"), "%v", ms)
}

// TestStopCont: a paused leader is replaced and answers nothing while
// paused; resumed, it follows.
func TestStopCont(t *testing.T) {
	t.Parallel()
	ctx := ctxFor(t)
	e := zktest.Start(t, zkproc.Options{})
	old, err := e.Leader(ctx)
	require.NoError(t, err)
	began := time.Now()
	require.NoError(t, old.Stop())
	assert.False(t, old.Running())
	assert.NotZero(t, old.Pid(), "paused, not dead")
	leader, err := e.Leader(ctx)
	require.NoError(t, err)
	assert.NotEqual(t, old.Name(), leader.Name())
	t.Logf("new leader %s in %v", leader.Name(), time.Since(began).Round(time.Millisecond))
	_, err = old.Mode(ctx)
	require.ErrorIs(t, err, context.DeadlineExceeded, "a paused server answers nothing")

	began = time.Now()
	require.NoError(t, old.Cont())
	assert.True(t, old.Running())
	require.NoError(t, e.WaitHealthy(ctx))
	require.Eventually(t, func() bool {
		m, err := old.Mode(ctx)
		return err == nil && m == "follower"
	}, 10*time.Second, 20*time.Millisecond, "the resumed server follows")
	t.Logf("the resumed server follows after %v", time.Since(began).Round(time.Millisecond))
	now, err := e.Leader(ctx)
	require.NoError(t, err)
	assert.Same(t, leader, now)
}

// TestStartFailsAtExit: a server that exits at start (a tickTime that is
// no number) fails Start with its log, and nothing is left behind. The
// start runs in a helper process, whose directories are its own.
func TestStartFailsAtExit(t *testing.T) {
	t.Parallel()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperEnsemble$")
	cmd.Env = append(os.Environ(), helperEnv+"=fail")
	out, err := cmd.Output()
	require.NoError(t, err, "%s", out)
	var msg string
	for _, l := range strings.Split(string(out), "\n") {
		if q, ok := strings.CutPrefix(l, "failed "); ok {
			msg, err = strconv.Unquote(q)
			require.NoError(t, err)
		}
	}
	require.NotEmpty(t, msg, "the helper's start failed: %s", out)
	assert.Contains(t, msg, "exited")
	assert.Contains(t, msg, "soon", "the log's tail says why")
	for _, base := range []string{"/dev/shm", os.TempDir()} {
		left, _ := filepath.Glob(filepath.Join(base, "locklab-zk-"+strconv.Itoa(cmd.Process.Pid)+"-*"))
		assert.Empty(t, left, "the directory is removed")
	}
}

const helperEnv = "LOCKLAB_ZKPROC_HELPER"

// TestHelperEnsemble is not a test: TestServersDieWithParent and
// TestInterrupt run it in a process of its own, which starts a
// one-server ensemble, prints its pid and directory, and waits; for
// TestStartFailsAtExit it starts one that fails, and prints the error.
func TestHelperEnsemble(t *testing.T) {
	if os.Getenv(helperEnv) == "fail" {
		_, err := zkproc.Start(context.Background(), zkproc.Options{Servers: 1, Config: []string{"tickTime=soon"},
			StartTimeout: time.Hour}) // an exit is seen at once, not at the timeout
		fmt.Printf("failed %q\n", fmt.Sprint(err))
		return
	}
	proctest.Helper(t, helperEnv, func() (int, string, error) {
		e, err := zkproc.Start(context.Background(), zkproc.Options{Servers: 1})
		if err != nil {
			return 0, "", err
		}
		return e.Server(0).Pid(), e.Dir, nil
	})
}

// TestServersDieWithParent: a process killed before it could close its
// ensemble takes the servers with it, and RemoveStale removes its
// directory.
func TestServersDieWithParent(t *testing.T) {
	t.Parallel()
	proctest.DiesWithParent(t, "TestHelperEnsemble", helperEnv, zkproc.RemoveStale)
}

// TestInterrupt: SIGINT to a process with an ensemble open kills its
// servers and removes its directory before the process ends.
func TestInterrupt(t *testing.T) {
	t.Parallel()
	cmd, pid, dir := proctest.Start(t, "TestHelperEnsemble", helperEnv)
	require.NoError(t, cmd.Process.Signal(syscall.SIGINT))
	err := cmd.Wait()
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee)
	assert.Equal(t, syscall.SIGINT, ee.Sys().(syscall.WaitStatus).Signal(), "the signal ends the process once it cleaned up")
	assert.False(t, proctest.Alive(pid), "the server is gone")
	assert.NoDirExists(t, dir)
}

// BenchmarkStart: the start of a three-server ensemble, until a quorum
// serves with one leader, and its Close.
func BenchmarkStart(b *testing.B) {
	ctx := context.Background()
	for b.Loop() {
		e, err := zkproc.Start(ctx, zkproc.Options{})
		if err != nil {
			b.Fatal(err)
		}
		e.Close()
	}
}

// BenchmarkFailover: from killing the leader to a new leader, with the
// restart of the killed server (untimed) between rounds.
func BenchmarkFailover(b *testing.B) {
	ctx := context.Background()
	e := zktest.Start(b, zkproc.Options{})
	for b.Loop() {
		old, err := e.KillLeader(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := e.Leader(ctx); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		if err := old.Restart(ctx); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}
