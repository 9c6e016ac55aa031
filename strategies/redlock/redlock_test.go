package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/internal/tooling/redistest"
	"github.com/locklab/locklab/strategies/redlock"
)

// named gives a pool the Addr method that error messages use.
type named struct {
	*redis.Pool
	addr string
}

func (n named) Addr() string { return n.addr }

// cluster starts n servers and builds a Redlock on them. Unless cfg sets
// one, the node timeout is a generous 500ms, so that a busy test machine
// does not fail attempts that are not about timeouts.
func cluster(t *testing.T, n int, cfg locklab.Config) ([]*redistest.Server, *redlock.Redlock) {
	t.Helper()
	srv := redistest.Start(t, n)
	if cfg.NodeTimeout == 0 {
		cfg.NodeTimeout = 500 * time.Millisecond
	}
	return srv, on(t, srv, cfg)
}

// on builds a Redlock on srv with cfg as given.
func on(t *testing.T, srv []*redistest.Server, cfg locklab.Config) *redlock.Redlock {
	t.Helper()
	for _, s := range srv {
		cfg.Nodes = append(cfg.Nodes, named{s.Pool, s.Addr})
	}
	l, err := redlock.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func get(t *testing.T, s *redistest.Server, key string) string {
	t.Helper()
	v, err := redis.String(s.Do(t, "GET", key), nil)
	if err == redis.ErrNil {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func pttl(t *testing.T, s *redistest.Server, key string) time.Duration {
	t.Helper()
	ms, err := redis.Int64(s.Do(t, "PTTL", key), nil)
	if err != nil {
		t.Fatal(err)
	}
	return time.Duration(ms) * time.Millisecond
}

func TestAcquireExtendRelease(t *testing.T) {
	srv, l := cluster(t, 5, locklab.Config{})
	ctx := context.Background()
	const ttl = 10 * time.Second

	before := time.Now()
	lease, err := l.Acquire(ctx, "k", ttl)
	if err != nil {
		t.Fatal(err)
	}
	if lease.Key != "k" || lease.Token == "" || lease.Fence != 0 {
		t.Fatalf("lease %+v: want key k, a token, fence 0", lease)
	}
	after := time.Now()
	valid := ttl - l.DriftAllowance(ttl)
	if lease.Until.Before(before.Add(valid)) || lease.Until.After(after.Add(valid)) {
		t.Fatalf("lease.Until %v is not start+ttl-drift, with start in [%v, %v]", lease.Until, before, after)
	}
	for i, s := range srv {
		if got := get(t, s, "k"); got != lease.Token {
			t.Fatalf("node %d holds %q, want the token %q", i, got, lease.Token)
		}
		if d := pttl(t, s, "k"); d <= 0 || d > ttl {
			t.Fatalf("node %d: PTTL %v, want in (0, %v]", i, d, ttl)
		}
	}

	if _, err := l.Acquire(ctx, "k", ttl); !errors.Is(err, locklab.ErrNotAcquired) || errors.Is(err, locklab.ErrUnavailable) {
		t.Fatalf("second acquire: %v, want ErrNotAcquired only", err)
	}

	for _, s := range srv {
		s.Do(t, "PEXPIRE", "k", 5000)
	}
	ext, err := l.Extend(ctx, lease, 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if !ext.Until.After(lease.Until) || ext.Token != lease.Token || ext.Fence != 0 {
		t.Fatalf("extended lease %+v from %+v", ext, lease)
	}
	for i, s := range srv {
		if d := pttl(t, s, "k"); d <= 10*time.Second {
			t.Fatalf("node %d: PTTL %v after extending to 20s", i, d)
		}
	}

	if err := l.Release(ctx, ext); err != nil {
		t.Fatal(err)
	}
	for i, s := range srv {
		if got := get(t, s, "k"); got != "" {
			t.Fatalf("node %d still holds %q after release", i, got)
		}
	}
	if err := l.Release(ctx, ext); !errors.Is(err, locklab.ErrNotHeld) {
		t.Fatalf("second release: %v, want ErrNotHeld", err)
	}
	if _, err := l.Extend(ctx, ext, ttl); !errors.Is(err, locklab.ErrNotHeld) {
		t.Fatalf("extend after release: %v, want ErrNotHeld", err)
	}
	for i, s := range srv {
		if got := get(t, s, "k"); got != "" {
			t.Fatalf("node %d: extend re-created the key (%q)", i, got)
		}
	}
	if _, err := l.Acquire(ctx, "k", ttl); err != nil {
		t.Fatalf("acquire after release: %v", err)
	}
}

func TestThreeNodesAndOne(t *testing.T) {
	for _, n := range []int{1, 3} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			_, l := cluster(t, n, locklab.Config{})
			if l.Quorum() != n/2+1 {
				t.Fatalf("quorum %d for %d nodes", l.Quorum(), n)
			}
			lease, err := l.Acquire(context.Background(), "k", time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if err := l.Release(context.Background(), lease); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestReleaseLeavesOthersLock(t *testing.T) {
	srv, l := cluster(t, 5, locklab.Config{})
	ctx := context.Background()
	lease, err := l.Acquire(ctx, "k", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range srv { // the lease lapsed and another client took the key
		s.Do(t, "SET", "k", "other", "PX", 10000)
	}
	if err := l.Release(ctx, lease); !errors.Is(err, locklab.ErrNotHeld) {
		t.Fatalf("release of a lost lease: %v, want ErrNotHeld", err)
	}
	if _, err := l.Extend(ctx, lease, time.Second); !errors.Is(err, locklab.ErrNotHeld) {
		t.Fatalf("extend of a lost lease: %v, want ErrNotHeld", err)
	}
	for i, s := range srv {
		if got := get(t, s, "k"); got != "other" {
			t.Fatalf("node %d holds %q, want the other client's lock", i, got)
		}
	}
}

// commandCalls returns the number of calls of cmd since CONFIG RESETSTAT.
func commandCalls(t *testing.T, s *redistest.Server, cmd string) int {
	t.Helper()
	info, err := redis.String(s.Do(t, "INFO", "commandstats"), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(info, "\r\n") {
		rest, ok := strings.CutPrefix(line, "cmdstat_"+cmd+":calls=")
		if ok {
			var n int
			fmt.Sscan(strings.SplitN(rest, ",", 2)[0], &n)
			return n
		}
	}
	return 0
}

func TestQuorumArithmetic(t *testing.T) {
	srv, l := cluster(t, 5, locklab.Config{})
	ctx := context.Background()
	for k := 0; k <= 5; k++ {
		t.Run(fmt.Sprintf("%d foreign", k), func(t *testing.T) {
			key := fmt.Sprintf("q%d", k)
			// Spread the foreign keys: nodes 4, 2, 0, 3, 1.
			foreign := map[int]bool{}
			for _, i := range []int{4, 2, 0, 3, 1}[:k] {
				foreign[i] = true
				srv[i].Do(t, "SET", key, "foreign", "PX", 60000)
			}
			for _, s := range srv {
				s.Do(t, "CONFIG", "RESETSTAT")
			}
			lease, err := l.Acquire(ctx, key, 10*time.Second)
			if k <= 2 {
				if err != nil {
					t.Fatalf("acquire with %d of 5 nodes held elsewhere: %v", k, err)
				}
				for i, s := range srv {
					want := lease.Token
					if foreign[i] {
						want = "foreign"
					}
					if got := get(t, s, key); got != want {
						t.Fatalf("node %d holds %q, want %q", i, got, want)
					}
				}
				if err := l.Release(ctx, lease); err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(err, locklab.ErrNotAcquired) || errors.Is(err, locklab.ErrUnavailable) {
				t.Fatalf("acquire with %d of 5 nodes held elsewhere: %v, want ErrNotAcquired only", k, err)
			}
			t.Log(err)
			for i, s := range srv {
				want := ""
				if foreign[i] {
					want = "foreign"
				}
				if got := get(t, s, key); got != want {
					t.Fatalf("after the failed attempt node %d holds %q, want %q", i, got, want)
				}
				// Refusing nodes got no release; granting nodes got one.
				releases := commandCalls(t, s, "evalsha") + commandCalls(t, s, "eval")
				if foreign[i] && releases != 0 {
					t.Fatalf("node %d refused but got %d release scripts", i, releases)
				}
				if !foreign[i] && releases == 0 {
					t.Fatalf("node %d granted and got no release", i)
				}
			}
		})
	}
}

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

// nodeErrors collects every *NodeError in err's tree.
func nodeErrors(err error) []*redlock.NodeError {
	if ne, ok := err.(*redlock.NodeError); ok {
		return []*redlock.NodeError{ne}
	}
	var out []*redlock.NodeError
	switch u := err.(type) {
	case interface{ Unwrap() error }:
		out = nodeErrors(u.Unwrap())
	case interface{ Unwrap() []error }:
		for _, e := range u.Unwrap() {
			out = append(out, nodeErrors(e)...)
		}
	}
	return out
}

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

func TestExtendDoesNotRecreate(t *testing.T) {
	srv, l := cluster(t, 5, locklab.Config{})
	lease := locklab.Lease{Key: "k", Token: "t", Until: time.Now().Add(time.Hour)}
	if _, err := l.Extend(context.Background(), lease, time.Second); !errors.Is(err, locklab.ErrNotHeld) {
		t.Fatalf("extend of a lapsed key: %v, want ErrNotHeld", err)
	}
	for i, s := range srv {
		if got := get(t, s, "k"); got != "" {
			t.Fatalf("node %d: extend re-created the key (%q)", i, got)
		}
	}
}

func TestRace(t *testing.T) {
	srv, l := cluster(t, 5, locklab.Config{Retry: locklab.RetryPolicy{Initial: time.Millisecond, Max: 10 * time.Millisecond}})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	won, stop := context.WithCancel(ctx)
	defer stop()

	var (
		winners atomic.Int32
		lease   locklab.Lease
		start   = make(chan struct{})
		wg      sync.WaitGroup
	)
	for range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			// The winner never releases: nobody else may get in.
			ls, err := l.Wait(won, "race", time.Minute)
			if err == nil {
				winners.Add(1)
				lease = ls
				stop()
			}
		}()
	}
	close(start)
	wg.Wait()
	if ctx.Err() != nil {
		t.Fatal("no winner within 10s")
	}
	if n := winners.Load(); n != 1 {
		t.Fatalf("%d winners, want exactly 1", n)
	}
	held := 0
	for _, s := range srv {
		if get(t, s, "race") == lease.Token {
			held++
		}
	}
	if held < l.Quorum() {
		t.Fatalf("the winner holds %d nodes, want a majority", held)
	}
}

func TestBadInput(t *testing.T) {
	srv := redistest.Start(t, 1)
	p := srv[0].Pool
	for name, cfg := range map[string]locklab.Config{
		"no nodes":       {},
		"nil node":       {Nodes: []locklab.ConnSource{p, nil, p}},
		"two nodes":      {Nodes: []locklab.ConnSource{p, p}},
		"four nodes":     {Nodes: []locklab.ConnSource{p, p, p, p}},
		"drift":          {Nodes: []locklab.ConnSource{p}, DriftFactor: 1.5},
		"negative drift": {Nodes: []locklab.ConnSource{p}, DriftFactor: -0.1},
		"node timeout":   {Nodes: []locklab.ConnSource{p}, NodeTimeout: -time.Second},
		"NaN multiplier": {Nodes: []locklab.ConnSource{p}, Retry: locklab.RetryPolicy{Multiplier: math.NaN()}},
		"NaN jitter":     {Nodes: []locklab.ConnSource{p}, Retry: locklab.RetryPolicy{Jitter: math.NaN()}},
	} {
		if l, err := redlock.New(cfg); !errors.Is(err, locklab.ErrInvalid) || l != nil {
			t.Errorf("%s: New = %v, %v; want nil, ErrInvalid", name, l, err)
		}
	}
	if _, err := redlock.New(locklab.Config{Nodes: []locklab.ConnSource{p, p}}); err == nil ||
		!strings.Contains(err.Error(), "tolerates 0 failed nodes") {
		t.Errorf("the error for 2 nodes does not say why: %v", err)
	}

	l, err := redlock.New(locklab.Config{Nodes: []locklab.ConnSource{p, p, p}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	for name, call := range map[string]func() error{
		"empty key": func() error { _, err := l.Acquire(ctx, "", time.Second); return err },
		"zero ttl":  func() error { _, err := l.Acquire(ctx, "k", 0); return err },
		"neg ttl":   func() error { _, err := l.Acquire(ctx, "k", -time.Second); return err },
		"tiny ttl":  func() error { _, err := l.Acquire(ctx, "k", 2*time.Millisecond); return err },
		"nil ctx": func() error {
			var nilCtx context.Context
			_, err := l.Acquire(nilCtx, "k", time.Second)
			return err
		},
		"zero lease":     func() error { return l.Release(ctx, locklab.Lease{}) },
		"no token":       func() error { return l.Release(ctx, locklab.Lease{Key: "k"}) },
		"extend zero":    func() error { _, err := l.Extend(ctx, locklab.Lease{}, time.Second); return err },
		"extend neg ttl": func() error { _, err := l.Extend(ctx, locklab.Lease{Key: "k", Token: "t"}, -1); return err },
	} {
		if err := call(); !errors.Is(err, locklab.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
	if _, err := l.Acquire(cancelled, "k", time.Second); !errors.Is(err, context.Canceled) {
		t.Errorf("acquire with a cancelled context: %v", err)
	}
	if err := l.Release(cancelled, locklab.Lease{Key: "k", Token: "t"}); !errors.Is(err, context.Canceled) {
		t.Errorf("release with a cancelled context: %v", err)
	}
	if n, _ := redis.Int(srv[0].Do(t, "EXISTS", "k"), nil); n != 0 {
		t.Errorf("bad input reached Redis")
	}
}

func TestCancelledMidAttempt(t *testing.T) {
	srv, l := cluster(t, 5, locklab.Config{})
	for _, i := range []int{0, 2, 4} {
		if err := srv[i].Signal(syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { srv[i].Signal(syscall.SIGCONT) })
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
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
	case <-time.After(5 * time.Second):
		t.Fatal("acquire hangs on paused nodes")
	}
	for _, i := range []int{1, 3} {
		if got := get(t, srv[i], "k"); got != "" {
			t.Fatalf("node %d kept %q after the failed attempt", i, got)
		}
	}
}

func TestWaitRetries(t *testing.T) {
	_, l := cluster(t, 3, locklab.Config{Retry: locklab.RetryPolicy{Initial: 5 * time.Millisecond, Max: 20 * time.Millisecond}})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	first, err := l.Acquire(ctx, "w", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		time.Sleep(50 * time.Millisecond)
		l.Release(context.Background(), first)
	}()
	second, err := l.Wait(ctx, "w", time.Minute)
	if err != nil {
		t.Fatalf("wait for a released lock: %v", err)
	}
	if second.Token == first.Token {
		t.Fatal("the waiter got the first holder's token")
	}
}

func TestSplitVote(t *testing.T) {
	srv, l := cluster(t, 5, locklab.Config{})
	for i, v := range []string{"a", "a", "b", "b"} {
		srv[i].Do(t, "SET", "k", v, "PX", 60000)
	}
	_, err := l.Acquire(context.Background(), "k", 10*time.Second)
	if !errors.Is(err, locklab.ErrNotAcquired) || !strings.Contains(err.Error(), "refused by 4 of 5 nodes") {
		t.Fatalf("acquire against a split vote: %v, want ErrNotAcquired counting 4 refusals", err)
	}
	if got := get(t, srv[4], "k"); got != "" {
		t.Fatalf("node 4 kept %q after the failed attempt", got)
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
	done := make(chan error, 1)
	began := time.Now()
	go func() { done <- l.Release(ctx, lease) }()
	select {
	case err = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Release waits for the stopped node")
	}
	took := time.Since(began)
	t.Logf("release with one node stopped took %v", took)
	if err != nil {
		t.Fatalf("four of five nodes deleted the key: %v", err)
	}
	// The bound, and as much again for a loaded machine.
	if took > 2*redlock.ReleaseNodeTimeout+time.Second {
		t.Errorf("release took %v, want about the node timeout %v", took, redlock.ReleaseNodeTimeout)
	}
	for i, s := range srv[:4] {
		if v := get(t, s, "release:stopped"); v != "" {
			t.Errorf("node %d still holds the key", i)
		}
	}
}
