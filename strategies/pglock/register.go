package pglock

import (
	"github.com/locklab/locklab"
	"github.com/locklab/locklab/strategies"
)

// Sources, as cited by the descriptions.
const (
	srcNotes    = "the notes \"分布式锁 Distributed Lock\", section 0 (RMDB 数据库实现分布式锁)"
	srcAdvisory = "PostgreSQL documentation, \"Advisory Locks\" (explicit locking), as the session lock beside " + srcNotes
	srcSync     = "PostgreSQL documentation, \"Synchronous Replication\" (high availability) and synchronous_commit (write-ahead log settings)"
)

// wrap adapts a constructor to a strategies.Factory.
func wrap[T locklab.Locker](f func(locklab.Config) (T, error)) strategies.Factory {
	return func(cfg locklab.Config) (locklab.Locker, error) {
		l, err := f(cfg)
		if err != nil {
			return nil, err
		}
		return l, nil
	}
}

// Weaknesses the two session locks share.
var (
	weakNoTTL = "no TTL: a holder that hangs or goes silent keeps the lock until the server's TCP keepalives end its session " +
		"(seconds when tuned, two hours by default); a client whose process dies releases at once"
	weakSessionEnds = "when the server ends the session (pg_terminate_backend, a restart, a partition its keepalives detect) " +
		"the lock is gone while the client may still act, and the lease has no fence number"
)

func init() {
	strategies.MustRegister(strategies.Description{
		Name:    "pg-lock-table",
		Family:  Family,
		Summary: "INSERT key as primary key with an expiry; on conflict DELETE the row if expired, INSERT again; release blind DELETE",
		Source:  srcNotes + ", 基于表: a lock table on the primary key's uniqueness; expiry column as in the SETNX page's timestamps",
		Weaknesses: []string{
			"expiry is a time the holder's clock wrote and another's judges: a client whose clock runs ahead deletes a live row and takes the lock",
			"nothing on the server removes a row: a crashed holder's lock stays until a client finds it expired",
			"release is a blind DELETE: a holder past its expiry deletes its successor's row",
			"a holder paused past its expiry keeps acting while a successor holds the lock, and the lease has no fence number",
			"the row is replicated asynchronously: a failover to a standby that had not replayed it loses the lock",
		},
		BrokenByDesign: "release is a blind DELETE: a holder past its expiry deletes its successor's row and lets a third client in",
		Properties:     strategies.Properties{AtomicAcquire: true},
		Options:        []string{strategies.OptStore},
	}, wrap(NewLockTable))

	strategies.MustRegister(strategies.Description{
		Name:   LockTableSyncName,
		Family: Family,
		Summary: "pg-lock-table on a primary whose commits wait for a synchronous standby (synchronous_standby_names, " +
			"synchronous_commit on): INSERT key with an expiry, DELETE it if expired and INSERT again; release blind DELETE",
		Source: srcNotes + ", 基于表, as pg-lock-table; " + srcSync,
		Weaknesses: []string{
			"expiry is a time the holder's clock wrote and another's judges: a client whose clock runs ahead deletes a live row and takes the lock",
			"release is a blind DELETE: a holder past its expiry deletes its successor's row",
			"a holder paused past its expiry keeps acting while a successor holds the lock, and the lease has no fence number",
			"with no synchronous standby streaming every commit waits: a failed standby stops acquire and release until it is back or no longer named",
			"a primary promoted from the standby has no synchronous standby until it is given one: meanwhile the row is replicated asynchronously, or commits wait",
		},
		BrokenByDesign: "release is a blind DELETE, as pg-lock-table's: synchronous replication makes the row survive a failover, not the algorithm safe",
		Properties:     strategies.Properties{AtomicAcquire: true},
		Options:        []string{strategies.OptStore},
	}, wrap(NewLockTableSync))

	strategies.MustRegister(strategies.Description{
		Name:    "pg-for-update",
		Family:  Family,
		Summary: "BEGIN; SELECT the key's row FOR UPDATE NOWAIT, held for the lease; release COMMIT",
		Source:  srcNotes + ", 悲观锁: SELECT ... FOR UPDATE in a transaction, COMMIT releases",
		Weaknesses: []string{
			weakNoTTL,
			weakSessionEnds,
			"row locks are not replicated: a standby promoted after a failover has forgotten every lock",
			"each held lock keeps a pool connection and an open transaction, which holds back vacuum",
		},
		Properties: strategies.Properties{AtomicAcquire: true, OwnerCheckedRelease: true},
		Options:    []string{strategies.OptStore},
	}, wrap(NewForUpdate))

	strategies.MustRegister(strategies.Description{
		Name:    "pg-advisory",
		Family:  Family,
		Summary: "pg_try_advisory_lock(hash(key)) on a session kept for the lease; release pg_advisory_unlock",
		Source:  srcAdvisory,
		Weaknesses: []string{
			weakNoTTL,
			weakSessionEnds,
			"advisory locks live in the server's memory and are not replicated: a standby promoted after a failover has forgotten them all",
			"keys are hashed to 64 bits in a space shared with every user of advisory locks on the database: a collision is a false refusal",
		},
		Properties: strategies.Properties{AtomicAcquire: true, OwnerCheckedRelease: true},
		Options:    []string{strategies.OptStore},
	}, wrap(NewAdvisory))
}
