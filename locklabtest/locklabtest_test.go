package locklabtest_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/gomodule/redigo/redis"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/harness"
	"github.com/locklab/locklab/internal/tooling/redistest"
	"github.com/locklab/locklab/locklabtest"
	"github.com/locklab/locklab/stores"
	"github.com/locklab/locklab/stores/etcd"
	"github.com/locklab/locklab/stores/postgres"
	"github.com/locklab/locklab/stores/zookeeper"
	"github.com/locklab/locklab/strategies"
	_ "github.com/locklab/locklab/strategies/setnxex" // the locks these tests copy
)

// recorder is a testing.TB that keeps the failures Run reports instead of
// failing the test that runs it.
type recorder struct {
	testing.TB
	mu    sync.Mutex
	errs  []string
	fatal bool
}

func (r *recorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

func (r *recorder) Fatalf(format string, args ...any) {
	r.Errorf(format, args...)
	r.mu.Lock()
	r.fatal = true
	r.mu.Unlock()
	runtime.Goexit()
}

// run calls locklabtest.Run with a recorder, and returns what it reported.
func run(t *testing.T, d strategies.Description, f strategies.Factory, opts ...locklabtest.Option) (*harness.MatrixResult, []string, bool) {
	r := &recorder{TB: t}
	var m *harness.MatrixResult
	done := make(chan struct{})
	go func() {
		defer close(done)
		m = locklabtest.Run(r, d, f, opts...)
	}()
	<-done
	return m, r.errs, r.fatal
}

// mine is the built-in lock name as a lock of the user's own, under a
// name of its own.
func mine(t *testing.T, builtin, name string) (strategies.Description, strategies.Factory) {
	d, f, err := strategies.Lookup(builtin)
	require.NoError(t, err)
	d.Name = name
	return d, f
}

// TestBrokenLockFails: a lock that deletes blindly on release (set-nx-px-
// del, as a user would write it) fails release-after-expiry with the
// counterexample's timeline; pinned with ExpectViolation, it passes.
func TestBrokenLockFails(t *testing.T) {
	d, f := mine(t, "set-nx-px-del", "mine-blind-del")
	m, errs, fatal := run(t, d, f, locklabtest.Scenarios("release-after-expiry"))
	require.False(t, fatal, "%v", errs)
	require.Len(t, errs, 1)
	assert.Contains(t, errs[0], "release-after-expiry: VIOLATED")
	assert.Contains(t, errs[0], "release-after-expiry on mine-blind-del", "the timeline")
	assert.Contains(t, errs[0], "replay: locklabtest.Replay(t, d, f, \"release-after-expiry\", ")
	c, ok := m.Cell("mine-blind-del", "release-after-expiry")
	require.True(t, ok)
	assert.Equal(t, harness.Violated, c.Outcome)

	// The replay the failure names runs the counterexample again.
	h := locklabtest.Replay(t, d, f, "release-after-expiry", c.Schedule)
	assert.Equal(t, harness.Violated, h.Verdict.Outcome)
	assert.Equal(t, c.Schedule, h.Schedule[:len(c.Schedule)])

	_, errs, _ = run(t, d, f, locklabtest.Scenarios("release-after-expiry"), locklabtest.ExpectViolation("release-after-expiry"))
	assert.Empty(t, errs, "a violation expected is no failure")
}

// TestScenarioOfOnesOwn: With runs a scenario beside the catalog's, and
// beside those Scenarios names; its failure names the replay with With,
// which runs the counterexample again; a scenario that cannot run, or
// that takes a catalog's name, ends the run with the reason.
func TestScenarioOfOnesOwn(t *testing.T) {
	d, f := mine(t, "set-nx-px-del", "mine-blind-del-own")
	retrying := &harness.Scenario{
		Name:      "mine-release-after-expiry-retrying",
		Title:     "a late release against a waiter that tries three times",
		Property:  harness.ReleaseSafety,
		Programs:  harness.MustPrograms("acquire write release", "acquire*3 write release"),
		Faults:    []string{"time"},
		MaxFaults: 1,
	}
	m, errs, fatal := run(t, d, f, locklabtest.Scenarios("crash-before-expire"), locklabtest.With(retrying))
	require.False(t, fatal, "%v", errs)
	require.Len(t, errs, 1, "%v", errs)
	assert.Contains(t, errs[0], retrying.Name+": VIOLATED (release)")
	assert.Contains(t, errs[0], fmt.Sprintf("replay: locklabtest.Replay(t, d, f, %q, ", retrying.Name))
	assert.Contains(t, errs[0], ", locklabtest.With(sc))")
	c, ok := m.Cell(d.Name, retrying.Name)
	require.True(t, ok)
	other, ok := m.Cell(d.Name, "crash-before-expire")
	require.True(t, ok, "the catalog's scenario named ran too")
	assert.Equal(t, harness.Safe, other.Outcome)
	assert.Len(t, m.Cells, 2)

	h := locklabtest.Replay(t, d, f, retrying.Name, c.Schedule, locklabtest.With(retrying))
	assert.Equal(t, harness.Violated, h.Verdict.Outcome)

	_, errs, _ = run(t, d, f, locklabtest.With(retrying), locklabtest.Scenarios("release-after-expiry"),
		locklabtest.ExpectViolation("release-after-expiry", retrying.Name))
	assert.Empty(t, errs, "a violation expected in one's own scenario is no failure")

	taken := *retrying
	taken.Name = "stale-recovery"
	_, errs, fatal = run(t, d, f, locklabtest.With(&taken))
	assert.True(t, fatal)
	require.Len(t, errs, 1)
	assert.Contains(t, errs[0], `scenario "stale-recovery" is the catalog's`)
}

// TestSoundLockPasses: a lock that releases with a compare-and-delete
// (set-nx-px) survives release-after-expiry; a violation expected there
// fails the test, as one that does not apply does.
func TestSoundLockPasses(t *testing.T) {
	d, f := mine(t, "set-nx-px", "mine-token")
	m, errs, _ := run(t, d, f, locklabtest.Scenarios("release-after-expiry", "redlock-restart"))
	assert.Empty(t, errs)
	c, _ := m.Cell("mine-token", "release-after-expiry")
	assert.Equal(t, harness.Safe, c.Outcome)
	assert.Positive(t, c.Schedules)

	_, errs, _ = run(t, d, f, locklabtest.Scenarios("release-after-expiry"), locklabtest.ExpectViolation("release-after-expiry", "redlock-restart"))
	require.Len(t, errs, 2, "%v", errs)
	assert.Contains(t, errs[0], "release-after-expiry: expected a violation, found none")
	assert.Contains(t, errs[1], "redlock-restart: expected a violation, but the scenario does not apply")
}

// TestBadInput: a scenario locklab does not know, a name taken, a nil
// factory, a factory that fails or gives a nil Locker: each ends the run
// with an error that says which.
func TestBadInput(t *testing.T) {
	d, f := mine(t, "set-nx-px", "mine-token")
	boom := func(locklab.Config) (locklab.Locker, error) { return nil, errors.New("boom: no such pool") }
	nothing := func(locklab.Config) (locklab.Locker, error) { return nil, nil }
	panicky := func(locklab.Config) (locklab.Locker, error) { panic("boom: factory") }
	panicsInRelease := func(cfg locklab.Config) (locklab.Locker, error) {
		l, err := f(cfg)
		return releasePanics{l}, err
	}
	builtin, _ := mine(t, "set-nx-px", "set-nx-px")
	named := func(name string) strategies.Description { d := d; d.Name = name; return d }
	for _, tc := range []struct {
		d    strategies.Description
		f    strategies.Factory
		opts []locklabtest.Option
		want string
	}{
		{d, f, []locklabtest.Option{locklabtest.Scenarios("no-such-scenario")}, "no-such-scenario"},
		{builtin, f, nil, `a strategy named "set-nx-px" is registered already`},
		{named("mine-nil-factory"), nil, nil, "mine-nil-factory: nil factory"},
		{named("mine-boom"), boom, []locklabtest.Option{locklabtest.Scenarios("release-after-expiry")}, "boom: no such pool"},
		{named("mine-nil-locker"), nothing, []locklabtest.Option{locklabtest.Scenarios("release-after-expiry")},
			"mine-nil-locker's factory returned a nil Locker and no error"},
		{named("mine-panicky-factory"), panicky, []locklabtest.Option{locklabtest.Scenarios("release-after-expiry")},
			"c1: the strategy panicked: boom: factory"},
		{named("mine-panics-in-release"), panicsInRelease, []locklabtest.Option{locklabtest.Scenarios("release-after-expiry")},
			"the strategy panicked: boom: release"},
	} {
		_, errs, fatal := run(t, tc.d, tc.f, tc.opts...)
		require.True(t, fatal, "%s: %v", tc.d.Name, errs)
		require.Len(t, errs, 1)
		assert.True(t, strings.Contains(errs[0], tc.want), "%s: %s", tc.d.Name, errs[0])
	}
}

// releasePanics is a lock whose Release panics.
type releasePanics struct{ locklab.Locker }

func (releasePanics) Release(context.Context, locklab.Lease) error { panic("boom: release") }

// TestOwnClientIsSaid: a lock that talks to Redis through a client of its
// own, not the connections its factory is given, is never scheduled: Run
// says so rather than let its verdicts pass for a finding.
func TestOwnClientIsSaid(t *testing.T) {
	own := redistest.StartOne(t)
	d, _ := mine(t, "set-nx-px", "mine-own-client")
	f := func(locklab.Config) (locklab.Locker, error) {
		return strategies.New("set-nx-px", locklab.Config{Pool: own.Pool})
	}
	_, errs, _ := run(t, d, f, locklabtest.Scenarios("release-after-expiry"))
	require.NotEmpty(t, errs)
	assert.Contains(t, errs[len(errs)-1], "sent no command through the connections its factory was given")

	// Registered already, run again (as with -count=2): still counted.
	d2, f2 := mine(t, "set-nx-px", "mine-twice")
	for range 2 {
		_, errs, _ := run(t, d2, f2, locklabtest.Scenarios("release-after-expiry"))
		assert.Empty(t, errs)
	}
}

// TestOtherStore: a lock whose family is etcd's runs on a throwaway etcd
// cluster, its factory given the store's client (its Description lists
// no OptStore: Run adds it): etcd's lease lock, as a
// user would copy it, survives release-after-expiry and loses
// pause-past-ttl, as the matrix says of etcd-lease.
func TestOtherStore(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an etcd cluster")
	}
	if err := stores.Installed(etcd.Name); err != nil {
		t.Skip(err)
	}
	d, f := mine(t, "etcd-lease", "mine-etcd-lease")
	// A user's Description need not list OptStore: Run adds it.
	d.Options = nil
	m, errs, fatal := run(t, d, f, locklabtest.Scenarios("release-after-expiry", "pause-past-ttl"),
		locklabtest.ExpectViolation("pause-past-ttl"))
	require.False(t, fatal, "%v", errs)
	assert.Empty(t, errs)
	c, _ := m.Cell("mine-etcd-lease", "release-after-expiry")
	assert.Equal(t, harness.Safe, c.Outcome)
}

// asideRelease is set-nx-px with a release sent through a client of its
// own beside the pool it was given, to the same server, whose address it
// reads through that pool (CONFIG GET port, a scheduled step): on a pool
// every lock shares, as a client kept in a global would be (own), or on
// a connection dialled for the release and closed at once (own nil).
type asideRelease struct {
	locklab.Locker
	pool locklab.ConnSource
	own  *sharedPool
}

// sharedPool is one pool on the address its first user reads.
type sharedPool struct {
	mu sync.Mutex
	p  *redis.Pool
}

func (s *sharedPool) get(ctx context.Context, addr string) (redis.Conn, error) {
	s.mu.Lock()
	if s.p == nil {
		s.p = &redis.Pool{MaxIdle: 4, DialContext: func(ctx context.Context) (redis.Conn, error) { return redis.DialContext(ctx, "tcp", addr) }}
	}
	p := s.p
	s.mu.Unlock()
	return p.GetContext(ctx)
}

func (l *asideRelease) Release(ctx context.Context, lease locklab.Lease) error {
	c, err := l.pool.GetContext(ctx)
	if err != nil {
		return err
	}
	port, err := redis.Strings(redis.DoContext(c, ctx, "CONFIG", "GET", "port"))
	c.Close()
	if err != nil {
		return err
	}
	addr := "127.0.0.1:" + port[1]
	var own redis.Conn
	if l.own != nil {
		own, err = l.own.get(ctx, addr)
	} else {
		own, err = redis.DialContext(ctx, "tcp", addr)
	}
	if err != nil {
		return err
	}
	defer own.Close()
	_, err = redis.DoContext(own, ctx, "DEL", lease.Key)
	return err
}

// TestHiddenClientIsSaid: a lock that acquires through the connections it
// was given and releases through a client of its own, on the same
// server, fails the run, whether that client keeps its connections open
// (a second pool: CLIENT LIST shows them at the end) or dials one for each
// release and closes it (the server's count of the connections it
// accepted, against the harness's named ones, shows it).
func TestHiddenClientIsSaid(t *testing.T) {
	for _, tc := range []struct {
		name, want string
		shared     bool
	}{
		{"mine-second-pool", `holds \d+ open: 127\.0\.0\.1:\d+ name="" cmd=del`, true},
		{"mine-dial-each", `accepted \d+ connection\(s\) the harness did not open`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, f := mine(t, "set-nx-px", tc.name)
			var own *sharedPool
			if tc.shared {
				own = &sharedPool{}
				t.Cleanup(func() {
					if own.p != nil {
						own.p.Close()
					}
				})
			}
			aside := func(cfg locklab.Config) (locklab.Locker, error) {
				l, err := f(cfg)
				return &asideRelease{Locker: l, pool: cfg.Pool, own: own}, err
			}
			// The harness may find the run broken first (a step the
			// schedule named never came: the release's DEL was not one),
			// or not; either way the audit says why.
			_, errs, _ := run(t, d, aside, locklabtest.Scenarios("release-after-expiry"))
			require.NotEmpty(t, errs)
			t.Log(errs[0])
			assert.Contains(t, errs[0], tc.name+" talked to Redis through a client of its own")
			assert.Regexp(t, `n\d \(127\.0\.0\.1:\d+\) .*`+tc.want, errs[0])
		})
	}
}

// TestNoHiddenClientOnEveryScenario: a lock that sends everything through
// the connections it was given passes the audit in every scenario of the
// catalog that applies to it, the ones that restart, kill, fail over and
// cut off its servers included: every connection the harness opens says
// whose it is.
func TestNoHiddenClientOnEveryScenario(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the whole catalog on one lock")
	}
	for _, lock := range []string{"set-nx-px", "redlock"} {
		d, f := mine(t, lock, "mine-audited-"+lock)
		m, errs, fatal := run(t, d, f)
		require.False(t, fatal, "%v", errs)
		for _, e := range errs {
			assert.NotContains(t, e, "client of its own", lock)
		}
		assert.Greater(t, len(m.Cells), 5)
	}
}

// lateRelease is set-nx-px whose Release returns at once and leaves its
// DEL to a goroutine, which sends it through the pool it was given once
// another lock of the test calls Acquire (next): after the releasing
// client's program has ended.
type lateRelease struct {
	locklab.Locker
	pool locklab.ConnSource
	next *acquires
}

// acquires wakes the goroutines waiting for the next Acquire.
type acquires struct {
	mu      sync.Mutex
	waiting []chan struct{}
}

func (a *acquires) wait() <-chan struct{} {
	a.mu.Lock()
	defer a.mu.Unlock()
	ch := make(chan struct{})
	a.waiting = append(a.waiting, ch)
	return ch
}

func (a *acquires) wake() {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, ch := range a.waiting {
		close(ch)
	}
	a.waiting = nil
}

func (l *lateRelease) Acquire(ctx context.Context, key string, ttl time.Duration) (locklab.Lease, error) {
	l.next.wake()
	return l.Locker.Acquire(ctx, key, ttl)
}

func (l *lateRelease) Release(ctx context.Context, lease locklab.Lease) error {
	next := l.next.wait()
	go func() {
		select {
		case <-next:
		case <-ctx.Done():
			return
		}
		c, err := l.pool.GetContext(ctx)
		if err != nil {
			return
		}
		defer c.Close()
		_, _ = redis.DoContext(c, ctx, "DEL", lease.Key)
	}()
	return nil
}

// TestLateGoroutineIsSaid: a lock whose release goes on in a goroutine
// after Release returned sends its DEL when no call of its client runs;
// the run fails saying so, whichever comes first, the client's program
// ending or the DEL.
func TestLateGoroutineIsSaid(t *testing.T) {
	d, f := mine(t, "set-nx-px", "mine-late-release")
	next := &acquires{}
	late := func(cfg locklab.Config) (locklab.Locker, error) {
		l, err := f(cfg)
		return &lateRelease{Locker: l, pool: cfg.Pool, next: next}, err
	}
	_, errs, fatal := run(t, d, late, locklabtest.Scenarios("stale-recovery"))
	require.True(t, fatal, "%v", errs)
	t.Log(errs[0])
	assert.Contains(t, errs[0], "a request the run could not schedule")
	assert.Regexp(t, `c\d sent DEL \S+ after its program had ended: a goroutine of the lock outlived the call that started it`, errs[0])
}

// TestHiddenPoolIsSaidOnPostgres: pg-advisory copied as a lock of one's
// own, which also keeps a pool of its own, made from the connection
// string of the pool it was given (as a lock that keeps a session for its
// advisory locks might), and runs a statement there on each release:
// PostgreSQL's pg_stat_activity shows that pool's backend, which the
// harness did not open, and the run fails saying so.
func TestHiddenPoolIsSaidOnPostgres(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a PostgreSQL server")
	}
	if err := stores.Installed(postgres.Name); err != nil {
		t.Skip(err)
	}
	// The lock as it is, first: the audit finds none of the harness's
	// own sessions (each named locklab), a restart's included.
	plain, pf := mine(t, "pg-advisory", "mine-pg-advisory")
	_, errs, fatal := run(t, plain, pf, locklabtest.Scenarios("release-after-expiry", "restart-loses-lock"))
	require.False(t, fatal, "%v", errs)
	for _, e := range errs {
		assert.NotContains(t, e, "client of its own")
	}

	d, f := mine(t, "pg-advisory", "mine-pg-second-pool")
	var mu sync.Mutex
	var own *pgxpool.Pool
	t.Cleanup(func() {
		if own != nil {
			own.Close()
		}
	})
	aside := func(cfg locklab.Config) (locklab.Locker, error) {
		l, err := f(cfg)
		if err != nil {
			return nil, err
		}
		given := cfg.Store.(*pgxpool.Pool)
		return releaseAside{Locker: l, own: func(ctx context.Context) (*pgxpool.Pool, error) {
			mu.Lock()
			defer mu.Unlock()
			if own == nil {
				p, err := pgxpool.New(ctx, given.Config().ConnString())
				if err != nil {
					return nil, err
				}
				own = p
			}
			return own, nil
		}}, nil
	}
	_, errs, _ = run(t, d, aside, locklabtest.Scenarios("release-after-expiry"))
	require.NotEmpty(t, errs)
	t.Log(errs[0])
	assert.Contains(t, errs[0], "mine-pg-second-pool talked to PostgreSQL through a client of its own beside the one its factory was given (Config.Store)")
	assert.Regexp(t, `n1 \(127\.0\.0\.1:\d+\) has \d+ client backend\(s\) the harness did not open: pid \d+ application_name="" idle: SELECT 1`, errs[0])
}

// releaseAside runs a statement on a pool of its own before each release.
type releaseAside struct {
	locklab.Locker
	own func(context.Context) (*pgxpool.Pool, error)
}

func (l releaseAside) Release(ctx context.Context, lease locklab.Lease) error {
	if p, err := l.own(ctx); err == nil {
		_, _ = p.Exec(ctx, "SELECT 1")
	}
	return l.Locker.Release(ctx, lease)
}

// TestHiddenSessionIsSaidOnZooKeeper: zk-ephemeral copied as a lock of
// one's own passes the servers' audit (the sessions the harness's
// connections were given, the ones opened after an expiry included, are
// known by their ids); the same lock that also keeps a *zk.Conn of its
// own, to the server the connection it was given is on, and sends a
// request there on each release fails the run: that server holds the
// session of a connection the harness did not open.
func TestHiddenSessionIsSaidOnZooKeeper(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a ZooKeeper ensemble")
	}
	if err := stores.Installed(zookeeper.Name); err != nil {
		t.Skip(err)
	}
	plain, pf := mine(t, "zk-ephemeral", "mine-zk-ephemeral")
	_, errs, fatal := run(t, plain, pf, locklabtest.Scenarios("release-after-expiry"))
	require.False(t, fatal, "%v", errs)
	for _, e := range errs {
		assert.NotContains(t, e, "client of its own")
	}

	d, f := mine(t, "zk-ephemeral", "mine-zk-own-conn")
	var mu sync.Mutex
	var own *zk.Conn
	t.Cleanup(func() {
		if own != nil {
			own.Close()
		}
	})
	aside := func(cfg locklab.Config) (locklab.Locker, error) {
		l, err := f(cfg)
		if err != nil {
			return nil, err
		}
		given := cfg.Store.(*zk.Conn)
		return zkReleaseAside{Locker: l, own: func() (*zk.Conn, error) {
			mu.Lock()
			defer mu.Unlock()
			if own == nil {
				c, _, err := zk.Connect([]string{given.Server()}, 30*time.Second,
					zk.WithLogger(log.New(io.Discard, "", 0)), zk.WithLogInfo(false))
				if err != nil {
					return nil, err
				}
				own = c
			}
			return own, nil
		}}, nil
	}
	_, errs, _ = run(t, d, aside, locklabtest.Scenarios("release-after-expiry"))
	require.NotEmpty(t, errs)
	t.Log(errs[0])
	assert.Contains(t, errs[0], "mine-zk-own-conn talked to ZooKeeper through a client of its own beside the one its factory was given (Config.Store)")
	assert.Regexp(t, `n1 zk\d \(127\.0\.0\.1:\d+\) holds 1 session\(s\) the harness did not open: 127\.0\.0\.1:\d+ sid=0x[0-9a-f]+ lop=EXIS`, errs[0])
}

// zkReleaseAside asks its own connection whether the root exists before
// each release.
type zkReleaseAside struct {
	locklab.Locker
	own func() (*zk.Conn, error)
}

func (l zkReleaseAside) Release(ctx context.Context, lease locklab.Lease) error {
	if c, err := l.own(); err == nil {
		_, _, _ = c.Exists("/")
	}
	return l.Locker.Release(ctx, lease)
}
