package serverproc

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestProc: a local process launched, paused, resumed and killed; a
// second launch while it runs, and one its check refuses, start nothing;
// its output and environment are as the spec says.
func TestProc(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(dir, "out.log")
	t.Setenv("LOCKLAB_TEST_DROP", "1")
	t.Setenv("LOCKLAB_TEST_KEEP", "1")
	p := &Proc{What: "test: server s1", Timeout: time.Second}
	spec := Spec{
		Local:   []string{"sh", "-c", `env | grep LOCKLAB_TEST_ | sort; pwd; exec sleep 60`},
		Dir:     dir,
		LogPath: log,
		DropEnv: func(kv string) bool { return strings.HasPrefix(kv, "LOCKLAB_TEST_DROP=") },
	}
	assert.Zero(t, p.Pid())
	assert.False(t, p.Running())
	assert.Nil(t, p.Exited())
	require.ErrorContains(t, p.Stop(), "test: server s1 not running")

	require.NoError(t, p.Launch(spec))
	t.Cleanup(p.Kill)
	assert.NotZero(t, p.Pid())
	assert.True(t, p.Running())
	require.ErrorContains(t, p.Launch(spec), "test: server s1 is running")

	require.NoError(t, p.Stop())
	assert.False(t, p.Running(), "paused")
	require.NoError(t, p.Cont())
	assert.True(t, p.Running())

	for end := time.Now().Add(time.Minute); !strings.Contains(p.LogTail(log, 10), dir); time.Sleep(10 * time.Millisecond) {
		require.True(t, time.Now().Before(end), "no output after a minute: %q", p.LogTail(log, 10))
	}
	assert.Equal(t, "LOCKLAB_TEST_KEEP=1\n"+dir, p.LogTail(log, 2), "the environment less what DropEnv drops, in Dir")

	exited := p.Exited()
	p.Stop()
	p.Kill() // a paused process too
	select {
	case <-exited:
	default:
		t.Fatal("Kill returned before the process exited")
	}
	assert.Zero(t, p.Pid())
	assert.False(t, p.Running())
	p.Kill() // nothing to kill

	closed := errors.New("closed")
	require.ErrorIs(t, p.Launch(Spec{Check: func() error { return closed }, Local: spec.Local, LogPath: log}), closed)
	assert.Zero(t, p.Pid(), "a refused launch starts nothing")
	require.ErrorContains(t, p.Launch(Spec{LogPath: log}), "no program")

	require.NoError(t, p.Launch(spec), "launched again after the kill")
	assert.NotZero(t, p.Pid())

	missing := &Proc{What: "test: server s2"}
	assert.Contains(t, missing.LogTail(filepath.Join(dir, "none.log"), 5), "no log")
	_, err := os.Stat(log)
	require.NoError(t, err)
}
