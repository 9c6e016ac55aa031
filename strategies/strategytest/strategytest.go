// Package strategytest is the conformance suite every registered strategy
// passes against real Redis servers. Run it on a strategy of your own after
// registering it, against any Redis you run (see the package example):
//
//	func TestMyLock(t *testing.T) {
//		pool := locklab.NewPool("127.0.0.1:6379")
//		strategytest.Run(t, "my-lock", func() locklab.Config {
//			return locklab.Config{Pool: pool}
//		})
//	}
//
// The suite reads the strategy's declared Properties. For each property the
// strategy has, it checks that the property holds; for each it lacks, it
// checks that the weakness is really there and says so in the test log,
// rather than skipping: a strategy that is unsafe by design passes the suite
// by being unsafe exactly as documented.
package strategytest

import (
	"context"
	"errors"
	"io"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/strategies"
)

// minShortTTL is the least TTL used where a test waits for expiry; Run
// derives the one it uses from the servers' round trip (see measureShortTTL).
const minShortTTL = 80 * time.Millisecond

// maxShortTTL bounds the derived short TTL: at 2.5s Redlock's default node
// timeout reaches its 50ms cap.
const maxShortTTL = 2500 * time.Millisecond

// minNodeTimeout and maxNodeTimeout bound the derived node timeout of a
// multi-node strategy (and so its short TTL, five of them). The floor is
// well above one measured round: on a machine shared with other work, the
// round trip swings by a factor of ten between the measurement and the
// tests.
const (
	minNodeTimeout = 500 * time.Millisecond
	maxNodeTimeout = time.Second
)

// longTTL outlives any test. Races that are meant to finish use a shorter
// one (raceTTL): leftovers of failed attempts must not block them.
const longTTL = time.Minute

// Run runs the suite for the strategy registered as name. newConfig returns a
// Config on live Redis servers (Pool, or Nodes for a multi-node strategy); it
// is called once per sub-test. The sub-tests run in parallel, so newConfig
// may be called from several goroutines at once. Keys are unique per
// sub-test, so servers can be shared.
func Run(t *testing.T, name string, newConfig func() locklab.Config) {
	d, err := strategies.Info(name)
	require.NoError(t, err)
	p := d.Properties
	s := &suite{name: name, props: p, noExpiry: d.NoExpiry, options: d.Options, newConfig: newConfig}
	s.timing(t, newConfig())

	for _, sub := range []struct {
		name string
		test func(*testing.T)
	}{
		{"AcquireRelease", s.acquireRelease},
		{"SecondAcquireRefusedWhileHeld", s.secondRefused},
		{"AcquireAfterTTL", s.acquireAfterTTL},
		{"ReleaseOfLeaseNotHeld", s.releaseNotHeld},
		{"ServerTTL", s.serverTTL},
		{"UntilWithinServerTTL", s.untilWithinServerTTL},
		{"Fencing", s.fencing},
		{"Extend", s.extend},
		{"ExtendLapsed", s.extendLapsed},
		{"BadInput", s.badInput},
		{"ContextCancelled", s.ctxCancelled},
		{"Unreachable", s.unreachable},
		{"Race50", s.race50},
	} {
		// Sub-tests run in parallel: several wait out a TTL, and they
		// share nothing but the servers.
		t.Run(sub.name, func(t *testing.T) {
			t.Parallel()
			sub.test(t)
		})
	}
}

type suite struct {
	name      string
	props     strategies.Properties
	noExpiry  bool
	newConfig func() locklab.Config
	// short is the TTL of the tests that wait for expiry; nodeTimeout,
	// when set, is the Config.NodeTimeout of a multi-node strategy. Both
	// are derived from the servers' round trip (timing).
	short, nodeTimeout time.Duration
	// options are the strategy-specific Config fields it reads: the suite
	// sets NodeTimeout only where it is read (New refuses it elsewhere).
	options []string
}

// timing derives the suite's timeouts from the servers as they answer now,
// from the slowest of 20 parallel PING rounds to every server (after one
// that dials): on a loaded machine the rounds are slower, and so are the
// timeouts. A multi-node strategy that reads NodeTimeout, whose Config sets none, gets ten
// rounds (within [minNodeTimeout, maxNodeTimeout]) as its node timeout. The
// short TTL is 250 rounds (a fiftieth of it, Redlock's default node timeout,
// covers five rounds), within [minShortTTL, maxShortTTL], and at least five
// node timeouts.
func (s *suite) timing(t *testing.T, cfg locklab.Config) {
	t.Helper()
	srcs := cfg.Nodes
	if cfg.Pool != nil {
		srcs = []locklab.ConnSource{cfg.Pool}
	}
	var worst time.Duration
	for i := range 21 { // the first round dials: not counted
		began := time.Now()
		var wg sync.WaitGroup
		for _, src := range srcs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c, err := src.GetContext(context.Background())
				if err != nil {
					return
				}
				c.Do("PING")
				c.Close()
			}()
		}
		wg.Wait()
		if i > 0 {
			worst = max(worst, time.Since(began))
		}
	}
	s.short = min(max(250*worst, minShortTTL), maxShortTTL)
	if s.props.MultiNode && cfg.NodeTimeout == 0 && slices.Contains(s.options, strategies.OptNodeTimeout) {
		s.nodeTimeout = min(max(10*worst, minNodeTimeout), maxNodeTimeout).Round(time.Millisecond)
		s.short = max(s.short, 5*s.nodeTimeout)
	}
	s.short = s.short.Round(time.Millisecond)
	t.Logf("slowest round trip %v: short TTL %v, node timeout %v (0: the Config's)", worst, s.short, s.nodeTimeout)
}

// raceTTL is the TTL of a race meant to finish: long enough for the
// losers to stop after the first win, short enough that the keys a failed
// attempt could not take back do not block the race for long.
func (s *suite) raceTTL() time.Duration { return min(max(10*s.short, 2*time.Second), 10*time.Second) }

func (s *suite) locker(t *testing.T) (locklab.Locker, locklab.Config) {
	t.Helper()
	cfg := s.newConfig()
	if s.nodeTimeout > 0 {
		cfg.NodeTimeout = s.nodeTimeout
	}
	l, err := strategies.New(s.name, cfg)
	require.NoError(t, err)
	return l, cfg
}

// key returns a key unique to the running sub-test.
func key(t *testing.T) string { return "locklab:test:" + t.Name() }

// firstNode is where the suite inspects keys.
func firstNode(cfg locklab.Config) locklab.ConnSource {
	if cfg.Pool != nil {
		return cfg.Pool
	}
	return cfg.Nodes[0]
}

func do(t *testing.T, src locklab.ConnSource, cmd string, args ...any) any {
	t.Helper()
	c, err := src.GetContext(context.Background())
	require.NoError(t, err)
	defer c.Close()
	v, err := c.Do(cmd, args...)
	require.NoError(t, err)
	return v
}

func (s *suite) acquireRelease(t *testing.T) {
	ctx := context.Background()
	l, cfg := s.locker(t)
	k := key(t)
	before := cfg.ClockOrDefault().Now()
	lease, err := l.Acquire(ctx, k, longTTL)
	require.NoError(t, err)
	assert.Equal(t, k, lease.Key)
	assert.NotEmpty(t, lease.Token)
	assert.True(t, lease.Until.After(before), "Until %v should be after the start %v", lease.Until, before)
	assert.False(t, lease.Until.After(before.Add(longTTL).Add(time.Second)), "Until %v is later than start + ttl", lease.Until)
	require.NoError(t, l.Release(ctx, lease))
	lease2, err := l.Acquire(ctx, k, longTTL)
	require.NoError(t, err, "acquire after release")
	require.NoError(t, l.Release(ctx, lease2))
}

func (s *suite) secondRefused(t *testing.T) {
	ctx := context.Background()
	a, _ := s.locker(t)
	b, _ := s.locker(t)
	k := key(t)
	lease, err := a.Acquire(ctx, k, longTTL)
	require.NoError(t, err)
	_, err = b.Acquire(ctx, k, longTTL)
	require.ErrorIs(t, err, locklab.ErrNotAcquired)
	assert.NotErrorIs(t, err, locklab.ErrUnavailable)
	assert.Contains(t, err.Error(), k, "the error names the key")
	require.NoError(t, a.Release(ctx, lease))
}

// expire acquires k with the short TTL and waits until it has lapsed. An
// acquire that fails as unavailable is tried again, up to five times over
// some three short TTLs, as a caller would: with the short TTL a strategy's
// own timeouts are short too (set-nx-px-wait waits a tenth of the TTL for
// its replica), and a loaded machine can miss them; these tests are about
// what follows the TTL. A Locker that keeps its own locks alive (the
// watchdog hash-reentrant runs by default) is closed first (io.Closer), as
// the end of the holder's process would stop it: a strategy whose leases
// renew themselves must implement io.Closer.
func (s *suite) expire(t *testing.T, l locklab.Locker, k string) locklab.Lease {
	t.Helper()
	lease, err := l.Acquire(context.Background(), k, s.short)
	for try := 1; try < 5 && errors.Is(err, locklab.ErrUnavailable); try++ {
		t.Logf("acquire with the short TTL, try %d: %v", try, err)
		time.Sleep(time.Duration(try) * s.short / 4)
		lease, err = l.Acquire(context.Background(), k, s.short)
	}
	require.NoError(t, err)
	if c, ok := l.(io.Closer); ok {
		require.NoError(t, c.Close())
	}
	time.Sleep(s.short + s.short/2)
	return lease
}

func (s *suite) acquireAfterTTL(t *testing.T) {
	a, _ := s.locker(t)
	b, _ := s.locker(t)
	k := key(t)
	held := s.expire(t, a, k)
	lease, err := b.Acquire(context.Background(), k, longTTL)
	if s.noExpiry {
		require.ErrorIs(t, err, locklab.ErrNotAcquired, "expected weakness: the lock never expires")
		t.Logf("%s: expected weakness confirmed: the lock outlived its TTL; only its holder's release frees it", s.name)
		require.NoError(t, a.Release(context.Background(), held))
		lease, err = b.Acquire(context.Background(), k, longTTL)
		require.NoError(t, err, "acquire after the holder's release")
		require.NoError(t, b.Release(context.Background(), lease))
		return
	}
	require.NoError(t, err, "the lock of a holder that never released must become free after its TTL")
	require.NoError(t, b.Release(context.Background(), lease))
}

// releaseNotHeld: A's lease lapses, B acquires, A releases. A strategy with
// an owner-checked release refuses and leaves B's lock; one without deletes
// B's lock, which is its documented weakness.
func (s *suite) releaseNotHeld(t *testing.T) {
	ctx := context.Background()
	a, _ := s.locker(t)
	b, _ := s.locker(t)
	c, _ := s.locker(t)
	k := key(t)
	stale := s.expire(t, a, k)
	bl, err := b.Acquire(ctx, k, longTTL)
	if s.noExpiry {
		// No lease lapses: A still holds the lock, and its release is
		// no stale one.
		require.ErrorIs(t, err, locklab.ErrNotAcquired, "expected weakness: the lock never expires")
		require.NoError(t, a.Release(ctx, stale))
		require.ErrorIs(t, a.Release(ctx, locklab.Lease{}), locklab.ErrInvalid, "zero lease")
		return
	}
	require.NoError(t, err)

	err = a.Release(ctx, stale)
	_, cerr := c.Acquire(ctx, k, longTTL)
	if s.props.OwnerCheckedRelease {
		require.ErrorIs(t, err, locklab.ErrNotHeld, "release of a lapsed lease")
		require.ErrorIs(t, cerr, locklab.ErrNotAcquired, "B's lock must survive A's stale release")
		require.NoError(t, b.Release(ctx, bl))
	} else {
		require.NoError(t, cerr, "expected weakness: A's stale release deletes B's lock, so C acquires")
		t.Logf("%s: expected weakness confirmed: a release after the TTL deleted the successor's lock", s.name)
	}
	// A second release of the same stale lease never panics.
	_ = a.Release(ctx, stale)
	require.ErrorIs(t, a.Release(ctx, locklab.Lease{}), locklab.ErrInvalid, "zero lease")
}

func (s *suite) serverTTL(t *testing.T) {
	l, cfg := s.locker(t)
	k := key(t)
	lease, err := l.Acquire(context.Background(), k, longTTL)
	require.NoError(t, err)
	defer l.Release(context.Background(), lease)
	pttl, err := redis.Int64(do(t, firstNode(cfg), "PTTL", k), nil)
	require.NoError(t, err)
	if s.props.ServerTTL {
		assert.Greater(t, pttl, int64(0), "the lock key must carry a TTL")
		assert.LessOrEqual(t, pttl, longTTL.Milliseconds())
	} else {
		assert.Equal(t, int64(-1), pttl, "expected weakness: the key has no TTL; a crashed holder's lock stays until a client recovers it")
		t.Logf("%s: expected weakness confirmed: the lock key has no server-side TTL", s.name)
	}
}

// untilWithinServerTTL: a TTL with a fraction of a millisecond reaches the
// server in whole milliseconds, rounded down; Lease.Until, read from the
// strategy's Clock (held still here), must not end after the TTL the
// server was given, nor must an extend's.
func (s *suite) untilWithinServerTTL(t *testing.T) {
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	cfg := s.newConfig()
	if s.nodeTimeout > 0 {
		cfg.NodeTimeout = s.nodeTimeout
	}
	cfg.Clock = locklab.ClockFunc(func() time.Time { return t0 })
	l, err := strategies.New(s.name, cfg)
	require.NoError(t, err)
	lc, ok := l.(locklab.LeaseClock)
	require.True(t, ok, "a strategy tells the Clock its leases are read from (locklab.LeaseClock), for Watch")
	assert.Equal(t, t0, lc.LeaseClock().Now())
	ctx := context.Background()
	ttl := longTTL + 900*time.Microsecond
	sent := t0.Add(longTTL.Truncate(time.Millisecond))
	lease, err := l.Acquire(ctx, key(t), ttl)
	require.NoError(t, err)
	defer l.Release(ctx, lease)
	assert.False(t, lease.Until.After(sent), "Until %v is after the %v the server was given", lease.Until.Sub(t0), longTTL)
	if ext, ok := l.(locklab.Extender); ok {
		lease, err = ext.Extend(ctx, lease, ttl)
		require.NoError(t, err)
		assert.False(t, lease.Until.After(sent), "extend: Until %v is after the %v the server was given", lease.Until.Sub(t0), longTTL)
	}
}

func (s *suite) fencing(t *testing.T) {
	ctx := context.Background()
	l, _ := s.locker(t)
	k := key(t)
	var last int64
	for i := 0; i < 3; i++ {
		lease, err := l.Acquire(ctx, k, longTTL)
		require.NoError(t, err)
		if s.props.Fencing {
			assert.Greater(t, lease.Fence, last, "fence numbers must grow with each acquire")
		} else {
			assert.Zero(t, lease.Fence, "a strategy without fencing reports fence 0")
		}
		last = lease.Fence
		require.NoError(t, l.Release(ctx, lease))
	}
}

func (s *suite) extend(t *testing.T) {
	ctx := context.Background()
	l, _ := s.locker(t)
	ext, ok := l.(locklab.Extender)
	if !s.props.Extend {
		assert.False(t, ok, "strategy implements Extender but does not declare it")
		return
	}
	require.True(t, ok, "strategy declares Extend but does not implement locklab.Extender")
	k := key(t)
	lease, err := l.Acquire(ctx, k, s.short)
	require.NoError(t, err)
	longer, err := ext.Extend(ctx, lease, longTTL)
	require.NoError(t, err)
	assert.True(t, longer.Until.After(lease.Until))
	time.Sleep(s.short + s.short/2)
	other, _ := s.locker(t)
	_, err = other.Acquire(ctx, k, longTTL)
	require.ErrorIs(t, err, locklab.ErrNotAcquired, "extended lock must outlive its first TTL")
	require.NoError(t, l.Release(ctx, longer))
}

// extendLapsed: extending a lapsed lease fails and does not re-create the
// lock.
func (s *suite) extendLapsed(t *testing.T) {
	ctx := context.Background()
	l, _ := s.locker(t)
	ext, ok := l.(locklab.Extender)
	if !ok {
		t.Skip("the strategy does not extend")
	}
	k := key(t)
	stale := s.expire(t, l, k)
	_, err := ext.Extend(ctx, stale, longTTL)
	require.ErrorIs(t, err, locklab.ErrNotHeld)
	other, _ := s.locker(t)
	again, err := other.Acquire(ctx, k, longTTL)
	require.NoError(t, err, "a failed extend must not re-create the lock")
	require.NoError(t, other.Release(ctx, again))
}

func (s *suite) badInput(t *testing.T) {
	ctx := context.Background()
	l, _ := s.locker(t)
	_, err := l.Acquire(ctx, "", time.Second)
	require.ErrorIs(t, err, locklab.ErrInvalid, "empty key")
	for _, ttl := range []time.Duration{0, -time.Second, time.Microsecond} {
		_, err = l.Acquire(ctx, key(t), ttl)
		require.ErrorIs(t, err, locklab.ErrInvalid, "ttl %v", ttl)
	}
	_, err = strategies.New(s.name, locklab.Config{})
	require.ErrorIs(t, err, locklab.ErrInvalid, "a Config without connection source")
	assert.Contains(t, err.Error(), s.name)
	// A typed nil pool is no connection source either: refused at New, not
	// a panic at the first Acquire.
	var nilPool *redis.Pool
	cfg := locklab.Config{Pool: nilPool}
	if s.props.MultiNode {
		cfg = s.newConfig()
		cfg.Nodes = append([]locklab.ConnSource{nilPool}, cfg.Nodes[1:]...)
	}
	_, err = strategies.New(s.name, cfg)
	require.ErrorIs(t, err, locklab.ErrInvalid, "a typed nil pool")
}

func (s *suite) ctxCancelled(t *testing.T) {
	l, cfg := s.locker(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	k := key(t)
	_, err := l.Acquire(ctx, k, longTTL)
	require.ErrorIs(t, err, context.Canceled)
	require.ErrorIs(t, err, locklab.ErrUnavailable, "a done context wraps a sentinel, like one that ends mid-call")
	n, _ := redis.Int64(do(t, firstNode(cfg), "EXISTS", k), nil)
	assert.Zero(t, n, "a cancelled acquire must not take the lock")
	expired, cancelExpired := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancelExpired()
	_, err = l.Acquire(expired, k, longTTL)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.ErrorIs(t, err, locklab.ErrUnavailable)

	// Wait gives up when its context ends, and says why.
	holder, _ := s.locker(t)
	lease, err := holder.Acquire(context.Background(), k, longTTL)
	require.NoError(t, err)
	defer holder.Release(context.Background(), lease)
	err = holder.Release(ctx, lease)
	require.ErrorIs(t, err, context.Canceled)
	require.ErrorIs(t, err, locklab.ErrUnavailable, "a release with a done context")
	if ext, ok := holder.(locklab.Extender); ok {
		_, err = ext.Extend(expired, lease, longTTL)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.ErrorIs(t, err, locklab.ErrUnavailable, "an extend with an expired context")
	}
	wctx, wcancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
	defer wcancel()
	_, err = locklab.Wait(wctx, l, k, longTTL, locklab.RetryPolicy{Initial: time.Millisecond})
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.ErrorIs(t, err, locklab.ErrNotAcquired)
}

// deadPool is a pool whose server does not exist: a port nothing listens on.
func deadPool(t *testing.T) *redis.Pool {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	p := locklab.NewPool(addr)
	t.Cleanup(func() { p.Close() })
	return p
}

func (s *suite) unreachable(t *testing.T) {
	cfg := s.newConfig()
	if s.props.MultiNode {
		nodes := make([]locklab.ConnSource, len(cfg.Nodes))
		for i := range nodes {
			nodes[i] = deadPool(t)
		}
		cfg.Nodes = nodes
	} else {
		cfg.Pool = deadPool(t)
	}
	l, err := strategies.New(s.name, cfg)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err = l.Acquire(ctx, key(t), time.Second)
	require.ErrorIs(t, err, locklab.ErrUnavailable)
	assert.NotErrorIs(t, err, locklab.ErrNotAcquired)
	require.NoError(t, ctx.Err(), "an unreachable Redis must fail fast, not hang")
}

// race50 races 50 clients for a free key. On one node each makes one
// attempt and exactly one must win; an attempt that fails as unavailable
// (set-nx-px-wait's replica did not acknowledge in time: the attempt took
// back its key) is made again, as a caller would. A multi-node strategy can
// split the votes so that nobody wins a round (the Redlock spec says so:
// callers retry after a random delay), so there every client waits with
// retries until the first winner, and exactly one must win.
func (s *suite) race50(t *testing.T) {
	const n = 50
	k := key(t)
	ttl := s.raceTTL()
	// Bounded, so that a race that cannot finish fails instead of hanging.
	limit, cancel := context.WithTimeout(context.Background(), 30*ttl)
	defer cancel()
	ctx, won := context.WithCancel(limit)
	defer won()
	attempt := func(l locklab.Locker) error {
		for {
			_, err := l.Acquire(ctx, k, ttl)
			if !errors.Is(err, locklab.ErrUnavailable) || ctx.Err() != nil {
				return err
			}
			time.Sleep(time.Millisecond)
		}
	}
	if s.props.MultiNode {
		attempt = func(l locklab.Locker) error {
			for {
				_, err := locklab.Wait(ctx, l, k, ttl, locklab.RetryPolicy{Initial: time.Millisecond, Max: 20 * time.Millisecond})
				switch {
				case err == nil:
					won()
					return nil
				case ctx.Err() != nil:
					return locklab.ErrNotAcquired // another client won
				case errors.Is(err, locklab.ErrUnavailable):
					// 250 commands at once on a small machine: a node may
					// miss its timeout. The spec's answer is to retry.
					time.Sleep(time.Millisecond)
				default:
					return err
				}
			}
		}
	}
	lockers := make([]locklab.Locker, n)
	for i := range lockers {
		lockers[i], _ = s.locker(t)
	}
	var (
		wg      sync.WaitGroup
		start   = make(chan struct{})
		mu      sync.Mutex
		winners int
		other   []error
	)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(l locklab.Locker) {
			defer wg.Done()
			<-start
			err := attempt(l)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				winners++
			case !errors.Is(err, locklab.ErrNotAcquired):
				other = append(other, err)
			}
		}(lockers[i])
	}
	close(start)
	wg.Wait()
	require.NoError(t, limit.Err(), "the race did not finish within %v", 30*ttl)
	require.Empty(t, other, "only ErrNotAcquired is expected from the losers")
	if s.props.AtomicAcquire {
		require.Equal(t, 1, winners, "exactly one of %d racing clients must win a free key", n)
	} else {
		require.GreaterOrEqual(t, winners, 1)
		t.Logf("%s: %d winners of %d (acquire is not atomic)", s.name, winners, n)
	}
}
