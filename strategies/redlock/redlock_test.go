package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"sync/atomic"
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
