package redisproc

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/locklab/locklab/internal/tooling/procid"
	"github.com/locklab/locklab/internal/tooling/serverproc/proctest"
)

// A directory left by a run that died is removed by the next one; those of
// live processes, and those that name no owner, stay.
func TestRemoveStaleKeepsLiveOwners(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp) // where RemoveStale looks besides procid.ShmDir

	dead := exec.Command("true")
	require.NoError(t, dead.Start())
	deadPid := dead.Process.Pid
	deadStart := procid.Start(deadPid)
	require.NoError(t, dead.Wait())

	live := exec.Command("sleep", "60")
	require.NoError(t, live.Start())
	t.Cleanup(func() { live.Process.Kill(); live.Wait() })

	mk := func(name string) string {
		d := filepath.Join(tmp, name)
		require.NoError(t, os.Mkdir(d, 0o700))
		return d
	}
	gone := mk(dirPrefix + strconv.Itoa(deadPid) + "-" + deadStart + "-123")
	mine := mk(dirPrefix + procid.Tag() + "456")
	other := mk(dirPrefix + strconv.Itoa(live.Process.Pid) + "-" + procid.Start(live.Process.Pid) + "-789")
	// The same live pid with another start time is a reused pid: its
	// owner is gone.
	reused := mk(dirPrefix + strconv.Itoa(live.Process.Pid) + "-1-321")
	unnamed := mk(dirPrefix + "987654")

	var removed []string // those in tmp: procid.ShmDir may hold others'
	for _, d := range RemoveStale() {
		if filepath.Dir(d) == tmp {
			removed = append(removed, d)
		}
	}
	assert.ElementsMatch(t, []string{gone, reused}, removed)
	for _, d := range []string{mine, other, unnamed} {
		assert.DirExists(t, d)
	}
	assert.NoDirExists(t, gone)
	assert.NoDirExists(t, reused)

	// Servers name their directory after their owner.
	s, err := Start(Options{})
	require.NoError(t, err)
	assert.Contains(t, []string{procid.ShmDir, tmp}, filepath.Dir(s.Dir), "in memory where it can be")
	assert.Contains(t, filepath.Base(s.Dir), dirPrefix+procid.Tag())
	s.Stop()
	assert.NoDirExists(t, s.Dir)
}

const helperEnv = "LOCKLAB_REDISPROC_HELPER"

// TestHelperServer is not a test: TestServerDiesWithParent runs it in a
// process of its own, which starts a server, prints its pid and its
// directory, and waits to be killed.
func TestHelperServer(t *testing.T) {
	proctest.Helper(t, helperEnv, func() (int, string, error) {
		s, err := Start(Options{})
		if err != nil {
			return 0, "", err
		}
		return s.Pid(), s.Dir, nil
	})
}

// TestServerDiesWithParent: a process killed before it could stop its
// server takes it with it, and RemoveStale removes its directory.
func TestServerDiesWithParent(t *testing.T) {
	proctest.DiesWithParent(t, "TestHelperServer", helperEnv, RemoveStale)
}
