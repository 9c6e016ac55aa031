package pglock

import (
	"context"
	"slices"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/lockkit"
)

// LockTableSyncName is the name LockTableSync registers under.
const LockTableSyncName = "pg-lock-table-sync"

// SyncSettingsSQL is the statement LockTableSync reads the replication
// settings of its session with, once, beside its table's creation.
const SyncSettingsSQL = "SELECT current_setting('synchronous_standby_names'), current_setting('synchronous_commit')"

// syncCommits are the synchronous_commit settings whose commit waits for a
// synchronous standby to have the transaction's WAL: written to its disk
// (on), handed to its operating system (remote_write), or replayed
// (remote_apply). Each survives a failover of the primary alone.
var syncCommits = []string{"on", "remote_write", "remote_apply"}

// LockTableSync is the "pg-lock-table-sync" strategy: LockTable's lock
// table, statement for statement, on a primary whose commits wait for a
// synchronous standby. PostgreSQL's documentation ("Synchronous
// Replication", in "High Availability, Load Balancing, and Replication",
// and the synchronous_commit parameter): with a standby named in the
// primary's synchronous_standby_names, a session whose synchronous_commit
// is on (the default) is told its COMMIT succeeded only once the standby
// has flushed the transaction's commit record to durable storage, so that
// it is lost only if the primary and every synchronous standby lose their
// storage: a failover to that standby keeps it. local and off do not wait.
//
// Its first Acquire reads the two settings as its session has them
// (SyncSettingsSQL) and refuses, with ErrInvalid, a server that names no
// synchronous standby or a session that does not wait for one: on such a
// server it would be LockTable, whose row an asynchronous standby may
// never have had.
//
// How it holds and fails:
//   - Its row is a committed write, and the standby has it before the
//     INSERT returns: a failover to that standby keeps the lock, where
//     pg-lock-table's asynchronous standby loses it.
//   - A restart keeps the row (it is on disk), as pg-lock-table's.
//   - With no synchronous standby streaming, every commit waits: a
//     standby that fails stops acquire and release until it is back or no
//     longer named (liveness, not safety). A primary promoted from the
//     standby has no synchronous standby of its own until it is given
//     one; an HA manager that then empties synchronous_standby_names (so
//     that commits go on) leaves the lock asynchronous until it does.
//   - Everything else is LockTable's: an expiry the holder's clock wrote
//     and another's judges (clock skew deletes a live row), a blind DELETE
//     on release, a holder paused past its expiry that keeps acting with
//     no fence. Synchronous replication makes the row durable, not the
//     algorithm safe.
//
// Broken by design, as LockTable is; pg-advisory is this family's lock to
// use instead, on one server.
type LockTableSync struct{ *LockTable }

// NewLockTableSync builds a LockTableSync from cfg.Store (a *pgxpool.Pool
// on a primary with a synchronous standby), cfg.Clock and cfg.Rand.
func NewLockTableSync(cfg locklab.Config) (*LockTableSync, error) {
	b, err := newBase(cfg, LockTableSyncName, lockTableDDL)
	if err != nil {
		return nil, err
	}
	b.check = checkSync
	return &LockTableSync{&LockTable{b}}, nil
}

// checkSync refuses a session whose commits do not wait for a synchronous
// standby.
func checkSync(ctx context.Context, b *base) error {
	var names, commit string
	if err := b.pool.QueryRow(ctx, SyncSettingsSQL).Scan(&names, &commit); err != nil {
		return unavailable(ctx, err)
	}
	if names == "" || !slices.Contains(syncCommits, commit) {
		return lockkit.Invalid("strategy %s: the server's commits do not wait for a synchronous standby "+
			"(synchronous_standby_names %q, synchronous_commit %s): name one in synchronous_standby_names, "+
			"and commit with synchronous_commit on, remote_write or remote_apply", b.name, names, commit)
	}
	return nil
}
