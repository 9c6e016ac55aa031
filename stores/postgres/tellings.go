// The scenarios as told for PostgreSQL: the same clients and faults, and
// what they do to a lock on a database server.

package postgres

import (
	"github.com/locklab/locklab/harness"
	"github.com/locklab/locklab/strategies/pglock"
)

// Sources of the tellings.
const (
	srcPGLocking = "PostgreSQL documentation, \"Explicit Locking\" (row-level locks, held until the transaction " +
		"ends; advisory locks, held until released or the session ends)"
	srcPGReplication = "PostgreSQL documentation, \"High Availability, Load Balancing, and Replication\" " +
		"(asynchronous streaming replication, promoting a standby)"
	srcPGSync = "PostgreSQL documentation, \"Synchronous Replication\" (a commit waits until a synchronous " +
		"standby has written it: it survives a failover) and synchronous_commit"
	srcPGSessionEnd = "PostgreSQL documentation, \"Server Signaling Functions\" (pg_terminate_backend) and \"Client " +
		"Connection Defaults\" (idle_in_transaction_session_timeout, idle_session_timeout); \"Explicit Locking\" " +
		"(advisory locks, held until released or the session ends)"
	srcPGTable = "the notes \"分布式锁 Distributed Lock\", section 0 (RMDB 数据库实现分布式锁: a lock table, " +
		"SELECT ... FOR UPDATE)"
	srcVersionColumn = "the notes \"分布式锁 Distributed Lock\", section 0 (乐观锁: a version column); Martin " +
		"Kleppmann, \"How to do distributed locking\" (2016)"
)

// tellings are the scenarios' stories on PostgreSQL, by scenario.
var tellings = map[string]harness.Telling{
	"lost-reply": {
		Title: "the server carries out a statement whose answer never reaches the client",
		Story: "C1's statement runs, and commits outside a transaction, but the connection drops before the " +
			"answer comes: pgx reports it lost, and C1 tries again on a new connection. The end of the " +
			"connection ends its session, and an advisory lock or an open transaction's row lock with it: " +
			"the retry finds the lock free. The lock table's row is data: the retry's INSERT meets C1's own " +
			"row and is refused, and so is everyone until its expiry passes. A lost answer costs the lock " +
			"table one expiry of a lock nobody holds.",
		Source: srcPGLocking + "; " + srcPGTable,
	},
	"stale-recovery": {
		Title: "two clients recover a crashed holder's stale lock at once",
		Story: "C3 takes the lock and crashes; its expiry passes. C1 and C2 both find the lock taken and both " +
			"recover it. The lock table's recovery deletes the row only where its expiry has passed, in one " +
			"statement, then inserts: the slower client's DELETE finds the faster one's fresh row and deletes " +
			"nothing, and its INSERT is refused by the primary key. The session locks need no recovery: C3's " +
			"session ended with its crash, and its lock with it.",
		Source: srcPGTable,
	},
	"clock-skew": {
		Title: "a client whose clock runs ahead steals a live lock-table row",
		Story: "The lock table's row carries an expiry written from the client's clock, and a contender " +
			"compares it with its own. C2's clock is 32s ahead: C1's fresh row looks expired to it, so C2 " +
			"deletes it and takes the lock C1 still validly holds. The session locks read no client's clock.",
		Source: srcPGTable,
	},
	"crash-before-expire": {
		Title: "the holder crashes in or after its acquire",
		Story: "C1 crashes, in the middle of a many-statement acquire or holding the lock. Its connections " +
			"close and the server ends its session: an advisory lock or an open transaction ends with it. " +
			"The lock table's row stays until its expiry passes; then the next client deletes it. Nobody " +
			"is locked out for good.",
		Source: srcPGLocking,
	},
	"ttl-pushed-by-waiters": {
		Title: "a crashed holder and a waiter who keeps trying",
		Story: "C1 takes the lock and crashes; C2 tries every 20s. A refused try changes nothing on the " +
			"server: the lock table's row keeps its expiry, and a session lock ended with C1's session. " +
			"C2 acquires once the lock is free.",
		Source: srcPGTable,
	},
	"pause-in-release": {
		Title: "the holder stops before or inside its release, past its expiry",
		Story: "C1 holds the lock; before or inside its release its process stops past the lock's expiry, " +
			"and C2 takes the lock. C1 wakes and releases: the lock table's release is a DELETE of the key's " +
			"row, whoever's it is, so it deletes C2's lock, as in release-after-expiry. The session locks have " +
			"no expiry, and a paused client's session lives on: C2 is refused until C1 releases.",
		Source: srcPGTable,
	},
	"release-after-expiry": {
		Title: "a holder past its expiry releases and deletes its successor's lock",
		Story: "C1 holds the lock and runs past its expiry; C2 takes it. C1 then releases: the lock table's " +
			"release is a DELETE of the key's row, whoever's it is, so it deletes C2's lock. The session " +
			"locks have no expiry to run past: C2 is refused until C1 releases, and a release acts on the " +
			"releasing session's own lock only.",
		Source: srcPGTable,
	},
	"pause-past-ttl": {
		Title: "a holder pauses past its lock's expiry (no fencing)",
		Story: "C1 acquires, then stops (a GC pause) for longer than the TTL. The lock table's row carries an " +
			"expiry, which C2 reads as past: C2 deletes the row, acquires and writes, and C1 wakes up and " +
			"writes too. The session locks have no expiry: the server keeps C1's session through the pause, " +
			"and with it the advisory lock or the row lock, and C2 is refused.",
		Source: "Martin Kleppmann, \"How to do distributed locking\" (2016); " + srcPGTable,
	},
	"partitioned-holder": {
		Title: "the holder is cut off from the database and keeps writing",
		Story: "C1 holds the lock when the network cuts it off from the server. As time passes the server's " +
			"keepalives find C1's session dead and end it, and the advisory lock or the open transaction's " +
			"row lock with it; the lock table's row expires by its stamp. C2 acquires and writes. C1 cannot " +
			"reach the server to learn it lost the lock; it writes again.",
		Source: "Martin Kleppmann, \"How to do distributed locking\" (2016); " + srcPGLocking,
	},
	"session-replaced": {
		Title: "the holder's session ends while it is cut off, and it comes back",
		Story: "C1 holds the lock when the network cuts it off from the server. As time passes the server's " +
			"keepalives find C1's session dead and end it, and the advisory lock or the open transaction's row " +
			"lock with it; the lock table's row expires by its stamp. C2 acquires and writes. The network " +
			"heals. pgx's pool opens a new connection for the next work that asks for one, as it does by " +
			"default, but the holder's lock lived in the connection the server ended: C1's next statement on " +
			"it fails (57P01, the backend terminated), and that is the first word C1 gets. The resource checks " +
			"fence numbers, and none of the three locks issues one (Lease.Fence is 0): C1's stale write, " +
			"before that statement, is accepted. Nothing here opens a session for the lock behind the " +
			"holder's back, as go-zookeeper does: the lock's own connection stays ended.",
		Source: "samuel/go-zookeeper#20 (the story on ZooKeeper); pgx's pgxpool (a pool dials a new connection on " +
			"demand); " + srcPGLocking,
	},
	"pause-session-killed": {
		Title: "the server ends a paused holder's session (no fencing)",
		Story: "C1 acquires, then stops (a GC pause) for 5s, well within its lock's 30s expiry. Meanwhile the " +
			"server ends C1's session: a DBA's pg_terminate_backend, idle_in_transaction_session_timeout on " +
			"pg-for-update's open transaction, idle_session_timeout on pg-advisory's idle session, or a pooler " +
			"closing it. The advisory lock and the transaction's row lock end with the session: C2 acquires " +
			"and writes, and C1 wakes up, still believing it holds the lock, and writes too; it learns " +
			"otherwise only at its next statement, its release. The lock table's row is data: it outlives the " +
			"session, and C2 is refused until its expiry.",
		Source: srcPGSessionEnd,
	},
	"pause-session-killed-fenced": {
		Title: "the same ended session against a resource that checks fence numbers",
		Story: "As in pause-session-killed, but the resource refuses a write whose fence number is lower than " +
			"one it has seen. None of the three locks issues one (Lease.Fence is 0): C1's stale write carries " +
			"the same 0 as C2's, and the resource cannot tell them apart.",
		Source: srcPGSessionEnd,
	},
	"pause-past-ttl-guarded": {
		Title: "the same pause against a row with a version column",
		Story: "As in pause-past-ttl, but the protected resource is a row with a version column on the same " +
			"server: each client reads the version when it takes the lock, and writes with UPDATE ... SET " +
			"version = version + 1 WHERE key = $1 AND version = $2. C2 writes first and moves the version on; " +
			"C1, waking up, updates no row: its stale write is refused, whatever the lock let through.",
		Source: srcVersionColumn,
	},
	"partitioned-holder-guarded": {
		Title: "the partitioned holder against a row with a version column",
		Story: "As in partitioned-holder, but the protected resource is a row with a version column on the " +
			"same server: each client reads the version when it takes the lock, and writes with UPDATE ... " +
			"WHERE key = $1 AND version = $2. While C1 is cut off its writes cannot reach the row at all; once " +
			"the network heals, C1's write carries the version it read before C2 wrote, updates no row, and " +
			"is refused.",
		Source: srcVersionColumn,
	},
	"pause-session-killed-guarded": {
		Title: "the same ended session against a row with a version column",
		Story: "As in pause-session-killed, but the protected resource is a row with a version column on the " +
			"same server: C1 read the version when it took the lock, C2 writes first and moves it on, and " +
			"C1's UPDATE ... WHERE key = $1 AND version = $2 updates no row: its stale write is refused, " +
			"whatever the lock let through.",
		Source: srcVersionColumn + "; " + srcPGSessionEnd,
	},
	"failover-loses-lock": {
		Title: "the primary dies and its standby is promoted",
		Story: "C1 takes the lock on the primary. The primary dies and its streaming standby is promoted; " +
			"the clients' new connections reach it. Sessions are not replicated: an advisory lock or an open " +
			"transaction's row lock is gone with C1's session. The lock table's row is data, but an " +
			"asynchronous standby may never have seen it: the primary acknowledged it alone, and C2 acquires " +
			"on the promoted server while C1 still believes it holds the lock. pg-lock-table-sync's standby " +
			"is synchronous: the primary's commit of the row returned only once the standby had written it, " +
			"so the promoted server has it and C2 is refused until its expiry. Synchronous replication " +
			"keeps committed rows, never sessions: the session locks would be lost all the same.",
		Source: srcPGReplication + "; " + srcPGSync,
	},
	"restart-loses-lock": {
		Title: "the server restarts: its sessions end, and the locks they held",
		Story: "C1 takes the lock. The server restarts on its data directory: tables and committed rows " +
			"survive, sessions do not. The advisory lock and the transaction's row lock end with C1's " +
			"session, and C2 acquires while C1 still believes it holds the lock. The lock table's row is " +
			"data: it survives the restart, and C2 is refused until its expiry. pg-lock-table-sync's " +
			"synchronous standby reconnects to the restarted primary, and a commit waits until it has.",
		Source: srcPGLocking + "; " + srcPGSync,
	},
}

// known are the schedules told or found for the PostgreSQL strategies, by
// scenario and then strategy (harness.Driver.Known): each cell replays
// them before its search, and the pages pin them. pg-lock-table-sync
// sends pg-lock-table's statements, and has its schedules (syncKnown).
var known = syncKnown(map[string]map[string][]string{
	"lost-reply": {
		"pg-lock-table": {"lose(c1) c1 c1 c1 c2 c2"},
	},
	"clock-skew": {
		"pg-lock-table": {"c1 skew(c2,+32s) c2 c2 c2"},
	},
	"pause-past-ttl": {
		"pg-lock-table": {"c1 c1 c2 c2 c2 c2 c2 c1"},
	},
	"pause-in-release": {
		"pg-lock-table": {"c1 c1 pause(c1) time c2 c2 c2 resume(c1) c1"},
	},
	"partitioned-holder": {
		"pg-advisory":   {"c1 isolate(c1) time c2 c2 c2 c1"},
		"pg-for-update": {"c1 c1 c1 c2 c2 isolate(c1) time c2 c2 c2 c1"},
	},
	"pause-past-ttl-guarded": {
		"pg-lock-table": {"c1 c1 c1 c2 c2 c2 c2 c2 c1"},
	},
	"partitioned-holder-guarded": {
		"pg-advisory":   {"c1 c1 isolate(c1) time c2 c2 c2 c2 rejoin(c1) c1"},
		"pg-for-update": {"c1 c1 c1 c1 isolate(c1) time c2 c2 c2 c2 c2 c2 rejoin(c1) c1"},
		"pg-lock-table": {"c1 c1 isolate(c1) time c2 c2 c2 c2 c2 c2 rejoin(c1) c1", "c2 isolate(c1) time rejoin(c1) c1 c1 c1 c1 c1 c1 c1 c2 c2"},
	},
	"session-replaced": {
		// The holder is cut off, the server ends its session, C2 takes
		// the lock and writes; C1 comes back, writes, and its release on
		// the ended connection fails.
		"pg-advisory": {"c1 isolate(c1) time c2 c2 rejoin(c1) c1 c1 c2"},
	},
	"pause-session-killed": {
		"pg-advisory": {"c1 c1 terminate(c1) c2 c2 c1"},
	},
	"failover-loses-lock": {
		"pg-for-update": {"c1 c1 c1 failover(n1) c2 c2 c2"},
	},
	"restart-loses-lock": {
		// A commit after the restart, which its synchronous standby
		// acknowledges once it has connected again.
		pglock.LockTableSyncName: {"c1 c1 c1 restart(n1) c2"},
	},
})

// syncKnown gives each strategy of syncColumns the schedules of the
// strategy whose statements it sends, pg-lock-table.
func syncKnown(k map[string]map[string][]string) map[string]map[string][]string {
	for _, byStrategy := range k {
		if sched, ok := byStrategy["pg-lock-table"]; ok {
			for _, name := range syncColumns {
				byStrategy[name] = sched
			}
		}
	}
	return k
}

// playLevels are the store's challenges in locklab play
// (harness.Driver.PlayLevels).
var playLevels = []harness.PlayLevel{
	{ID: "pg-restart", Scenario: "restart-loses-lock", Strategy: "pg-advisory", Docs: "postgres.md",
		Title: "PostgreSQL: a restart ends the session",
		Goal: "pg-advisory holds the lock in C1's database session, with no TTL: it lasts as long as that session. " +
			"Make C1 and C2 both hold it by restarting the PostgreSQL server at the right moment.",
		Story: "C1 takes pg-advisory's lock: pg_try_advisory_lock, on a connection it keeps for as long as it holds " +
			"the lock. The lock belongs to that session, not to anything on disk. The server restarts: it keeps its " +
			"data directory (a lock table's row would still be there), but every session ends, and C1's lock with " +
			"it. C2 acquires while C1, which has sent nothing since and does not know, works on; C1's release then " +
			"fails on its dead connection."},
	{ID: "pg-session-killed", Scenario: "pause-session-killed", Strategy: "pg-advisory", Docs: "postgres.md",
		Title: "PostgreSQL: the server ends a paused holder's session",
		Goal: "pg-advisory's lock lasts as long as C1's database session. C1 will pause for 5s, well within any " +
			"timeout you would call dangerous. End its session from the server at the right moment (terminate(c1)) " +
			"and make C1 write after C2 has.",
		Story: "C1 takes pg-advisory's lock in its session and pauses. The server ends that session, as a DBA's " +
			"pg_terminate_backend, an idle_session_timeout or a pooler closing idle connections does, and the lock " +
			"ends with it. Nothing tells C1: C2 acquires and writes, and C1 wakes and writes after it. It learns " +
			"only at its release, on a dead connection. The lock table's row would have outlived the session."},
	{ID: "pg-failover", Scenario: "failover-loses-lock", Strategy: "pg-lock-table", Docs: "postgres.md",
		Title: "PostgreSQL: the standby never saw the row",
		Goal: "pg-lock-table's lock is a row of a table, with an expiry stamp: it is data, and survives a restart. " +
			"The server has an asynchronous streaming standby, which a failover promotes. Make C1 and C2 both hold " +
			"the lock by failing over at the right moment."},
}
