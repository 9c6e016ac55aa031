// The scenarios as told for PostgreSQL and etcd: the same clients and
// faults, and what they do to a lock on those stores.

package harness

// Sources of the tellings.
const (
	srcPGLocking = "PostgreSQL documentation, \"Explicit Locking\" (row-level locks, held until the transaction " +
		"ends; advisory locks, held until released or the session ends)"
	srcPGReplication = "PostgreSQL documentation, \"High Availability, Load Balancing, and Replication\" " +
		"(asynchronous streaming replication, promoting a standby)"
	srcPGTable = "the notes \"分布式锁 Distributed Lock\", section 0 (RMDB 数据库实现分布式锁: a lock table, " +
		"SELECT ... FOR UPDATE)"
	srcEtcdFailures = "etcd documentation, \"Failure modes\" (leader failure); Raft (Ongaro and Ousterhout, 2014): " +
		"only a member with every committed entry can be elected"
	srcEtcdJepsen = "Jepsen, \"etcd 3.4.3\" (Kyle Kingsbury, 2020); Martin Kleppmann, \"How to do distributed locking\" (2016)"
	srcEtcdLease  = "etcd's Go client, package concurrency (Session, Mutex): a key under the lock's prefix, " +
		"attached to a lease; the lowest create revision holds"
)

// tellings are the scenarios' stories on the other stores, by scenario
// and store; the catalog attaches them (Scenario.Stores).
var tellings = map[string]map[string]Telling{
	"stale-recovery": {
		StorePostgres: {
			Title: "two clients recover a crashed holder's stale lock at once",
			Story: "C3 takes the lock and crashes; its expiry passes. C1 and C2 both find the lock taken and both " +
				"recover it. The lock table's recovery deletes the row only where its expiry has passed, in one " +
				"statement, then inserts: the slower client's DELETE finds the faster one's fresh row and deletes " +
				"nothing, and its INSERT is refused by the primary key. The session locks need no recovery: C3's " +
				"session ended with its crash, and its lock with it.",
			Source: srcPGTable,
		},
		StoreEtcd: {
			Title: "two clients take a crashed holder's lock at once",
			Story: "C3 takes the lock and crashes; its lease runs out and the leader deletes its key. C1 and C2 " +
				"both put a key under the lock's prefix: the server orders them by create revision, the lowest " +
				"holds, and exactly one of them acquires.",
			Source: srcEtcdLease,
		},
	},
	"clock-skew": {
		StorePostgres: {
			Title: "a client whose clock runs ahead steals a live lock-table row",
			Story: "The lock table's row carries an expiry written from the client's clock, and a contender " +
				"compares it with its own. C2's clock is 32s ahead: C1's fresh row looks expired to it, so C2 " +
				"deletes it and takes the lock C1 still validly holds. The session locks read no client's clock.",
			Source: srcPGTable,
		},
		StoreEtcd: {
			Title: "a client whose clock runs ahead: nothing to steal",
			Story: "C2's clock is 32s ahead. etcd's lease expires on the cluster's clock, not a client's: C2 " +
				"sees C1's key under the prefix and is refused.",
			Source: srcEtcdLease,
		},
	},
	"crash-before-expire": {
		StorePostgres: {
			Title: "the holder crashes in or after its acquire",
			Story: "C1 crashes, in the middle of a many-statement acquire or holding the lock. Its connections " +
				"close and the server ends its session: an advisory lock or an open transaction ends with it. " +
				"The lock table's row stays until its expiry passes; then the next client deletes it. Nobody " +
				"is locked out for good.",
			Source: srcPGLocking,
		},
		StoreEtcd: {
			Title: "the holder crashes holding the lock",
			Story: "C1 crashes holding the lock. Its key lives as long as its lease: the lease's TTL passes " +
				"with nobody renewing it, the leader revokes it and deletes the key, and the next client acquires.",
			Source: srcEtcdLease,
		},
	},
	"ttl-pushed-by-waiters": {
		StorePostgres: {
			Title: "a crashed holder and a waiter who keeps trying",
			Story: "C1 takes the lock and crashes; C2 tries every 20s. A refused try changes nothing on the " +
				"server: the lock table's row keeps its expiry, and a session lock ended with C1's session. " +
				"C2 acquires once the lock is free.",
			Source: srcPGTable,
		},
		StoreEtcd: {
			Title: "a crashed holder and a waiter who keeps trying",
			Story: "C1 takes the lock and crashes; C2 tries every 20s. A refused try deletes its own key and " +
				"revokes its own lease; C1's lease keeps its TTL, and C2 acquires once it has passed.",
			Source: srcEtcdLease,
		},
	},
	"release-after-expiry": {
		StorePostgres: {
			Title: "a holder past its expiry releases and deletes its successor's lock",
			Story: "C1 holds the lock and runs past its expiry; C2 takes it. C1 then releases: the lock table's " +
				"release is a DELETE of the key's row, whoever's it is, so it deletes C2's lock. The session " +
				"locks have no expiry to run past: C2 is refused until C1 releases, and a release acts on the " +
				"releasing session's own lock only.",
			Source: srcPGTable,
		},
		StoreEtcd: {
			Title: "a holder past its lease releases: nothing of its successor's is deleted",
			Story: "C1 holds the lock while time passes. Its session's keepalive renews the lease, and C2 is " +
				"refused; had the lease run out and C2 acquired, C1's late release would delete its own key only " +
				"if the key still had the create revision C1 got: it would have gone, and C2's key would be left " +
				"alone.",
			Source: srcEtcdLease,
		},
	},
	"pause-past-ttl": {
		StorePostgres: {
			Title: "a holder pauses past its lock's expiry (no fencing)",
			Story: "C1 acquires, then stops (a GC pause) for longer than the TTL. The lock table's row carries an " +
				"expiry, which C2 reads as past: C2 deletes the row, acquires and writes, and C1 wakes up and " +
				"writes too. The session locks have no expiry: the server keeps C1's session through the pause, " +
				"and with it the advisory lock or the row lock, and C2 is refused.",
			Source: "Martin Kleppmann, \"How to do distributed locking\" (2016); " + srcPGTable,
		},
		StoreEtcd: {
			Title: "a holder pauses past its lease (no fencing)",
			Story: "C1 acquires, then stops for longer than its lease's TTL. Nothing renews the lease while C1 " +
				"is stopped: the leader revokes it and deletes C1's key. C2 acquires and writes; C1 wakes up " +
				"and writes too. Consensus does not help: the lock was released correctly, and C1 does not know.",
			Source: srcEtcdJepsen,
		},
	},
	"partitioned-holder": {
		StorePostgres: {
			Title: "the holder is cut off from the database and keeps writing",
			Story: "C1 holds the lock when the network cuts it off from the server. As time passes the server's " +
				"keepalives find C1's session dead and end it, and the advisory lock or the open transaction's " +
				"row lock with it; the lock table's row expires by its stamp. C2 acquires and writes. C1 cannot " +
				"reach the server to learn it lost the lock; it writes again.",
			Source: "Martin Kleppmann, \"How to do distributed locking\" (2016); " + srcPGLocking,
		},
		StoreEtcd: {
			Title: "the holder's lease runs out while it is cut off, and it keeps writing",
			Story: "C1 holds the lock when the network cuts it off from every member. Its session's keepalive " +
				"cannot reach the cluster either: the lease's TTL passes, the leader revokes it and deletes C1's " +
				"key. C2 acquires and writes. C1 does not learn it lost the lock; it writes again.",
			Source: srcEtcdJepsen,
		},
	},
	"failover-loses-lock": {
		StorePostgres: {
			Title: "the primary dies and its asynchronous standby is promoted",
			Story: "C1 takes the lock on the primary. The primary dies and its asynchronous streaming standby is " +
				"promoted; the clients' new connections reach it. Sessions are not replicated: an advisory lock " +
				"or an open transaction's row lock is gone with C1's session. The lock table's row is data, but " +
				"the primary acknowledged it alone and the standby never saw it. C2 acquires on the promoted " +
				"server while C1 still believes it holds the lock. A synchronous standby would keep the row, " +
				"never the session locks.",
			Source: srcPGReplication,
		},
		StoreEtcd: {
			Title: "the leader dies for good; the others elect a new one, which has the lock",
			Story: "C1 holds the lock when the cluster's leader is killed, and stays down. The other two members " +
				"elect a new leader. A write is acknowledged only once a quorum of members has it, and only a " +
				"member with every acknowledged write can be elected: the new leader has C1's key and lease, " +
				"and C2 is refused.",
			Source: srcEtcdFailures,
		},
	},
	"restart-loses-lock": {
		StorePostgres: {
			Title: "the server restarts: its sessions end, and the locks they held",
			Story: "C1 takes the lock. The server restarts on its data directory: tables and committed rows " +
				"survive, sessions do not. The advisory lock and the transaction's row lock end with C1's " +
				"session, and C2 acquires while C1 still believes it holds the lock. The lock table's row is " +
				"data: it survives the restart, and C2 is refused until its expiry.",
			Source: srcPGLocking,
		},
		StoreEtcd: {
			Title: "the leader restarts on its data directory; the lock survives",
			Story: "C1 holds the lock when the leader is killed and started again on its data directory. The " +
				"others elect a new leader, which has every committed key, and the restarted member catches " +
				"up from its raft log: C1's key is there, and C2 is refused.",
			Source: srcEtcdFailures,
		},
	},
}

func init() {
	for i := range catalog {
		catalog[i].Stores = tellings[catalog[i].Name]
	}
}
