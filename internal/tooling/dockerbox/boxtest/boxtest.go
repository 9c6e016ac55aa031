// Package boxtest checks, for a store's package of throwaway servers, that
// a SIGINT to a process with servers open in containers removes their
// containers and network before the process ends (dockerbox's cleanup).
// The check runs the test binary again, as a helper process that starts
// the servers:
//
//	func TestHelperDocker(t *testing.T) {
//		boxtest.Helper(t, "LOCKLAB_MYPROC_DOCKER_HELPER", func() error { _, err := myproc.Start(...); return err })
//	}
//
//	func TestDockerInterrupt(t *testing.T) {
//		boxtest.Interrupt(t, "TestHelperDocker", "LOCKLAB_MYPROC_DOCKER_HELPER", 3, nil)
//	}
package boxtest

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/locklab/locklab/internal/tooling/dockerbox"
)

// Helper is the helper process's side: a test that skips unless env is
// set; when it is, it starts the servers, prints "ready" (or "error" and
// why, and exits), and waits for the signal.
func Helper(t *testing.T, env string, start func() error) {
	if os.Getenv(env) == "" {
		t.Skip("helper process of TestDockerInterrupt")
	}
	if err := start(); err != nil {
		fmt.Printf("error %q\n", err.Error())
		os.Exit(1)
	}
	fmt.Println("ready")
	select {}
}

// Interrupt runs the test binary's helper test in a process of its own,
// with env set, waits until it is ready, checks that it owns containers
// containers and one network, sends it SIGINT, and checks that the signal
// ended it once nothing of its was left. skip, when set, turns a helper's
// error into a skip when it reports true (an image that cannot be built
// here).
func Interrupt(t *testing.T, helper, env string, containers int, skip func(msg string) bool) {
	t.Helper()
	if _, err := dockerbox.Connect(context.Background()); err != nil {
		t.Skipf("docker backend: %v", err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^"+helper+"$", "-test.v")
	cmd.Env = append(os.Environ(), env+"=1")
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait(); dockerbox.RemoveStale(context.Background()) })
	sc := bufio.NewScanner(out)
	ready := false
	for !ready && sc.Scan() {
		if msg, failed := strings.CutPrefix(sc.Text(), "error "); failed {
			if skip != nil && skip(msg) {
				t.Skipf("docker backend: %s", msg)
			}
			t.Fatalf("the helper failed: %s", msg)
		}
		ready = sc.Text() == "ready"
	}
	require.True(t, ready, "the helper started its servers")
	cs, ns, err := dockerbox.Owned(context.Background(), cmd.Process.Pid, "")
	require.NoError(t, err)
	require.Len(t, cs, containers)
	require.Len(t, ns, 1)
	require.NoError(t, cmd.Process.Signal(syscall.SIGINT))
	err = cmd.Wait()
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee)
	assert.Equal(t, syscall.SIGINT, ee.Sys().(syscall.WaitStatus).Signal(), "the signal ends the process once it cleaned up")
	cs, ns, err = dockerbox.Owned(context.Background(), cmd.Process.Pid, "")
	require.NoError(t, err)
	assert.Empty(t, cs, "containers left")
	assert.Empty(t, ns, "networks left")
}
