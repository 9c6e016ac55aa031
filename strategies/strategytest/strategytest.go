// Package strategytest is the conformance suite every registered strategy
// passes against real servers of its store: Run for the Redis strategies,
// RunStore, with the hooks of a Store, for those of the other stores. Run
// it on a strategy of your own after registering it, against any Redis you
// run (see the package example):
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
	"slices"
	"testing"
	"time"

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
	run(t, name, redisStore(newConfig, d))
}

// run runs the suite for name on the store st.
func run(t *testing.T, name string, st Store) {
	d, err := strategies.Info(name)
	require.NoError(t, err)
	p := d.Properties
	s := &suite{name: name, props: p, noExpiry: d.NoExpiry, options: d.Options, store: st}
	s.timing(t, st.NewConfig(t))

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
	name     string
	props    strategies.Properties
	noExpiry bool
	store    Store
	// short is the TTL of the tests that wait for expiry; nodeTimeout,
	// when set, is the Config.NodeTimeout of a multi-node strategy. Both
	// are derived from the servers' round trip (timing).
	short, nodeTimeout time.Duration
	// options are the strategy-specific Config fields it reads: the suite
	// sets NodeTimeout only where it is read (New refuses it elsewhere).
	options []string
}

// timing derives the suite's timeouts from the servers as they answer now,
// from the slowest of 20 rounds of the store's RoundTrip (after one that
// dials; on Redis, parallel PINGs to every server): on a loaded machine
// the rounds are slower, and so are the timeouts. A multi-node strategy that reads NodeTimeout, whose Config sets none, gets ten
// rounds (within [minNodeTimeout, maxNodeTimeout]) as its node timeout. The
// short TTL is 250 rounds (a fiftieth of it, Redlock's default node timeout,
// covers five rounds), within [minShortTTL, maxShortTTL], and at least five
// node timeouts.
func (s *suite) timing(t *testing.T, cfg locklab.Config) {
	t.Helper()
	var worst time.Duration
	for i := range 21 { // the first round dials: not counted
		began := time.Now()
		s.store.RoundTrip(cfg)
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
	cfg := s.store.NewConfig(t)
	if s.nodeTimeout > 0 {
		cfg.NodeTimeout = s.nodeTimeout
	}
	l, err := strategies.New(s.name, cfg)
	require.NoError(t, err)
	return l, cfg
}

// key returns a key unique to the running sub-test.
func key(t *testing.T) string { return "locklab:test:" + t.Name() }

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
