package pglock_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
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
	"github.com/locklab/locklab/stores/postgres/pgproc/pgtest"
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

// TestClientCrash: a session lock goes away with its client's connection;
// the lock table's row stays until it expires.
func TestClientCrash(t *testing.T) {
	pool := sharedPool(t)
	forEach(t, sessionNames, func(t *testing.T, name string) {
		ctx := context.Background()
		cfg := locklab.Config{Store: pool}
		a := newLocker(t, name, cfg).(sessionLocker)
		b := newLocker(t, name, cfg)
		k := key(t)
		_, err := a.Acquire(ctx, k, time.Hour)
		require.NoError(t, err)
		_, err = b.Acquire(ctx, k, time.Hour)
		require.ErrorIs(t, err, locklab.ErrNotAcquired)
		require.NoError(t, a.Close()) // the client's process dies: its connections close
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		began := time.Now()
		lease, err := locklab.Wait(wctx, b, k, time.Hour, locklab.RetryPolicy{Initial: time.Millisecond, Max: 20 * time.Millisecond})
		require.NoError(t, err, "the crashed client's lock must go with its connection")
		t.Logf("%s: free %v after the crash", name, time.Since(began).Round(time.Millisecond))
		require.NoError(t, b.Release(ctx, lease))
	})
	t.Run("pg-lock-table", func(t *testing.T) {
		ctx := context.Background()
		clk := newClock()
		cfg := locklab.Config{Store: pool, Clock: clk}
		k := key(t)
		_, err := newLocker(t, "pg-lock-table", cfg).Acquire(ctx, k, time.Minute)
		require.NoError(t, err) // and its client is never heard of again
		b := newLocker(t, "pg-lock-table", cfg)
		clk.Advance(59 * time.Second)
		_, err = b.Acquire(ctx, k, time.Minute)
		require.ErrorIs(t, err, locklab.ErrNotAcquired, "the row stays until it expires")
		var n int
		require.NoError(t, pool.QueryRow(ctx, "SELECT count(*) FROM "+pglock.LockTableName+" WHERE key = $1", k).Scan(&n))
		assert.Equal(t, 1, n, "the crashed holder's row is there")
		clk.Advance(2 * time.Second)
		lease, err := b.Acquire(ctx, k, time.Minute)
		require.NoError(t, err, "an expired row is recovered")
		require.NoError(t, b.Release(ctx, lease))
	})
}

// TestReleaseOfLostLease: a session the server ended took its lock with
// it; the holder's release says so and leaves the successor's lock alone.
// The lock table's blind DELETE instead removes the successor's row.
func TestReleaseOfLostLease(t *testing.T) {
	pool := sharedPool(t)
	forEach(t, sessionNames, func(t *testing.T, name string) {
		ctx := context.Background()
		cfg := locklab.Config{Store: pool}
		a := newLocker(t, name, cfg).(sessionLocker)
		b, c := newLocker(t, name, cfg), newLocker(t, name, cfg)
		k := key(t)
		stale, err := a.Acquire(ctx, k, time.Hour)
		require.NoError(t, err)
		pid, ok := a.Backend(stale)
		require.True(t, ok)
		require.NoError(t, shared.s.KillBackend(ctx, int(pid)))
		bl, err := b.Acquire(ctx, k, time.Hour)
		require.NoError(t, err, "the lock went with the ended session")

		require.ErrorIs(t, a.Release(ctx, stale), locklab.ErrNotHeld)
		_, err = c.Acquire(ctx, k, time.Hour)
		require.ErrorIs(t, err, locklab.ErrNotAcquired, "the successor's lock survives the stale release")
		require.ErrorIs(t, c.Release(ctx, bl), locklab.ErrNotHeld, "a lease is released by the Locker that holds it")
		_, ok = a.Backend(stale)
		assert.False(t, ok)
		require.NoError(t, b.Release(ctx, bl))
		require.ErrorIs(t, a.Release(ctx, locklab.Lease{}), locklab.ErrInvalid, "zero lease")
	})
	t.Run("pg-lock-table", func(t *testing.T) {
		ctx := context.Background()
		clk := newClock()
		cfg := locklab.Config{Store: pool, Clock: clk}
		a, b, c := newLocker(t, "pg-lock-table", cfg), newLocker(t, "pg-lock-table", cfg), newLocker(t, "pg-lock-table", cfg)
		k := key(t)
		stale, err := a.Acquire(ctx, k, time.Second)
		require.NoError(t, err)
		clk.Advance(2 * time.Second)
		_, err = b.Acquire(ctx, k, time.Minute)
		require.NoError(t, err, "b recovers the expired row")
		require.NoError(t, a.Release(ctx, stale), "expected weakness: the blind DELETE reports success")
		cl, err := c.Acquire(ctx, k, time.Minute)
		require.NoError(t, err, "expected weakness: a's stale release deleted b's row, so c holds the lock beside b")
		require.NoError(t, c.Release(ctx, cl))
		require.ErrorIs(t, c.Release(ctx, cl), locklab.ErrNotHeld, "no row: not held")
	})
}

// TestLockTableClockSkew: a client whose clock runs ahead finds a live row
// expired, deletes it and takes the lock beside its holder.
func TestLockTableClockSkew(t *testing.T) {
	pool := sharedPool(t)
	ctx := context.Background()
	clk, ahead := newClock(), newClock()
	ahead.Advance(2 * time.Minute)
	a := newLocker(t, "pg-lock-table", locklab.Config{Store: pool, Clock: clk})
	b := newLocker(t, "pg-lock-table", locklab.Config{Store: pool, Clock: ahead})
	k := key(t)
	la, err := a.Acquire(ctx, k, time.Minute)
	require.NoError(t, err)
	assert.True(t, la.Valid(clk.Now()), "a's lease is valid by a's clock")
	lb, err := b.Acquire(ctx, k, time.Minute)
	require.NoError(t, err, "expected weakness: b's clock says a's row expired")
	require.NoError(t, b.Release(ctx, lb))
}

// TestLockTableRecreated: a table dropped under a Locker is created again
// on the next attempt after the one that found it missing.
func TestLockTableRecreated(t *testing.T) {
	pool := sharedPool(t)
	ctx := context.Background()
	for _, c := range []struct{ name, table string }{{"pg-lock-table", pglock.LockTableName}, {"pg-for-update", pglock.RowTableName}} {
		t.Run(c.name, func(t *testing.T) {
			l := newLocker(t, c.name, locklab.Config{Store: pool})
			lease, err := l.Acquire(ctx, key(t), time.Minute)
			require.NoError(t, err)
			require.NoError(t, l.Release(ctx, lease))
			_, err = pool.Exec(ctx, "DROP TABLE "+c.table)
			require.NoError(t, err)
			_, err = l.Acquire(ctx, key(t), time.Minute)
			require.ErrorIs(t, err, locklab.ErrUnavailable, "the table is gone")
			lease, err = l.Acquire(ctx, key(t), time.Minute)
			require.NoError(t, err, "and is created again")
			require.NoError(t, l.Release(ctx, lease))
		})
	}
}

// TestOwnTablesOnly: the strategies create no table outside their prefix.
func TestOwnTablesOnly(t *testing.T) {
	pool := sharedPool(t)
	ctx := context.Background()
	for _, n := range names {
		l := newLocker(t, n, locklab.Config{Store: pool})
		lease, err := l.Acquire(ctx, key(t)+n, time.Minute)
		require.NoError(t, err)
		require.NoError(t, l.Release(ctx, lease))
	}
	rows, err := pool.Query(ctx, "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'")
	require.NoError(t, err)
	var tables []string
	for rows.Next() {
		var s string
		require.NoError(t, rows.Scan(&s))
		tables = append(tables, s)
	}
	require.NoError(t, rows.Err())
	assert.ElementsMatch(t, []string{pglock.LockTableName, pglock.RowTableName}, tables)
	for _, tb := range tables {
		assert.True(t, strings.HasPrefix(tb, pglock.TablePrefix), tb)
	}
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

// TestPausedServer: with the server frozen, an acquire ends with its
// context, as ErrUnavailable; a session lock whose acquire gave up does
// not stay taken once the server runs again.
func TestPausedServer(t *testing.T) {
	s := pgtest.Start(t, pgproc.Options{})
	pool := pgtest.Pool(t, s, poolParams)
	forEach(t, names, func(t *testing.T, name string) {
		cfg := locklab.Config{Store: pool}
		l, other := newLocker(t, name, cfg), newLocker(t, name, cfg)
		k := key(t)
		warm, err := l.Acquire(context.Background(), k+":warm", time.Minute) // the table and a connection exist
		require.NoError(t, err)
		require.NoError(t, l.Release(context.Background(), warm))

		require.NoError(t, s.Stop())
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		began := time.Now()
		_, err = l.Acquire(ctx, k, time.Minute)
		cancel()
		took := time.Since(began)
		require.NoError(t, s.Cont())
		require.ErrorIs(t, err, locklab.ErrUnavailable)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Less(t, took, 5*time.Second, "the acquire must end with its context")
		if name == "pg-lock-table" {
			return // the INSERT may have run once the server woke: the row then stays until it expires
		}
		wctx, wcancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer wcancel()
		lease, err := locklab.Wait(wctx, other, k, time.Minute, locklab.RetryPolicy{Initial: time.Millisecond, Max: 20 * time.Millisecond})
		require.NoError(t, err, "the abandoned attempt's session ends, and any lock it took")
		require.NoError(t, other.Release(context.Background(), lease))
	})
}

func TestUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	pool, err := pgxpool.New(context.Background(), "postgres://locklab@"+addr+"/postgres?sslmode=disable")
	require.NoError(t, err)
	defer pool.Close()
	forEach(t, names, func(t *testing.T, name string) {
		l := newLocker(t, name, locklab.Config{Store: pool})
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, err := l.Acquire(ctx, key(t), time.Second)
		require.ErrorIs(t, err, locklab.ErrUnavailable)
		assert.NotErrorIs(t, err, locklab.ErrNotAcquired)
		require.NoError(t, ctx.Err(), "an unreachable server must fail fast, not hang")
	})
}

// race runs n acquires of k at once, one per Locker, and counts the
// winners; any error but ErrNotAcquired fails the test.
func race(t *testing.T, lockers []locklab.Locker, k string) int {
	t.Helper()
	var (
		wg      sync.WaitGroup
		start   = make(chan struct{})
		winners atomic.Int32
		mu      sync.Mutex
		other   []error
	)
	for _, l := range lockers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			_, err := l.Acquire(context.Background(), k, time.Minute)
			switch {
			case err == nil:
				winners.Add(1)
			case !errors.Is(err, locklab.ErrNotAcquired):
				mu.Lock()
				other = append(other, err)
				mu.Unlock()
			}
		}()
	}
	close(start)
	wg.Wait()
	require.Empty(t, other, "only ErrNotAcquired is expected from the losers")
	return int(winners.Load())
}

// TestRace20: 20 clients race for a free key; exactly one wins. The lock
// table's recovery is raced too: 20 clients find the same expired row,
// and exactly one takes the lock.
func TestRace20(t *testing.T) {
	pool := sharedPool(t)
	forEach(t, names, func(t *testing.T, name string) {
		clk := newClock()
		lockers := make([]locklab.Locker, 20)
		for i := range lockers {
			lockers[i] = newLocker(t, name, locklab.Config{Store: pool, Clock: clk})
		}
		require.Equal(t, 1, race(t, lockers, key(t)), "exactly one of 20 wins a free key")
		if name == "pg-lock-table" {
			clk.Advance(2 * time.Minute)
			require.Equal(t, 1, race(t, lockers, key(t)), "exactly one of 20 recovers an expired row")
		}
	})
}

// TestFailover: locks held on a primary that dies, and a standby that had
// replayed everything promoted in its place. The session locks are
// forgotten there; the lock table's row, being data, is not.
func TestFailover(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	primary := pgtest.Start(t, pgproc.Options{})
	ppool := pgtest.Pool(t, primary, poolParams)
	standby := pgtest.StartStandby(t, primary, pgproc.Options{})

	held := map[string]locklab.Lease{}
	holders := map[string]locklab.Locker{}
	for _, n := range names {
		holders[n] = newLocker(t, n, locklab.Config{Store: ppool})
		lease, err := holders[n].Acquire(ctx, "orders:42", time.Hour)
		require.NoError(t, err, n)
		held[n] = lease
	}
	require.NoError(t, standby.WaitReplayed(ctx, primary))
	primary.KillPostmaster()
	require.NoError(t, standby.Promote(ctx))

	spool := pgtest.Pool(t, standby, poolParams)
	for _, n := range names {
		l := newLocker(t, n, locklab.Config{Store: spool})
		lease, err := l.Acquire(ctx, "orders:42", time.Hour)
		if n == "pg-lock-table" {
			require.ErrorIs(t, err, locklab.ErrNotAcquired, "%s: the replicated row survives the failover", n)
			continue
		}
		require.NoError(t, err, "%s: the promoted standby has forgotten the primary's lock: two holders", n)
		require.ErrorIs(t, holders[n].Release(ctx, held[n]), locklab.ErrNotHeld, "%s: the old holder's session died with the primary", n)
		require.NoError(t, l.Release(ctx, lease))
	}
}

// BenchmarkCycle measures one uncontended acquire+release per strategy,
// next to a SELECT 1 round trip through the same pool: the floor. Compare
// ratios within one run: pg-advisory's and pg-lock-table's cycles are two
// round trips (target: at most 3x the floor), pg-for-update's four
// (INSERT, BEGIN, SELECT ... FOR UPDATE, COMMIT; target: at most 5x).
func BenchmarkCycle(b *testing.B) {
	s := pgtest.Start(b, pgproc.Options{})
	pool := pgtest.Pool(b, s, poolParams)
	ctx := context.Background()
	b.Run("select-1", func(b *testing.B) {
		for b.Loop() {
			var one int
			if err := pool.QueryRow(ctx, "SELECT 1").Scan(&one); err != nil {
				b.Fatal(err)
			}
		}
	})
	for _, n := range names {
		b.Run(n, func(b *testing.B) {
			l, err := strategies.New(n, locklab.Config{Store: pool})
			if err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				lease, err := l.Acquire(ctx, "bench", time.Minute)
				if err != nil {
					b.Fatal(err)
				}
				if err := l.Release(ctx, lease); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestFirstAcquiresCreateTheTableTogether: on a server where the strategy's
// table does not exist yet, many clients' first acquires create it at the
// same moment. The catalog collisions that brings (a duplicate type, table
// or object) are not failures: every acquire is taken or refused.
func TestFirstAcquiresCreateTheTableTogether(t *testing.T) {
	s := pgtest.Start(t, pgproc.Options{})
	pool := pgtest.Pool(t, s, poolParams)
	for _, name := range []string{"pg-lock-table", "pg-for-update"} {
		for round := range 5 {
			for _, table := range []string{pglock.LockTableName, pglock.RowTableName} {
				_, err := pool.Exec(context.Background(), "DROP TABLE IF EXISTS "+table)
				require.NoError(t, err)
			}
			var wg sync.WaitGroup
			errs := make(chan error, 16)
			for i := range 16 {
				l := newLocker(t, name, locklab.Config{Store: pool})
				wg.Go(func() {
					lease, err := l.Acquire(context.Background(), fmt.Sprintf("first:%d:%d", round, i), time.Minute)
					if err == nil {
						err = l.Release(context.Background(), lease)
					}
					if err != nil && !errors.Is(err, locklab.ErrNotAcquired) {
						errs <- err
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Errorf("%s, round %d: %v", name, round, err)
			}
		}
	}
}
