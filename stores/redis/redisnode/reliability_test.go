package redisnode

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/locklab/locklab/internal/tooling/backends"
)

// startChild runs this test binary as a child that starts a docker cluster
// of two nodes (mode "1") or a Sentinel group on backend mode, and waits; it
// returns once the child says READY, with a wait function that may be called
// more than once.
func startChild(t *testing.T, mode string) (*exec.Cmd, func() error) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+mode)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	var werr error
	wait := func() error {
		once.Do(func() { werr = cmd.Wait() })
		return werr
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		wait()
	})
	line := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "READY") || strings.HasPrefix(sc.Text(), "ERROR") {
				line <- sc.Text()
				break
			}
		}
		close(line)
		for sc.Scan() {
		}
	}()
	select {
	case l := <-line:
		if !strings.HasPrefix(l, "READY") {
			t.Fatalf("child: %q", l)
		}
		t.Logf("child %d: %s", cmd.Process.Pid, l)
	case <-time.After(3 * time.Minute):
		t.Fatal("child not ready within 3 minutes")
	}
	return cmd, wait
}

func TestStaleRemovedAfterSIGKILL(t *testing.T) {
	t.Parallel()
	skipShort(t)
	requireDocker(t)
	pool, _ := dockerClient(context.Background())
	child, wait := startChild(t, "1")
	pid := child.Process.Pid
	if cs, ns := ownedBy(pool.Client, pid); len(cs) != 2 || len(ns) != 1 {
		t.Fatalf("child owns containers %v, networks %v; want 2 and 1", cs, ns)
	}
	child.Process.Signal(syscall.SIGKILL)
	wait()
	if cs, ns := ownedBy(pool.Client, pid); len(cs) != 2 || len(ns) != 1 {
		t.Fatalf("after SIGKILL the child's containers %v and networks %v should still be there", cs, ns)
	}
	// The next Start cleans them up (and keeps its own).
	c := start(t, Options{Backend: backends.Docker, N: 1})
	// Another test binary may be removing them at the same moment.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		cs, ns := ownedBy(pool.Client, pid)
		if len(cs) == 0 && len(ns) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the next Start, stale containers %v and networks %v remain", cs, ns)
		}
	}
	if err := reach(c.Nodes()[0], time.Second); err != nil {
		t.Fatal(err)
	}
}

func TestSignalRemovesEverything(t *testing.T) {
	t.Parallel()
	skipShort(t)
	requireDocker(t)
	pool, _ := dockerClient(context.Background())
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			if signal.Ignored(sig) {
				t.Skipf("%v is ignored in this process (a background job?) and the child would inherit that", sig)
			}
			child, wait := startChild(t, "1")
			pid := child.Process.Pid
			if cs, _ := ownedBy(pool.Client, pid); len(cs) != 2 {
				t.Fatalf("child owns containers %v, want 2", cs)
			}
			t0 := time.Now()
			child.Process.Signal(sig)
			done := make(chan error, 1)
			go func() { done <- wait() }()
			select {
			case err := <-done:
				ws, _ := child.ProcessState.Sys().(syscall.WaitStatus)
				if !ws.Signaled() || ws.Signal() != sig {
					t.Errorf("child ended with %v, want death by %v", err, sig)
				}
			case <-time.After(30 * time.Second):
				t.Fatalf("child still running 30s after %v", sig)
			}
			t.Logf("child cleaned up and exited %v after %v", time.Since(t0).Round(time.Millisecond), sig)
			if cs, ns := ownedBy(pool.Client, pid); len(cs) != 0 || len(ns) != 0 {
				t.Fatalf("after %v, containers %v and networks %v remain", sig, cs, ns)
			}
		})
	}
}

func TestPullNeverHangs(t *testing.T) {
	t.Parallel()
	skipShort(t)
	requireDocker(t)
	pool, _ := dockerClient(context.Background())
	t0 := time.Now()
	err := pull(context.Background(), pool.Client, "locklab/no-such-image:0")
	d := time.Since(t0)
	t.Logf("pull of a missing image: %v after %v", err, d.Round(time.Millisecond))
	if err == nil {
		t.Fatal("pull of a missing image succeeded")
	}
	if d > pullTimeout+2*time.Second {
		t.Fatalf("pull took %v, bound is %v", d, pullTimeout)
	}
	// A missing image falls back to the local build.
	c := start(t, Options{Backend: backends.Docker, N: 1, Image: "locklab/no-such-image:0"})
	if !strings.Contains(c.Describe(), LocalImageRepo) {
		t.Errorf("Describe() = %q, want the local image", c.Describe())
	}
}

// skipShort skips a test of the docker backend alone under -short (make
// test), whose containers take seconds each to start: the quick run tests
// that backend in TestBasics (forEachBackend); make test-long and CI run
// every test.
func skipShort(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("docker-only test: -short runs the docker backend in TestBasics only (make test-long runs every test)")
	}
}
