package serverproc

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/locklab/locklab/internal/tooling/procid"
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

// TestProcWithChildren: a process whose children are part of it, as a
// postmaster's backends are: Stop pauses them too and Cont resumes them,
// SignalChild strikes one, and Kill returns once they have exited.
func TestProcWithChildren(t *testing.T) {
	dir := t.TempDir()
	p := &Proc{What: "test: server s1", Timeout: 10 * time.Second, WithChildren: true}
	// Each child exits once its parent is gone, as a backend does.
	const child = `(while kill -0 $p 2>/dev/null; do sleep 0.02; done) &`
	require.NoError(t, p.Launch(Spec{Local: []string{"sh", "-c", `p=$$; ` + child + child + child + ` wait`}, Dir: dir}))
	t.Cleanup(p.Kill)
	ctx := context.Background()
	var kids []Child
	for end := time.Now().Add(time.Minute); len(kids) < 3; time.Sleep(10 * time.Millisecond) {
		require.True(t, time.Now().Before(end), "no three children after a minute: %v", kids)
		var err error
		kids, err = p.Children(ctx)
		require.NoError(t, err)
	}
	// paused waits until pid's state says paused (T) or not, as want:
	// a signal is delivered once the process next runs.
	paused := func(pid int, want bool) {
		for end := time.Now().Add(time.Minute); ; time.Sleep(5 * time.Millisecond) {
			st, err := procid.Stat(pid)
			require.NoError(t, err)
			if (st[0] == "T") == want {
				return
			}
			require.True(t, time.Now().Before(end), "process %d: state %s", pid, st[0])
		}
	}
	require.NoError(t, p.Stop())
	assert.False(t, p.Running())
	for _, pid := range append([]int{p.Pid()}, kids[0].Pid, kids[1].Pid, kids[2].Pid) {
		paused(pid, true)
	}
	require.NoError(t, p.Cont())
	assert.True(t, p.Running())
	for _, pid := range append([]int{p.Pid()}, kids[0].Pid, kids[1].Pid, kids[2].Pid) {
		paused(pid, false)
	}
	require.NoError(t, p.Cont(), "nothing to resume")

	require.NoError(t, p.SignalChild(ctx, kids[0], syscall.SIGKILL))
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	require.NoError(t, p.WaitGone(wctx, kids[:1]))
	require.Error(t, p.SignalChild(ctx, kids[0], syscall.SIGKILL), "a child that exited")

	require.NoError(t, p.Stop())
	p.Kill() // paused, children too
	for _, k := range kids {
		assert.True(t, k.gone(), "child %d exited with its parent", k.Pid)
	}
	none, err := p.Children(ctx)
	require.NoError(t, err)
	assert.Empty(t, none)
}

// TestRelaunch: a restart kills the running process and launches it
// again until start succeeds, trying again after the failures its retry
// accepts, each failed start's process killed; another failure, the tries
// spent or an ended context stop it at once.
func TestRelaunch(t *testing.T) {
	p := &Proc{What: "test: server s1", Timeout: time.Second}
	spec := Spec{Local: []string{"sleep", "60"}, Dir: t.TempDir()}
	require.NoError(t, p.Launch(spec))
	t.Cleanup(p.Kill)
	first := p.Exited()

	var exits []<-chan struct{}
	// start launches the process and fails with the errors given, then
	// succeeds.
	start := func(errs ...error) func() error {
		return func() error {
			if err := p.Launch(spec); err != nil {
				return err
			}
			exits = append(exits, p.Exited())
			if len(exits) > len(errs) {
				return nil
			}
			return errs[len(exits)-1]
		}
	}
	ctx := context.Background()
	taken := fmt.Errorf("wrapped: %w", ErrPortTaken)
	require.NoError(t, p.Relaunch(ctx, start(taken, taken), PortTaken))
	assert.True(t, closed(first), "the running process is killed first")
	require.Len(t, exits, 3)
	assert.True(t, closed(exits[0]) && closed(exits[1]), "the failed starts' processes are killed")
	assert.False(t, closed(exits[2]))
	assert.True(t, p.Running())

	other := errors.New("no such file")
	exits = nil
	require.ErrorIs(t, p.Relaunch(ctx, start(taken, other, taken), PortTaken), other)
	assert.Len(t, exits, 2, "another error is not retried")
	assert.False(t, p.Running())

	exits = nil
	require.ErrorIs(t, p.Relaunch(ctx, start(other, other, other, other), Tries(3)), other)
	assert.Len(t, exits, 3, "Tries(3) calls start three times")
	assert.False(t, p.Running())

	exits = nil
	done, cancel := context.WithCancel(ctx)
	cancel()
	require.ErrorIs(t, p.Relaunch(done, start(taken, taken), PortTaken), ErrPortTaken)
	assert.Len(t, exits, 1, "an ended context is not waited on")
	assert.False(t, p.Running())
}

// closed reports whether ch is closed.
func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// TestOnFreePorts: a start that found a port taken is tried again, three
// times at the most; another failure, or an ended context, is not.
func TestOnFreePorts(t *testing.T) {
	ctx := context.Background()
	taken := fmt.Errorf("wrapped: %w", ErrPortTaken)
	other := errors.New("no such file")
	// start fails with the errors given, then returns how many times it
	// was called.
	start := func(calls *int, errs ...error) func() (int, error) {
		return func() (int, error) {
			if *calls++; *calls <= len(errs) {
				return 0, errs[*calls-1]
			}
			return *calls, nil
		}
	}
	var calls int
	v, err := OnFreePorts(ctx, start(&calls, taken, taken))
	require.NoError(t, err)
	assert.Equal(t, 3, v)

	calls = 0
	_, err = OnFreePorts(ctx, start(&calls, taken, taken, taken))
	require.ErrorIs(t, err, ErrPortTaken)
	assert.Equal(t, 3, calls, "three tries at the most")

	calls = 0
	_, err = OnFreePorts(ctx, start(&calls, other, taken))
	require.ErrorIs(t, err, other)
	assert.Equal(t, 1, calls, "another error is not retried")

	done, cancel := context.WithCancel(ctx)
	cancel()
	calls = 0
	_, err = OnFreePorts(done, start(&calls, taken))
	require.ErrorIs(t, err, ErrPortTaken)
	assert.Equal(t, 1, calls, "nor a port taken once the context ended")
}
