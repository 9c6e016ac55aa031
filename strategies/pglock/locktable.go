package pglock

import (
	"context"
	"time"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/internal/single"
	"github.com/locklab/locklab/lockkit"
)

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

// lockTableDDL creates LockTable's table.
const lockTableDDL = "CREATE TABLE IF NOT EXISTS " + LockTableName +
	" (key text PRIMARY KEY, token text NOT NULL, expires_at timestamptz NOT NULL)"

// NewLockTable builds a LockTable from cfg.Store (a *pgxpool.Pool),
// cfg.Clock (where expiry times come from) and cfg.Rand.
func NewLockTable(cfg locklab.Config) (*LockTable, error) {
	b, err := newBase(cfg, "pg-lock-table", lockTableDDL)
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
