package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/internal/tooling/redistest"
	"github.com/locklab/locklab/strategies/redlock"
)

func TestStoppedNodes(t *testing.T) {
	srv, l := cluster(t, 5, locklab.Config{})
	ctx := context.Background()

	srv[1].Kill()
	srv[3].Kill()
	lease, err := l.Acquire(ctx, "k", 10*time.Second)
	if err != nil {
		t.Fatalf("acquire with 2 of 5 nodes stopped: %v", err)
	}
	if err := l.Release(ctx, lease); err != nil {
		t.Fatalf("release with 2 of 5 nodes stopped: %v", err)
	}

	srv[4].Kill()
	_, err = l.Acquire(ctx, "k", 10*time.Second)
	if !errors.Is(err, locklab.ErrUnavailable) || errors.Is(err, locklab.ErrNotAcquired) {
		t.Fatalf("acquire with 3 of 5 nodes stopped: %v, want ErrUnavailable only", err)
	}
	t.Log(err)
	var ne *redlock.NodeError
	if !errors.As(err, &ne) {
		t.Fatalf("no NodeError in %v", err)
	}
	failedNodes := map[int]bool{}
	for _, ne := range nodeErrors(err) {
		failedNodes[ne.Node] = true
	}
	if len(failedNodes) != 3 || !failedNodes[1] || !failedNodes[3] || !failedNodes[4] {
		t.Fatalf("node errors for %v, want nodes 1, 3, 4: %v", failedNodes, err)
	}
	for _, i := range []int{1, 3, 4} {
		if !strings.Contains(err.Error(), fmt.Sprintf("redlock node %d (%s)", i, srv[i].Addr)) {
			t.Fatalf("error does not name node %d at %s: %v", i, srv[i].Addr, err)
		}
	}
	for _, i := range []int{0, 2} {
		if got := get(t, srv[i], "k"); got != "" {
			t.Fatalf("node %d kept %q after the failed attempt", i, got)
		}
	}
}

func TestCancelledMidAttempt(t *testing.T) {
	// The nodes' timeout is far past the context's deadline, so that the
	// deadline, not a node's timeout, ends the attempt.
	srv, l := cluster(t, 5, locklab.Config{NodeTimeout: time.Minute})
	for _, i := range []int{0, 2, 4} {
		if err := srv[i].Signal(syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { srv[i].Signal(syscall.SIGCONT) })
	}
	// Long enough for the two running nodes to answer on a loaded
	// machine (the test counts their answers); the paused majority never
	// does, so the deadline ends the attempt whatever its length.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := l.Acquire(ctx, "k", 10*time.Second)
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, locklab.ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("acquire with a majority paused: %v, want ErrUnavailable and the deadline", err)
		}
		if n := len(nodeErrors(err)); n != 3 {
			t.Fatalf("%d node errors, want 3: %v", n, err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("acquire hangs on paused nodes")
	}
	for _, i := range []int{1, 3} {
		if got := get(t, srv[i], "k"); got != "" {
			t.Fatalf("node %d kept %q after the failed attempt", i, got)
		}
	}
}

// TestReleaseDoesNotWaitForAStoppedNode: with plain pools (no timeouts), a
// context without deadline and no NodeTimeout, one node stopped must not
// hold a release up: four of five answer at once, the fifth times out.
func TestReleaseDoesNotWaitForAStoppedNode(t *testing.T) {
	srv := redistest.Start(t, 5)
	var nodes []locklab.ConnSource
	for _, s := range srv {
		addr := s.Addr
		p := &redis.Pool{Dial: func() (redis.Conn, error) { return redis.Dial("tcp", addr) }}
		t.Cleanup(func() { p.Close() })
		nodes = append(nodes, p)
	}
	l, err := redlock.New(locklab.Config{Nodes: nodes})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	lease, err := l.Acquire(ctx, "release:stopped", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv[4].Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	defer srv[4].Signal(syscall.SIGCONT)
	// Each release returns about the node timeout after it began, the
	// stopped node's answer never awaited. On a loaded machine the
	// running nodes may miss that timeout too: the release then fails
	// unavailable, and is tried again, as a caller would; one that finds
	// the key gone (ErrNotHeld) after such a try found it deleted late.
	for try := 0; ; try++ {
		done := make(chan error, 1)
		began := time.Now()
		go func() { done <- l.Release(ctx, lease) }()
		select {
		case err = <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("Release waits for the stopped node")
		}
		took := time.Since(began)
		t.Logf("release with one node stopped took %v: %v", took, err)
		// The bound, and as much again for a loaded machine.
		if took > 2*redlock.ReleaseNodeTimeout+time.Second {
			t.Errorf("release took %v, want about the node timeout %v", took, redlock.ReleaseNodeTimeout)
		}
		if err == nil || (try > 0 && errors.Is(err, locklab.ErrNotHeld)) {
			break
		}
		if !errors.Is(err, locklab.ErrUnavailable) || try == 20 {
			t.Fatalf("four of five nodes running, the release failed: %v", err)
		}
	}
	for i, s := range srv[:4] {
		if v := get(t, s, "release:stopped"); v != "" {
			t.Errorf("node %d still holds the key", i)
		}
	}
}
