package pglock_test

import (
	"context"
	"io"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/stores/postgres/pgproc"
	"github.com/locklab/locklab/strategies"
	"github.com/locklab/locklab/strategies/pglock"
)

var names = []string{"pg-lock-table", "pg-for-update", "pg-advisory"}

// sessionNames are the strategies whose lock is a session's.
var sessionNames = []string{"pg-for-update", "pg-advisory"}

// The shared server of the tests that need no faults, started on first use.
var shared struct {
	once sync.Once
	s    *pgproc.Server
	pool *pgxpool.Pool
	err  error
}

// dsn is the shared server's connection string, for the examples, which
// cannot start it themselves.
var dsn string

// startShared starts the shared server once.
func startShared() error {
	shared.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if shared.s, shared.err = pgproc.Start(ctx, pgproc.Options{}); shared.err != nil {
			return
		}
		dsn = shared.s.DSN()
		shared.pool, shared.err = pgxpool.New(ctx, shared.s.DSN()+"&"+poolParams)
	})
	return shared.err
}

func TestMain(m *testing.M) {
	// Started before the tests, for the examples: a failure fails every
	// test that needs it, with the reason.
	startShared()
	code := m.Run()
	if shared.pool != nil {
		shared.pool.Close()
	}
	if shared.s != nil {
		shared.s.Close()
	}
	os.Exit(code)
}

// poolParams: every test may hold many sessions at once.
const poolParams = "pool_max_conns=40"

// sharedPool returns a pool on the shared server.
func sharedPool(t *testing.T) *pgxpool.Pool {
	t.Helper()
	if err := startShared(); err != nil {
		t.Fatalf("starting postgres: %v", err)
	}
	return shared.pool
}

// clock is a manual clock, shared by the lockers of a test.
type clock struct{ ns atomic.Int64 }

func newClock() *clock {
	c := &clock{}
	c.ns.Store(time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	return c
}

func (c *clock) Now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *clock) Advance(d time.Duration) { c.ns.Add(int64(d)) }

func newLocker(t *testing.T, name string, cfg locklab.Config) locklab.Locker {
	t.Helper()
	l, err := strategies.New(name, cfg)
	require.NoError(t, err)
	if c, ok := l.(interface{ Close() error }); ok {
		t.Cleanup(func() { c.Close() })
	}
	return l
}

// sessionLocker is what the session strategies offer beyond Locker.
type sessionLocker interface {
	locklab.Locker
	Backend(locklab.Lease) (uint32, bool)
	Close() error
}

// key is unique to the running test.
func key(t *testing.T) string { return "locklab:test:" + t.Name() }

func forEach(t *testing.T, names []string, f func(t *testing.T, name string)) {
	for _, n := range names {
		t.Run(n, func(t *testing.T) { f(t, n) })
	}
}

func TestRegistered(t *testing.T) {
	for _, n := range names {
		d, err := strategies.Info(n)
		require.NoError(t, err)
		assert.Equal(t, pglock.Family, d.Family)
		assert.True(t, d.Properties.AtomicAcquire)
		assert.False(t, d.Properties.ServerTTL, "%s: no key carries a server TTL", n)
		assert.Contains(t, d.Source, "Distributed Lock", "%s names the notes", n)
		assert.NotEmpty(t, d.Weaknesses)
	}
}

// TestKnownToTheRegistry: the registry knows the names this package
// registers without importing it, so that a program that forgot the
// import is told it; and the strategies it lists as opening something
// for locklab.Close to end are those with a Close method.
func TestKnownToTheRegistry(t *testing.T) {
	var mine []string
	for _, d := range strategies.All() {
		if d.Family == pglock.Family {
			mine = append(mine, d.Name)
		}
	}
	assert.Equal(t, strategies.PackageNames(strategies.PostgresPackage), mine)
	for _, n := range mine {
		pkg, ok := strategies.Package(n)
		assert.True(t, ok, n)
		assert.Equal(t, strategies.PostgresPackage, pkg, n)
	}
	src, err := os.ReadFile("../registry.go")
	require.NoError(t, err)
	var closing string
	for _, ln := range strings.Split(string(src), "\n") {
		if item, ok := strings.CutPrefix(ln, "//   - "); ok {
			closing += strings.SplitN(item, ":", 2)[0] + ", "
		}
	}
	pool := sharedPool(t)
	for _, n := range mine {
		l := newLocker(t, n, locklab.Config{Store: pool})
		_, closer := l.(io.Closer)
		assert.Equal(t, closer, strings.Contains(closing, n+", "), "%s: a Close method, and listed in the strategies package's Closing section (%s)", n, closing)
		_, err := locklab.Extend(context.Background(), l, locklab.Lease{Key: "k", Token: "t"}, time.Second)
		assert.ErrorIs(t, err, locklab.ErrInvalid, "%s extends nothing, as the package says", n)
	}
}

func TestAcquireRelease(t *testing.T) {
	pool := sharedPool(t)
	forEach(t, names, func(t *testing.T, name string) {
		ctx := context.Background()
		clk := newClock()
		cfg := locklab.Config{Store: pool, Clock: clk}
		a, b := newLocker(t, name, cfg), newLocker(t, name, cfg)
		k := key(t)
		lease, err := a.Acquire(ctx, k, time.Minute)
		require.NoError(t, err)
		assert.Equal(t, k, lease.Key)
		assert.Len(t, lease.Token, 32)
		assert.Zero(t, lease.Fence)
		assert.Equal(t, clk.Now().Add(time.Minute), lease.Until, "Until is the start plus the ttl")

		_, err = b.Acquire(ctx, k, time.Minute)
		require.ErrorIs(t, err, locklab.ErrNotAcquired)
		assert.NotErrorIs(t, err, locklab.ErrUnavailable)
		assert.Contains(t, err.Error(), k, "the refusal names the key")
		_, err = a.Acquire(ctx, k, time.Minute)
		require.ErrorIs(t, err, locklab.ErrNotAcquired, "the holder's own Locker is refused too: no re-entry")

		require.NoError(t, a.Release(ctx, lease))
		require.ErrorIs(t, a.Release(ctx, lease), locklab.ErrNotHeld, "a second release")
		again, err := b.Acquire(ctx, k, time.Minute)
		require.NoError(t, err, "free after release")
		require.NoError(t, b.Release(ctx, again))
	})
}

// TestSessionLockOutlivesUntil: a session lock has no TTL; its ttl only
// sets Until, and the lock is still held long after it.
func TestSessionLockOutlivesUntil(t *testing.T) {
	pool := sharedPool(t)
	forEach(t, sessionNames, func(t *testing.T, name string) {
		ctx := context.Background()
		cfg := locklab.Config{Store: pool}
		a, b := newLocker(t, name, cfg), newLocker(t, name, cfg)
		lease, err := a.Acquire(ctx, key(t), time.Millisecond)
		require.NoError(t, err)
		time.Sleep(50 * time.Millisecond)
		assert.False(t, lease.Valid(time.Now()), "past Until")
		_, err = b.Acquire(ctx, key(t), time.Minute)
		require.ErrorIs(t, err, locklab.ErrNotAcquired, "the lock does not end at Until")
		require.NoError(t, a.Release(ctx, lease), "and it is still the holder's to release")
	})
}

func TestBadInput(t *testing.T) {
	pool := sharedPool(t)
	var nilPool *pgxpool.Pool
	redisPool := locklab.NewPool("127.0.0.1:1")
	defer redisPool.Close()
	forEach(t, names, func(t *testing.T, name string) {
		ctx := context.Background()
		for _, cfg := range []locklab.Config{
			{},
			{Store: nilPool},
			{Store: "postgres://x"},
			{Store: pool, Pool: redisPool},
			{Store: pool, Nodes: []locklab.ConnSource{redisPool}},
			{Store: pool, Notify: true},
			{Store: pool, DriftFactor: 0.1},
		} {
			_, err := strategies.New(name, cfg)
			require.ErrorIs(t, err, locklab.ErrInvalid, "%+v", cfg)
			assert.Contains(t, err.Error(), name)
		}
		l := newLocker(t, name, locklab.Config{Store: pool})
		_, err := l.Acquire(ctx, "", time.Second)
		require.ErrorIs(t, err, locklab.ErrInvalid, "empty key")
		for _, ttl := range []time.Duration{0, -time.Second, time.Microsecond} {
			_, err = l.Acquire(ctx, key(t), ttl)
			require.ErrorIs(t, err, locklab.ErrInvalid, "ttl %v", ttl)
		}
		require.ErrorIs(t, l.Release(ctx, locklab.Lease{}), locklab.ErrInvalid)
		if name != "pg-advisory" { // the advisory lock hashes the key: any bytes do
			for _, k := range []string{"a\x00b", "\xff"} {
				_, err = l.Acquire(ctx, k, time.Second)
				require.ErrorIs(t, err, locklab.ErrInvalid, "key %q", k)
			}
		}
		var nilCtx context.Context // a nil context is bad input
		_, err = l.Acquire(nilCtx, key(t), time.Second)
		require.ErrorIs(t, err, locklab.ErrInvalid)
	})
	// The typed constructors say what they need.
	_, err := pglock.NewAdvisory(locklab.Config{Store: 1})
	require.ErrorIs(t, err, locklab.ErrInvalid)
	assert.Contains(t, err.Error(), "*pgxpool.Pool")
}

func TestContextCancelled(t *testing.T) {
	pool := sharedPool(t)
	forEach(t, names, func(t *testing.T, name string) {
		cfg := locklab.Config{Store: pool}
		l, other := newLocker(t, name, cfg), newLocker(t, name, cfg)
		k := key(t)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, err := l.Acquire(ctx, k, time.Minute)
		require.ErrorIs(t, err, context.Canceled)
		require.ErrorIs(t, err, locklab.ErrUnavailable)
		lease, err := other.Acquire(context.Background(), k, time.Minute)
		require.NoError(t, err, "a cancelled acquire takes nothing")
		err = other.Release(ctx, lease)
		require.ErrorIs(t, err, context.Canceled)
		require.ErrorIs(t, err, locklab.ErrUnavailable)
		require.NoError(t, other.Release(context.Background(), lease), "a release refused for its context changed nothing")
	})
}
