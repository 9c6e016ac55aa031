package pglock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/internal/single"
	"github.com/locklab/locklab/lockkit"
)

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
