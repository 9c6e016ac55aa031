// Package pglock holds the locks of a relational database, on PostgreSQL
// through pgx: the database locks of the notes "分布式锁 Distributed Lock"
// (section 0, "RMDB 数据库实现分布式锁"), and PostgreSQL's advisory locks.
// Importing the package registers them (family "postgres"):
//
//   - LockTable ("pg-lock-table"): the notes' lock table (基于表): INSERT
//     of the key as primary key, with an expiry column; a row found expired
//     is deleted and the INSERT tried again; release is a DELETE.
//   - ForUpdate ("pg-for-update"): the notes' pessimistic lock (悲观锁): a
//     transaction holds SELECT ... FOR UPDATE NOWAIT on the key's row for
//     the lease; COMMIT releases it.
//   - Advisory ("pg-advisory"): pg_try_advisory_lock on a session held for
//     the lease; pg_advisory_unlock releases it.
//
// A program picks one by name, as any other strategy:
//
//	import _ "github.com/locklab/locklab/strategies/pglock"
//
//	pool, err := pgxpool.New(ctx, "postgres://app@db/app?pool_max_conns=50")
//	lock, err := strategies.New("pg-advisory", locklab.Config{Store: pool})
//
// Every strategy takes a *pgxpool.Pool in Config.Store and refuses
// anything else, and Config.Pool and Config.Nodes, with locklab.ErrInvalid.
// The pool is the caller's: its connection string, its size and TLS are
// the caller's choice, and no strategy closes it. The tables they need
// are created on first use (CREATE TABLE IF NOT EXISTS), under
// TablePrefix; they write no other table. docs/library.md shows a whole
// program (the package's Example).
//
// # Closing
//
// locklab.Close(l) is how a strategy of this package is closed. On
// ForUpdate and Advisory it calls their Close, which closes the pool
// connection of every lease still held, without releasing: the server
// ends those sessions, and their locks with them, as when the client's
// process dies. LockTable holds nothing between calls, and Close does
// nothing to it: a row it holds stays until released or found expired.
// None closes the pool; close it after every Locker built on it.
//
// # Extend
//
// No strategy here extends a lease: locklab.Extend and locklab.Watch
// refuse them with ErrInvalid. The session locks (ForUpdate, Advisory)
// have no TTL: they last as long as their session, and Lease.Until only
// says when the holder meant to be done. Nor do they have a fence:
// Lease.Fence is 0.
//
// ForUpdate and Advisory hold a session: each held lease keeps one of the
// pool's connections (and ForUpdate an open transaction) until Release, so
// the pool must allow as many connections as locks held at once, plus one
// (pool_max_conns; pgxpool's default is the greater of 4 and the number of
// CPUs). Their locks have no TTL: the ttl given to Acquire only sets Lease.Until.
//
// The notes' third database lock, the optimistic version column (乐观锁:
// UPDATE ... SET version = version + 1 WHERE id = ? AND version = ?), is
// not here. It excludes nobody: every client reads the row and works at
// once, and the UPDATE refuses the writes of all but the first. That is a
// fencing resource, the protected data checking a number at each write,
// not a lock; as a Locker its Acquire would never refuse, and the harness
// would report mutual exclusion broken by design. It belongs beside the
// harness's fenced resource, where it can guard any of these locks.
package pglock

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/internal/single"
	"github.com/locklab/locklab/lockkit"
)

// Family is the family of the strategies of this package.
const Family = "postgres"

// TablePrefix starts the name of every table the strategies create.
const TablePrefix = "locklab_"

// The tables: LockTableName holds LockTable's rows (key, token,
// expires_at); RowTableName holds the rows ForUpdate locks, one per key
// ever locked, never deleted.
const (
	LockTableName = TablePrefix + "lock_table"
	RowTableName  = TablePrefix + "lock_rows"
)

// SQLSTATE codes the strategies read.
const (
	codeUniqueViolation = "23505"
	codeLockNotAvail    = "55P03"
	codeDuplicateTable  = "42P07"
	codeDuplicateObject = "42710"
	codeUndefinedTable  = "42P01"
)

// base is what every strategy is built from.
type base struct {
	name   string
	pool   *pgxpool.Pool
	clock  locklab.Clock
	tokens *locklab.TokenSource
	ddl    string

	mu    sync.Mutex
	ready bool // ddl has run
}

func newBase(cfg locklab.Config, name, ddl string) (*base, error) {
	if err := cfg.OnlyOptions(name, locklab.OptStore); err != nil {
		return nil, err
	}
	if cfg.Pool != nil || cfg.Nodes != nil {
		return nil, lockkit.Invalid("strategy %s reads Config.Store (a *pgxpool.Pool), not Config.Pool or Config.Nodes", name)
	}
	pool, ok := cfg.Store.(*pgxpool.Pool)
	if !ok || pool == nil {
		return nil, lockkit.Invalid("Config.Store is %T: strategy %s needs a non-nil *pgxpool.Pool", cfg.Store, name)
	}
	return &base{name: name, pool: pool, clock: cfg.ClockOrDefault(), tokens: cfg.Tokens(), ddl: ddl}, nil
}

// ensure creates the strategy's table once. Two sessions that create it
// at the same moment can collide in the catalog (a unique violation on
// pg_type, a duplicate table, or the table's row type already there):
// the table is there either way.
func (b *base) ensure(ctx context.Context) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ready {
		return nil
	}
	if _, err := b.pool.Exec(ctx, b.ddl); err != nil && !isCode(err, codeUniqueViolation, codeDuplicateTable, codeDuplicateObject) {
		return unavailable(ctx, err)
	}
	b.ready = true
	return nil
}

// forget makes the next ensure run the DDL again when err says the table
// is missing (a server that was replaced, a table dropped).
func (b *base) forget(err error) {
	if isCode(err, codeUndefinedTable) {
		b.mu.Lock()
		b.ready = false
		b.mu.Unlock()
	}
}

// checkTextKey refuses a key that PostgreSQL's text cannot hold.
func checkTextKey(key string) error {
	if !utf8.ValidString(key) || strings.IndexByte(key, 0) >= 0 {
		return lockkit.Invalid("key %q: PostgreSQL text takes valid UTF-8 without NUL bytes", key)
	}
	return nil
}

// isCode reports whether err is a server error with one of the SQLSTATE
// codes.
func isCode(err error, codes ...string) bool {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		return false
	}
	for _, c := range codes {
		if pe.Code == c {
			return true
		}
	}
	return false
}

// unavailable wraps err, a failure to reach the server or a command it
// failed, in ErrUnavailable; when ctx has ended, ctx.Err() is wrapped too.
func unavailable(ctx context.Context, err error) error {
	if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
		return fmt.Errorf("%w: %w (%v)", locklab.ErrUnavailable, cerr, err)
	}
	return lockkit.Unavailable(err)
}

// LockTable is the "pg-lock-table" strategy, the lock table of the notes
// "分布式锁 Distributed Lock" (基于表, "a lock table, rarely used", which
// rests on the uniqueness of the primary key), with an expiry column so
// that a crashed holder's row can be recovered:
//
//	INSERT INTO locklab_lock_table (key, token, expires_at) VALUES ($key, $token, $now + $ttl)
//	-- unique violation: the row is there; recover it if expired, try once more
//	DELETE FROM locklab_lock_table WHERE key = $key AND expires_at < $now
//	INSERT INTO locklab_lock_table ...
//	-- release
//	DELETE FROM locklab_lock_table WHERE key = $key
//
// $now is the client's Clock, as in the timestamp locks of the old SETNX
// page. Each statement runs on its own (autocommit).
//
// How it fails:
//   - Expiry is a time the holder's clock wrote and another client's clock
//     judges: a client whose clock runs ahead deletes a live row and takes
//     the lock while its holder still works.
//   - Nothing on the server removes a row: a crashed holder's lock stays
//     until a client finds it expired, and a holder that never comes back
//     leaves its row forever if nobody asks for the key.
//   - Release is a blind DELETE of the key: a holder past its expiry
//     deletes the row of whoever recovered the lock after it, and a third
//     client then takes it too.
//   - A holder paused past its expiry keeps acting while a successor holds
//     the lock; the lease has no fence number.
//   - The row is data, replicated asynchronously: a failover to a standby
//     that had not replayed it loses the lock.
//
// The recovery is two statements, but unlike setnx-del's GET, DEL, SETNX it
// has no check-then-act gap: the DELETE carries the expiry test, which the
// server evaluates again on the row it deletes. Two clients that both find
// the row expired cannot both win with equal clocks: the second DELETE
// finds the first one's fresh row unexpired and deletes nothing, or its
// INSERT meets that row. Clock skew is what breaks it.
//
// Broken by design, kept to be raced and watched failing: never protect
// anything with it. strategies.Info says how it breaks; pg-advisory is this
// family's lock to use instead.
type LockTable struct{ *base }

// NewLockTable builds a LockTable from cfg.Store (a *pgxpool.Pool),
// cfg.Clock (where expiry times come from) and cfg.Rand.
func NewLockTable(cfg locklab.Config) (*LockTable, error) {
	b, err := newBase(cfg, "pg-lock-table", "CREATE TABLE IF NOT EXISTS "+LockTableName+
		" (key text PRIMARY KEY, token text NOT NULL, expires_at timestamptz NOT NULL)")
	if err != nil {
		return nil, err
	}
	return &LockTable{b}, nil
}

// Acquire inserts the key's row; when a row is there, deletes it if
// expired by the strategy's clock and inserts once more.
func (l *LockTable) Acquire(ctx context.Context, key string, ttl time.Duration) (locklab.Lease, error) {
	if err := lockkit.CheckAcquire(ctx, key, ttl); err != nil {
		return locklab.Lease{}, err
	}
	if err := checkTextKey(key); err != nil {
		return locklab.Lease{}, err
	}
	if err := l.ensure(ctx); err != nil {
		return locklab.Lease{}, err
	}
	token, err := l.tokens.Token()
	if err != nil {
		return locklab.Lease{}, lockkit.Unavailable(err)
	}
	insert := func(start time.Time) (bool, error) {
		_, err := l.pool.Exec(ctx, "INSERT INTO "+LockTableName+" (key, token, expires_at) VALUES ($1, $2, $3)",
			key, token, start.Add(ttl))
		switch {
		case err == nil:
			return true, nil
		case isCode(err, codeUniqueViolation):
			return false, nil
		default:
			l.forget(err)
			return false, unavailable(ctx, err)
		}
	}
	start := l.clock.Now()
	ok, err := insert(start)
	if err != nil {
		return locklab.Lease{}, err
	}
	if ok {
		return single.Lease(key, token, 0, start, ttl), nil
	}
	tag, err := l.pool.Exec(ctx, "DELETE FROM "+LockTableName+" WHERE key = $1 AND expires_at < $2", key, l.clock.Now())
	if err != nil {
		return locklab.Lease{}, unavailable(ctx, err)
	}
	if tag.RowsAffected() == 0 {
		return locklab.Lease{}, single.NotAcquired(key)
	}
	start = l.clock.Now()
	ok, err = insert(start)
	if err != nil {
		return locklab.Lease{}, err
	}
	if !ok {
		return locklab.Lease{}, single.NotAcquired(key)
	}
	return single.Lease(key, token, 0, start, ttl), nil
}

// Release deletes the key's row, whoever wrote it: nil when it deleted
// one, ErrNotHeld when there was none.
func (l *LockTable) Release(ctx context.Context, lease locklab.Lease) error {
	if err := lockkit.CheckLease(ctx, lease); err != nil {
		return err
	}
	if err := checkTextKey(lease.Key); err != nil {
		return err
	}
	tag, err := l.pool.Exec(ctx, "DELETE FROM "+LockTableName+" WHERE key = $1", lease.Key)
	if err != nil {
		l.forget(err)
		return unavailable(ctx, err)
	}
	if tag.RowsAffected() == 0 {
		return single.NotHeld(lease.Key)
	}
	return nil
}

// session is a held lease's connection, and ForUpdate's open transaction.
type session struct {
	key  string
	conn *pgxpool.Conn
	tx   pgx.Tx // ForUpdate only
	id   int64  // Advisory only
}

// sessions are the leases a session strategy holds, by token.
type sessions struct {
	mu   sync.Mutex
	held map[string]*session
}

func (s *sessions) put(token string, h *session) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.held == nil {
		s.held = map[string]*session{}
	}
	s.held[token] = h
}

// take removes and returns the session of lease, or nil when the lease is
// not one this Locker holds.
func (s *sessions) take(lease locklab.Lease) *session {
	s.mu.Lock()
	defer s.mu.Unlock()
	h := s.held[lease.Token]
	if h == nil || h.key != lease.Key {
		return nil
	}
	delete(s.held, lease.Token)
	return h
}

// backend returns the server process id of lease's session.
func (s *sessions) backend(lease locklab.Lease) (uint32, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	h := s.held[lease.Token]
	if h == nil || h.key != lease.Key {
		return 0, false
	}
	return h.conn.Conn().PgConn().PID(), true
}

// closeAll closes every held session's connection without releasing.
func (s *sessions) closeAll() {
	s.mu.Lock()
	held := s.held
	s.held = nil
	s.mu.Unlock()
	for _, h := range held {
		discard(h.conn)
	}
}

// discard closes c, ending its session and every lock the session holds,
// and gives it back to the pool, which drops it.
func discard(c *pgxpool.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	c.Conn().Close(ctx)
	c.Release()
}

// lost is Release's error when the session's statement failed: with ctx
// ended, ErrUnavailable; else ErrNotHeld, for the session is gone (the
// server ended it, or the connection broke and the server ends it when it
// notices): the lock is not the caller's any more.
func lost(ctx context.Context, key string, err error) error {
	if ctx.Err() != nil {
		return unavailable(ctx, err)
	}
	return fmt.Errorf("%w: the session holding it failed: %w", single.NotHeld(key), err)
}

// ForUpdate is the "pg-for-update" strategy, the pessimistic lock (悲观锁)
// of the notes "分布式锁 Distributed Lock": BEGIN, SELECT ... FOR UPDATE on
// the key's row, and the lock is held until COMMIT. The key's row in
// RowTableName is inserted (ON CONFLICT DO NOTHING, committed on its own)
// before the transaction begins; NOWAIT makes a row locked by another
// transaction a refusal rather than a wait, so that one Acquire is one
// attempt.
//
// The lock has no TTL: it lasts as long as the transaction, until Release
// commits it or the session ends. Lease.Until is the start plus the ttl
// given to Acquire: the time by which the holder meant to be done. The
// lock does not end there, and it can end before.
//
// How it fails:
//   - A holder that hangs, or whose network goes silent, keeps the lock
//     until the server ends its session: when its TCP keepalives go
//     unanswered (seconds with short tcp_keepalives_* settings, two hours
//     with the system's defaults). A client whose process dies closes its
//     connection and releases at once.
//   - When the server ends the session (pg_terminate_backend, a restart, a
//     partition its keepalives detect), the lock is gone while the client
//     may still be acting, and the lease has no fence number. Release then
//     reports ErrNotHeld.
//   - Row locks are not replicated as locks: a standby promoted after a
//     failover has forgotten them, and a second client locks the row there.
//   - Each held lock keeps a pool connection and an open transaction,
//     which holds back vacuum on the whole database.
type ForUpdate struct {
	*base
	sessions
}

// NewForUpdate builds a ForUpdate from cfg.Store (a *pgxpool.Pool),
// cfg.Clock and cfg.Rand.
func NewForUpdate(cfg locklab.Config) (*ForUpdate, error) {
	b, err := newBase(cfg, "pg-for-update", "CREATE TABLE IF NOT EXISTS "+RowTableName+" (key text PRIMARY KEY)")
	if err != nil {
		return nil, err
	}
	return &ForUpdate{base: b}, nil
}

// Acquire takes a connection, makes sure the key's row exists, begins a
// transaction and locks the row with FOR UPDATE NOWAIT.
func (l *ForUpdate) Acquire(ctx context.Context, key string, ttl time.Duration) (locklab.Lease, error) {
	if err := lockkit.CheckAcquire(ctx, key, ttl); err != nil {
		return locklab.Lease{}, err
	}
	if err := checkTextKey(key); err != nil {
		return locklab.Lease{}, err
	}
	if err := l.ensure(ctx); err != nil {
		return locklab.Lease{}, err
	}
	token, err := l.tokens.Token()
	if err != nil {
		return locklab.Lease{}, lockkit.Unavailable(err)
	}
	c, err := l.pool.Acquire(ctx)
	if err != nil {
		return locklab.Lease{}, unavailable(ctx, err)
	}
	fail := func(err error) (locklab.Lease, error) {
		l.forget(err)
		discard(c)
		return locklab.Lease{}, unavailable(ctx, err)
	}
	if _, err := c.Exec(ctx, "INSERT INTO "+RowTableName+" (key) VALUES ($1) ON CONFLICT DO NOTHING", key); err != nil {
		return fail(err)
	}
	start := l.clock.Now()
	tx, err := c.Begin(ctx)
	if err != nil {
		return fail(err)
	}
	var got string
	err = tx.QueryRow(ctx, "SELECT key FROM "+RowTableName+" WHERE key = $1 FOR UPDATE NOWAIT", key).Scan(&got)
	switch {
	case err == nil:
	case isCode(err, codeLockNotAvail):
		if rerr := tx.Rollback(ctx); rerr != nil {
			discard(c)
		} else {
			c.Release()
		}
		return locklab.Lease{}, single.NotAcquired(key)
	case errors.Is(err, pgx.ErrNoRows):
		return fail(fmt.Errorf("the row of %q was deleted under the lock", key))
	default:
		return fail(err)
	}
	l.put(token, &session{key: key, conn: c, tx: tx})
	return single.Lease(key, token, 0, start, ttl), nil
}

// Release commits the lease's transaction, which releases the row lock.
// A lease this Locker does not hold, and one whose session the server
// ended, give ErrNotHeld.
func (l *ForUpdate) Release(ctx context.Context, lease locklab.Lease) error {
	if err := lockkit.CheckLease(ctx, lease); err != nil {
		return err
	}
	h := l.take(lease)
	if h == nil {
		return single.NotHeld(lease.Key)
	}
	if err := h.tx.Commit(ctx); err != nil {
		discard(h.conn)
		return lost(ctx, lease.Key, err)
	}
	h.conn.Release()
	return nil
}

// Backend returns the server process id of the session holding lease, for
// a fault that ends that session; false when this Locker holds no such
// lease.
func (l *ForUpdate) Backend(lease locklab.Lease) (pid uint32, ok bool) { return l.backend(lease) }

// Close closes the connection of every lease still held, without
// releasing: what the death of the client's process does. The server ends
// those sessions, and their locks with them. It does not close the pool.
// locklab.Close calls it.
func (l *ForUpdate) Close() error {
	l.closeAll()
	return nil
}

// AdvisoryID is the advisory lock number of key: its 64-bit FNV-1a hash,
// as a bigint. Different keys can share a number, and so a lock.
func AdvisoryID(key string) int64 {
	h := fnv.New64a()
	h.Write([]byte(key))
	return int64(h.Sum64())
}

// Advisory is the "pg-advisory" strategy: pg_try_advisory_lock(AdvisoryID(key))
// on a connection kept for the lease, released with pg_advisory_unlock. It
// is PostgreSQL's own answer to the notes' database locks (PostgreSQL
// documentation, "Advisory Locks"): a lock on a number, held by a session,
// with no row and no transaction behind it.
//
// The lock has no TTL: it lasts until Release or until the session ends.
// Lease.Until is the start plus the ttl given to Acquire: the time by which
// the holder meant to be done. The lock does not end there, and it can end
// before.
//
// How it fails:
//   - A holder that hangs, or whose network goes silent, keeps the lock
//     until the server ends its session: when its TCP keepalives go
//     unanswered (seconds with short tcp_keepalives_* settings, two hours
//     with the system's defaults). A client whose process dies closes its
//     connection and releases at once.
//   - When the server ends the session (pg_terminate_backend, a restart, a
//     partition its keepalives detect), the lock is gone while the client
//     may still be acting, and the lease has no fence number. Release then
//     reports ErrNotHeld.
//   - Advisory locks live in the server's memory and are not replicated: a
//     standby promoted after a failover has forgotten them all.
//   - Keys are hashed to 64 bits, in a space shared with every other user
//     of advisory locks on the database: a collision is a false refusal.
//   - Each held lock keeps a pool connection.
type Advisory struct {
	*base
	sessions
}

// NewAdvisory builds an Advisory from cfg.Store (a *pgxpool.Pool),
// cfg.Clock and cfg.Rand. It creates no table.
func NewAdvisory(cfg locklab.Config) (*Advisory, error) {
	b, err := newBase(cfg, "pg-advisory", "")
	if err != nil {
		return nil, err
	}
	b.ready = true
	return &Advisory{base: b}, nil
}

// Acquire takes a connection and tries the key's advisory lock on it once.
func (l *Advisory) Acquire(ctx context.Context, key string, ttl time.Duration) (locklab.Lease, error) {
	if err := lockkit.CheckAcquire(ctx, key, ttl); err != nil {
		return locklab.Lease{}, err
	}
	token, err := l.tokens.Token()
	if err != nil {
		return locklab.Lease{}, lockkit.Unavailable(err)
	}
	c, err := l.pool.Acquire(ctx)
	if err != nil {
		return locklab.Lease{}, unavailable(ctx, err)
	}
	id := AdvisoryID(key)
	start := l.clock.Now()
	var ok bool
	if err := c.QueryRow(ctx, "SELECT pg_try_advisory_lock($1)", id).Scan(&ok); err != nil {
		discard(c) // it may hold the lock: ending the session frees it
		return locklab.Lease{}, unavailable(ctx, err)
	}
	if !ok {
		c.Release()
		return locklab.Lease{}, single.NotAcquired(key)
	}
	l.put(token, &session{key: key, conn: c, id: id})
	return single.Lease(key, token, 0, start, ttl), nil
}

// Release unlocks the lease's advisory lock and gives its connection back
// to the pool. A lease this Locker does not hold, and one whose session
// the server ended, give ErrNotHeld.
func (l *Advisory) Release(ctx context.Context, lease locklab.Lease) error {
	if err := lockkit.CheckLease(ctx, lease); err != nil {
		return err
	}
	h := l.take(lease)
	if h == nil {
		return single.NotHeld(lease.Key)
	}
	var ok bool
	if err := h.conn.QueryRow(ctx, "SELECT pg_advisory_unlock($1)", h.id).Scan(&ok); err != nil {
		discard(h.conn)
		return lost(ctx, lease.Key, err)
	}
	if !ok {
		discard(h.conn)
		return single.NotHeld(lease.Key)
	}
	h.conn.Release()
	return nil
}

// Backend returns the server process id of the session holding lease, for
// a fault that ends that session; false when this Locker holds no such
// lease.
func (l *Advisory) Backend(lease locklab.Lease) (pid uint32, ok bool) { return l.backend(lease) }

// Close closes the connection of every lease still held, without
// releasing: what the death of the client's process does. The server ends
// those sessions, and their locks with them. It does not close the pool.
// locklab.Close calls it.
func (l *Advisory) Close() error {
	l.closeAll()
	return nil
}

// LeaseClock is the Clock Lease.Until is read from (Config.Clock), on
// which locklab.Watch judges expiry.
func (b *base) LeaseClock() locklab.Clock { return b.clock }
