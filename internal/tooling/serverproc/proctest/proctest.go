// Package proctest checks, for a store's package of throwaway servers,
// that its server processes die with the process that started them
// (serverproc's Pdeathsig) and that the store's RemoveStale then removes
// the directory that process left. The check runs the test binary again,
// as a helper process that starts a server:
//
//	func TestHelperServer(t *testing.T) {
//		proctest.Helper(t, "LOCKLAB_MYPROC_HELPER", func() (int, string, error) {
//			s, err := myproc.Start(...)
//			if err != nil {
//				return 0, "", err
//			}
//			return s.Pid(), s.Dir, nil
//		})
//	}
//
//	func TestServerDiesWithParent(t *testing.T) {
//		proctest.DiesWithParent(t, "TestHelperServer", "LOCKLAB_MYPROC_HELPER", myproc.RemoveStale)
//	}
package proctest

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/locklab/locklab/internal/tooling/procid"
)

// Helper is the helper process's side: a test that skips unless env is
// set; when it is, it starts a server, prints its pid and its directory
// ("pid N dir D"; "error" and why, and exits, when start fails), and
// waits to be killed.
func Helper(t *testing.T, env string, start func() (pid int, dir string, err error)) {
	if os.Getenv(env) == "" {
		t.Skip("helper process of a test that kills it")
	}
	pid, dir, err := start()
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	fmt.Println("pid", pid, "dir", dir)
	select {}
}

// Start runs the test binary's helper test in a process of its own, with
// env set, and returns it with its server's pid and directory, once the
// server runs and the directory is there.
func Start(t *testing.T, helper, env string) (cmd *exec.Cmd, pid int, dir string) {
	t.Helper()
	cmd = exec.Command(os.Args[0], "-test.run=^"+helper+"$", "-test.v")
	cmd.Env = append(os.Environ(), env+"=1")
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if _, err := fmt.Sscanf(sc.Text(), "pid %d dir %s", &pid, &dir); err == nil {
			break
		}
		require.False(t, strings.HasPrefix(sc.Text(), "error"), sc.Text())
	}
	require.NotZero(t, pid, "the helper printed its server's pid")
	require.True(t, Alive(pid))
	require.DirExists(t, dir)
	go func() { // the rest of its output, unread, must not block it
		for sc.Scan() {
		}
	}()
	return cmd, pid, dir
}

// DiesWithParent kills the helper process (Start) with SIGKILL, as a run
// killed before it could close its servers, and checks that its server
// dies with it and that removeStale removes its directory.
func DiesWithParent(t *testing.T, helper, env string, removeStale func() []string) {
	t.Helper()
	cmd, pid, dir := Start(t, helper, env)
	require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
	cmd.Wait()
	assert.True(t, WaitGone(pid), "the server died with its parent")
	assert.Contains(t, removeStale(), dir)
	assert.NoDirExists(t, dir)
}

// Alive reports whether pid names a process that has not exited (a
// zombie has).
func Alive(pid int) bool {
	st, err := procid.Stat(pid)
	return err == nil && len(st) > 0 && st[0] != "Z" && st[0] != "X"
}

// WaitGone waits up to a minute for pid to be gone, and kills it if not.
func WaitGone(pid int) bool {
	deadline := time.Now().Add(time.Minute)
	for Alive(pid) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if Alive(pid) {
		syscall.Kill(pid, syscall.SIGKILL)
		return false
	}
	return true
}

// LogLines returns the lines of the server log at path (every run the
// process had) that hold any of words, for a test that reads what a
// server said.
func LogLines(t testing.TB, path string, words ...string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	var out []string
	for l := range strings.Lines(string(b)) {
		for _, w := range words {
			if strings.Contains(l, w) {
				out = append(out, strings.TrimRight(l, "\n"))
				break
			}
		}
	}
	return out
}
