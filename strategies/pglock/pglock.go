// Package pglock holds the locks of a relational database, on PostgreSQL
// through pgx: the database locks of the notes "分布式锁 Distributed Lock"
// (section 0, "RMDB 数据库实现分布式锁"), and PostgreSQL's advisory locks.
// Importing the package registers them (family "postgres"):
//
//   - LockTable ("pg-lock-table"): the notes' lock table (基于表): INSERT
//     of the key as primary key, with an expiry column; a row found expired
//     is deleted and the INSERT tried again; release is a DELETE.
//   - LockTableSync ("pg-lock-table-sync"): LockTable on a primary whose
//     commits wait for a synchronous standby, which a failover keeps.
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
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/locklab/locklab"
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
	// check, when set, runs once after ddl, and again until it passes
	// (LockTableSync's settings).
	check func(ctx context.Context, b *base) error

	mu    sync.Mutex
	ready bool // ddl has run, and check passed
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
	if b.check != nil {
		if err := b.check(ctx, b); err != nil {
			return err
		}
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

// LeaseClock is the Clock Lease.Until is read from (Config.Clock), on
// which locklab.Watch judges expiry.
func (b *base) LeaseClock() locklab.Clock { return b.clock }
