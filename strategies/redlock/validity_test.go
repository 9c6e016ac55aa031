package redlock_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/strategies/redlock"
)

// steppingClock advances by step at every reading.
type steppingClock struct {
	mu   sync.Mutex
	now  time.Time
	step time.Duration
}

func (c *steppingClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(c.step)
	return c.now
}

func TestNoLeasePastValidity(t *testing.T) {
	t.Run("slow node", func(t *testing.T) {
		// One node paused: its timeout alone is longer than the TTL.
		srv, l := cluster(t, 5, locklab.Config{NodeTimeout: 300 * time.Millisecond})
		if err := srv[2].Signal(syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { srv[2].Signal(syscall.SIGCONT) })
		lease, err := l.Acquire(context.Background(), "k", 200*time.Millisecond)
		if err == nil {
			t.Fatalf("got lease %+v although the attempt outlasted the TTL", lease)
		}
		if !errors.Is(err, locklab.ErrUnavailable) || !strings.Contains(err.Error(), "no validity left") {
			t.Fatalf("error %v, want ErrUnavailable saying no validity was left", err)
		}
		t.Log(err)
		var ne *redlock.NodeError
		if !errors.As(err, &ne) || ne.Node != 2 {
			t.Fatalf("error %v does not name the paused node 2", err)
		}
		for _, i := range []int{0, 1, 3, 4} {
			if got := get(t, srv[i], "k"); got != "" {
				t.Fatalf("node %d kept %q after the failed attempt", i, got)
			}
		}
	})
	t.Run("slow node within validity", func(t *testing.T) {
		// The default timeout (ttl/50) keeps a paused node from eating the lease.
		srv, _ := cluster(t, 5, locklab.Config{})
		l := on(t, srv, locklab.Config{})
		if err := srv[0].Signal(syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { srv[0].Signal(syscall.SIGCONT) })
		lease, err := l.Acquire(context.Background(), "k", 2*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if !lease.Valid(time.Now()) {
			t.Fatalf("lease %+v returned already expired", lease)
		}
	})
	t.Run("clock", func(t *testing.T) {
		// Each reading of the clock advances 2s: the attempt "takes" 2s.
		clk := &steppingClock{now: time.Unix(1e9, 0), step: 2 * time.Second}
		srv, l := cluster(t, 5, locklab.Config{Clock: clk})
		ctx := context.Background()
		if _, err := l.Acquire(ctx, "k", 2*time.Second); !errors.Is(err, locklab.ErrUnavailable) {
			t.Fatalf("acquire whose validity was eaten: %v, want ErrUnavailable", err)
		}
		for i, s := range srv {
			if got := get(t, s, "k"); got != "" {
				t.Fatalf("node %d kept %q after the failed attempt", i, got)
			}
		}
		lease, err := l.Acquire(ctx, "k", 4*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		// start+4s-(40ms+2ms), read at start+2s.
		if want := clk.now.Add(-2 * time.Second).Add(4*time.Second - 42*time.Millisecond); !lease.Until.Equal(want) {
			t.Fatalf("Until %v, want %v", lease.Until, want)
		}
		// The next reading is past Until: Extend refuses without sending.
		for _, s := range srv {
			s.Do(t, "CONFIG", "RESETSTAT")
		}
		if _, err := l.Extend(ctx, lease, time.Second); !errors.Is(err, locklab.ErrNotHeld) {
			t.Fatalf("extend of a locally expired lease: %v, want ErrNotHeld", err)
		}
		for i, s := range srv {
			if n := commandCalls(t, s, "evalsha") + commandCalls(t, s, "eval"); n != 0 {
				t.Fatalf("node %d got %d scripts from an extend of an expired lease", i, n)
			}
		}
	})
}
