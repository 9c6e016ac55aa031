package strategytest

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/strategies"
)

// expire acquires k with l, built on cfg, with the short TTL, and waits
// until it has lapsed: it waits the TTL out, or has the store end the
// lock (Store.Expire) where a lock lapses with its holder's session. An
// acquire that fails as unavailable is tried again, up to five times over
// some three short TTLs, as a caller would: with the short TTL a strategy's
// own timeouts are short too (set-nx-px-wait waits a tenth of the TTL for
// its replica), and a loaded machine can miss them; these tests are about
// what follows the TTL. A Locker that keeps its own locks alive (the
// watchdog hash-reentrant runs by default) is closed first (io.Closer), as
// the end of the holder's process would stop it: a strategy whose leases
// renew themselves must implement io.Closer.
func (s *suite) expire(t *testing.T, l locklab.Locker, cfg locklab.Config, k string) locklab.Lease {
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
	if s.store.Expire != nil {
		s.store.Expire(t, cfg, lease)
		return lease
	}
	time.Sleep(s.short + s.short/2)
	return lease
}

func (s *suite) acquireAfterTTL(t *testing.T) {
	a, acfg := s.locker(t)
	b, _ := s.locker(t)
	k := key(t)
	held := s.expire(t, a, acfg, k)
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
	a, acfg := s.locker(t)
	b, _ := s.locker(t)
	c, _ := s.locker(t)
	k := key(t)
	stale := s.expire(t, a, acfg, k)
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
	expiry, ok := s.store.Expiry(t, cfg, lease)
	if s.props.ServerTTL {
		assert.True(t, ok, "the store must expire the lock")
		assert.Greater(t, expiry, time.Duration(0), "the lock key must carry a TTL")
		assert.LessOrEqual(t, expiry, longTTL)
	} else {
		assert.False(t, ok, "expected weakness: the key has no TTL; a crashed holder's lock stays until a client recovers it")
		t.Logf("%s: expected weakness confirmed: the lock key has no server-side TTL", s.name)
	}
}

// untilWithinServerTTL: a TTL with a fraction of a millisecond reaches a
// Redis server in whole milliseconds, rounded down (Store.Sent);
// Lease.Until, read from the strategy's Clock (held still here), must not
// end after the TTL the server was given, nor must an extend's.
func (s *suite) untilWithinServerTTL(t *testing.T) {
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	cfg := s.store.NewConfig(t)
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
	sent := t0.Add(s.store.Sent(ttl))
	lease, err := l.Acquire(ctx, key(t), ttl)
	require.NoError(t, err)
	defer l.Release(ctx, lease)
	assert.False(t, lease.Until.After(sent), "Until %v is after the %v the server was given", lease.Until.Sub(t0), sent.Sub(t0))
	if ext, ok := l.(locklab.Extender); ok {
		lease, err = ext.Extend(ctx, lease, ttl)
		require.NoError(t, err)
		assert.False(t, lease.Until.After(sent), "extend: Until %v is after the %v the server was given", lease.Until.Sub(t0), sent.Sub(t0))
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
	l, cfg := s.locker(t)
	ext, ok := l.(locklab.Extender)
	if !ok {
		t.Skip("the strategy does not extend")
	}
	k := key(t)
	stale := s.expire(t, l, cfg, k)
	_, err := ext.Extend(ctx, stale, longTTL)
	require.ErrorIs(t, err, locklab.ErrNotHeld)
	other, _ := s.locker(t)
	again, err := other.Acquire(ctx, k, longTTL)
	require.NoError(t, err, "a failed extend must not re-create the lock")
	require.NoError(t, other.Release(ctx, again))
}
