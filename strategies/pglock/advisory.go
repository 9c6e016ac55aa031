package pglock

import (
	"context"
	"hash/fnv"
	"time"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/internal/single"
	"github.com/locklab/locklab/lockkit"
)

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
