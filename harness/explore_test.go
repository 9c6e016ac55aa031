package harness

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"
	"github.com/stretchr/testify/require"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/internal/tooling/redisproc"
	"github.com/locklab/locklab/internal/tooling/redistest"
	"github.com/locklab/locklab/lockkit"
	"github.com/locklab/locklab/strategies"
	"github.com/locklab/locklab/strategies/redlock"
)

// TestExploreFindsEveryUnsafeStrategy: exhaustive exploration with two
// clients finds the known failure of every unsafe single-node strategy, and
// none for set-nx-px.
func TestExploreFindsEveryUnsafeStrategy(t *testing.T) {
	nodes := nodesOf(redistest.Start(t, 1))
	cases := []struct {
		strategy, scenario string
		want               Outcome
	}{
		{"setnx-del", "release-after-expiry", Violated},
		{"setnx-getset", "release-after-expiry", Violated},
		{"setnx-getset", "clock-skew", Violated},
		{"incr-expire", "crash-before-expire", Deadlock},
		{"incr-expire-lua", "release-after-expiry", Violated},
		{"incr-expire-multi", "ttl-pushed-by-waiters", Starvation},
		{"setnx-expire", "crash-before-expire", Deadlock},
		{"setnx-expire-always", "crash-before-expire", Safe},
		{"set-nx-px-del", "release-after-expiry", Violated},
		{"set-nx-px-getdel", "release-after-expiry", Violated},
		{"set-nx-px", "release-after-expiry", Safe},
		{"set-nx-px", "clock-skew", Safe},
		{"set-nx-px", "crash-before-expire", Safe},
		{"set-nx-px", "ttl-pushed-by-waiters", Safe},
		{"set-nx-px", "stale-recovery", Safe},
	}
	for _, c := range cases {
		res, err := Explore(context.Background(), ExploreOptions{Case: mustCase(t, c.scenario, c.strategy), Nodes: nodes, Workers: 2})
		if err != nil {
			t.Fatalf("%s on %s: %v", c.strategy, c.scenario, err)
		}
		if res.Outcome != c.want {
			t.Errorf("%s on %s: %s after %d schedules, want %s", c.strategy, c.scenario, res.Outcome, res.Schedules, c.want)
			continue
		}
		if c.want == Safe && !res.Complete {
			t.Errorf("%s on %s: bound not exhausted", c.strategy, c.scenario)
		}
		if c.want != Safe {
			// The counterexample replays to the same verdict.
			h, err := Run(context.Background(), RunOptions{Case: mustCase(t, c.scenario, c.strategy), Nodes: nodes, Schedule: res.Counterexample.Schedule})
			if err != nil || h.Verdict.Outcome != c.want {
				t.Errorf("%s on %s: replay of %q gave %v (%v)", c.strategy, c.scenario, res.Counterexample.Schedule, h.Verdict, err)
			}
		}
		t.Logf("%-18s %-22s %-10s %4d schedules %6.0f/s  %s", c.strategy, c.scenario, res.Outcome, res.Schedules, res.PerSecond, cexSchedule(res))
	}
}

func cexSchedule(r *ExploreResult) string {
	if r.Counterexample == nil {
		return ""
	}
	return cut(r.Counterexample)
}

func TestRandomExploration(t *testing.T) {
	nodes := nodesOf(redistest.Start(t, 1))
	run := func() *ExploreResult {
		r, err := Explore(context.Background(), ExploreOptions{Case: mustCase(t, "stale-recovery", "setnx-del"), Nodes: nodes, Random: true, Samples: 150, Seed: 7})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	a, b := run(), run()
	if a.Violations == 0 {
		t.Fatal("random sampling found no double acquire on setnx-del")
	}
	if a.Violations != b.Violations || cut(a.Counterexample) != cut(b.Counterexample) {
		t.Fatalf("same seed, different results: %d/%d", a.Violations, b.Violations)
	}
}

// brokenLock is a deliberately wrong lock: each mode breaks one property,
// to prove the checkers can fail.
type brokenLock struct {
	src  locklab.ConnSource
	clk  locklab.Clock
	mode string
	tok  *locklab.TokenSource
}

func (b *brokenLock) Acquire(ctx context.Context, key string, ttl time.Duration) (locklab.Lease, error) {
	c, err := b.src.GetContext(ctx)
	if err != nil {
		return locklab.Lease{}, lockkit.Unavailable(err)
	}
	defer c.Close()
	tok, _ := b.tok.Token()
	var ok bool
	switch b.mode {
	case "grant-all": // no NX: everybody wins
		_, err = c.Do("SET", key, tok, "PX", ttl.Milliseconds())
		ok = err == nil
	case "no-ttl": // the key never expires
		n, e := redis.Int(c.Do("SETNX", key, tok))
		ok, err = n == 1, e
	case "push-ttl": // every try pushes the TTL forward
		v, e := c.Do("SET", key, tok, "NX")
		if e == nil {
			_, e = c.Do("PEXPIRE", key, ttl.Milliseconds())
		}
		ok, err = v != nil, e
	default: // "blind-del", "const-fence": a correct SET NX PX
		v, e := c.Do("SET", key, tok, "NX", "PX", ttl.Milliseconds())
		ok, err = v != nil, e
	}
	if err != nil {
		return locklab.Lease{}, lockkit.Unavailable(err)
	}
	if !ok {
		return locklab.Lease{}, locklab.ErrNotAcquired
	}
	l := locklab.Lease{Key: key, Token: tok, Until: b.clk.Now().Add(ttl)}
	if b.mode == "const-fence" {
		l.Fence = 5
	}
	return l, nil
}

func (b *brokenLock) Release(ctx context.Context, l locklab.Lease) error {
	if b.mode == "no-ttl" {
		return nil // forgets to delete
	}
	c, err := b.src.GetContext(ctx)
	if err != nil {
		return lockkit.Unavailable(err)
	}
	defer c.Close()
	_, err = c.Do("DEL", l.Key)
	return err
}

func broken(mode string) Factory {
	return func(cfg locklab.Config) (locklab.Locker, error) {
		return &brokenLock{src: cfg.Pool, clk: cfg.Clock, mode: mode, tok: cfg.Tokens()}, nil
	}
}

// TestCheckersFail: each checker catches the broken lock made to break its
// property.
func TestCheckersFail(t *testing.T) {
	nodes := nodesOf(redistest.Start(t, 1))
	cases := []struct {
		mode, scenario string
		want           Outcome
		prop           Property
	}{
		{"grant-all", "stale-recovery", Violated, MutualExclusion},
		{"blind-del", "release-after-expiry", Violated, ReleaseSafety},
		{"no-ttl", "crash-before-expire", Deadlock, NoDeadlock},
		{"push-ttl", "ttl-pushed-by-waiters", Starvation, NoStarvation},
		{"const-fence", "pause-past-ttl-fenced", Violated, Fencing},
	}
	for _, c := range cases {
		res, err := Explore(context.Background(), ExploreOptions{Case: Custom(mustLookup(t, c.scenario), "broken-"+c.mode, broken(c.mode)), Nodes: nodes})
		if err != nil {
			t.Fatal(err)
		}
		if res.Outcome != c.want || res.Counterexample.Verdict.Property != c.prop {
			t.Errorf("broken lock %s on %s: %s, want %s", c.mode, c.scenario, res.Outcome, c.want)
		}
	}
}

func TestRedlockClockJump(t *testing.T) {
	nodes := nodesOf(redistest.Start(t, 3))
	f := func(cfg locklab.Config) (locklab.Locker, error) { return redlock.New(cfg) }
	h, err := Run(context.Background(), RunOptions{Case: Custom(mustLookup(t, "redlock-clock-jump"), "redlock", f), Nodes: nodes})
	if err != nil {
		t.Fatal(err)
	}
	t.Log(h.Schedule)
	if h.Verdict.Outcome != Violated {
		t.Fatalf("redlock clock jump: %v", h.Verdict)
	}
}

// procNode is a Node over a redis-server process that can restart it.
type procNode struct {
	name string
	s    *redisproc.Server
}

func (n procNode) Name() string  { return n.name }
func (n procNode) Store() string { return redisStore }
func (n procNode) Addr() string  { return n.s.Addr }
func (n procNode) Restart(ctx context.Context, keep bool) error {
	if keep {
		return errors.New("procNode: no persistence configured")
	}
	return n.s.Restart()
}

func TestRedlockRestart(t *testing.T) {
	srv := redistest.Start(t, 3)
	nodes := make([]Node, 3)
	for i, s := range srv {
		nodes[i] = procNode{name: "n" + string(rune('1'+i)), s: s.Server}
	}
	f := func(cfg locklab.Config) (locklab.Locker, error) { return redlock.New(cfg) }
	h, err := Run(context.Background(), RunOptions{Case: Custom(mustLookup(t, "redlock-restart"), "redlock", f), Nodes: nodes})
	if err != nil {
		t.Fatal(err)
	}
	t.Log(h.Schedule)
	if h.Verdict.Outcome != Violated {
		t.Fatalf("redlock restart: %v", h.Verdict)
	}
}

// TestExploreRunsTransactionsWhole: on incr-expire-multi (MULTI, INCR,
// PEXPIRE, EXEC), the explorer does not branch inside the transaction, so
// it runs fewer schedules than the plain enumeration, and finds a
// counterexample of the same length; without MULTI there is nothing to
// skip.
func TestExploreRunsTransactionsWhole(t *testing.T) {
	nodes := nodesOf(redistest.Start(t, 1))
	explore := func(strategy string, plain bool) *ExploreResult {
		r, err := Explore(context.Background(), ExploreOptions{Case: mustCase(t, "pause-past-ttl", strategy),
			Nodes: nodes, Workers: 2, NoReduction: plain})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	red, plain := explore("incr-expire-multi", false), explore("incr-expire-multi", true)
	if red.Skipped == 0 || red.Schedules >= plain.Schedules || red.Naive != 0 || plain.Naive != int64(plain.Schedules) {
		t.Errorf("reduced: %d schedules, %d skipped, naive %d; plain: %d schedules", red.Schedules, red.Skipped, red.Naive, plain.Schedules)
	}
	if red.Outcome != Violated || plain.Outcome != Violated || red.Counterexample.Verdict.Step != plain.Counterexample.Verdict.Step {
		t.Errorf("reduced %s %q, plain %s %q", red.Outcome, cut(red.Counterexample), plain.Outcome, cut(plain.Counterexample))
	}
	// Without MULTI nothing is skipped inside a transaction; the sleep sets
	// may still prune, so the plain count is not known without running it.
	if r, p := explore("incr-expire-lua", false), explore("incr-expire-lua", true); r.Skipped != 0 || r.Naive != 0 || r.Schedules > p.Schedules {
		t.Errorf("incr-expire-lua: %d skipped, naive %d, %d schedules against the plain %d", r.Skipped, r.Naive, r.Schedules, p.Schedules)
	}
	// Runs long enough for their ticks to add up to a second: the
	// reduction's argument no longer holds, and it is off.
	long, err := Explore(context.Background(), ExploreOptions{Case: mustCase(t, "pause-past-ttl", "incr-expire-multi"),
		Nodes: nodes, Workers: 2, MaxSteps: 700})
	if err != nil {
		t.Fatal(err)
	}
	if long.Skipped != 0 || long.Schedules != plain.Schedules {
		t.Errorf("700 steps: %d skipped, %d schedules; want the plain %d", long.Skipped, long.Schedules, plain.Schedules)
	}
}

// The progress callback is never running when Explore returns, nor beside
// its own last call (Done): an exploration that ends while a call is under
// way waits for it.
func TestExploreProgressEndsBeforeReturn(t *testing.T) {
	nodes := nodesOf(redistest.Start(t, 1))
	var (
		mu                 sync.Mutex
		calls, running     int
		overlap, afterDone bool
		done               bool
	)
	// The first run's clients are built only once the first progress
	// report has come, so that the exploration cannot end before it
	// however quick the machine.
	ticked := make(chan struct{})
	var tick sync.Once
	build := func(cfg locklab.Config) (locklab.Locker, error) {
		<-ticked
		return strategies.New("set-nx-px", cfg)
	}
	res, err := Explore(context.Background(), ExploreOptions{
		Case: Custom(mustLookup(t, "stale-recovery"), "set-nx-px", build), Nodes: nodes, Workers: 2, Clients: 4,
		Progress: func(p ExploreProgress) {
			tick.Do(func() { close(ticked) })
			mu.Lock()
			if running > 0 {
				overlap = true
			}
			if done {
				afterDone = true
			}
			running++
			calls++
			done = done || p.Done
			mu.Unlock()
			if !p.Done {
				// Long enough for the exploration to end meanwhile.
				time.Sleep(time.Second)
			}
			mu.Lock()
			running--
			mu.Unlock()
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	require.GreaterOrEqual(t, calls, 2, "a report while exploring, and the last (Done), in %v", res.Elapsed)
	if running != 0 || overlap || afterDone || !done {
		t.Errorf("running %d at return, overlapping calls %v, a call after Done %v, Done seen %v", running, overlap, afterDone, done)
	}
}
