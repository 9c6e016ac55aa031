// The scenarios as told for etcd: the same clients and faults, and what
// they do to a lock on a Raft cluster.

package etcd

import "github.com/locklab/locklab/harness"

// Sources of the tellings.
const (
	srcEtcdFailures = "etcd documentation, \"Failure modes\" (leader failure); Raft (Ongaro and Ousterhout, 2014): " +
		"only a member with every committed entry can be elected"
	srcEtcdJepsen = "Jepsen, \"etcd 3.4.3\" (Kyle Kingsbury, 2020); Martin Kleppmann, \"How to do distributed locking\" (2016)"
	srcEtcdLease  = "etcd's Go client, package concurrency (Session, Mutex): a key under the lock's prefix, " +
		"attached to a lease; the lowest create revision holds"
	srcEtcdMutex = "Jepsen, \"etcd 3.4.3\" (Kyle Kingsbury, 2020); etcd's Go client v3.7.2, concurrency/mutex.go and key.go " +
		"(Mutex.Lock, waitDeletes)"
)

// tellings are the scenarios' stories on etcd, by scenario.
var tellings = map[string]harness.Telling{
	"lost-reply": {
		Title: "the cluster carries out a request whose reply never reaches the client",
		Story: "C1's request is carried out, but the reply is lost with the connection: etcd's client " +
			"returns Unavailable, and retries only the requests that read. A Txn that put C1's key under " +
			"the lock's prefix, unheard, fails etcd-lease's acquire, which revokes its lease on any error: the " +
			"key goes with it, and C1's retry, on a new lease, finds the lock free. A lease granted unheard " +
			"carries nothing and runs out.",
		Source: srcEtcdLease + "; ZOOKEEPER-1262 (the same question on ZooKeeper)",
	},
	"stale-recovery": {
		Title: "two clients take a crashed holder's lock at once",
		Story: "C3 takes the lock and crashes; its lease runs out and the leader deletes its key. C1 and C2 " +
			"both put a key under the lock's prefix: the server orders them by create revision, the lowest " +
			"holds, and exactly one of them acquires.",
		Source: srcEtcdLease,
	},
	"clock-skew": {
		Title: "a client whose clock runs ahead: nothing to steal",
		Story: "C2's clock is 32s ahead. etcd's lease expires on the cluster's clock, not a client's: C2 " +
			"sees C1's key under the prefix and is refused.",
		Source: srcEtcdLease,
	},
	"crash-before-expire": {
		Title: "the holder crashes holding the lock",
		Story: "C1 crashes holding the lock. Its key lives as long as its lease: the lease's TTL passes " +
			"with nobody renewing it, the leader revokes it and deletes the key, and the next client acquires.",
		Source: srcEtcdLease,
	},
	"ttl-pushed-by-waiters": {
		Title: "a crashed holder and a waiter who keeps trying",
		Story: "C1 takes the lock and crashes; C2 tries every 20s. A refused try deletes its own key and " +
			"revokes its own lease; C1's lease keeps its TTL, and C2 acquires once it has passed.",
		Source: srcEtcdLease,
	},
	"pause-in-release": {
		Title: "the holder stops inside its release, and its lease runs out",
		Story: "C1 holds the lock and begins its release. Anywhere in it C1's process stops past its lease's " +
			"TTL: its keepalive stops with it, the lease runs out and C1's key goes with it, and C2 acquires. " +
			"C1 wakes and finishes its release: etcd-lease's deletes its own key, by name, which is gone, and " +
			"revokes its own lease; etcd-mutex's Unlock deletes its own key, by name. Neither touches C2's key.",
		Source: srcEtcdLease,
	},
	"release-after-expiry": {
		Title: "a holder past its lease releases: nothing of its successor's is deleted",
		Story: "C1 holds the lock while time passes. Its session's keepalive renews the lease, and C2 is " +
			"refused; had the lease run out and C2 acquired, C1's late release would delete its own key only " +
			"if the key still had the create revision C1 got: it would have gone, and C2's key would be left " +
			"alone.",
		Source: srcEtcdLease,
	},
	"pause-past-ttl": {
		Title: "a holder pauses past its lease (no fencing)",
		Story: "C1 acquires, then stops for longer than its lease's TTL. Nothing renews the lease while C1 " +
			"is stopped: the leader revokes it and deletes C1's key. C2 acquires and writes; C1 wakes up " +
			"and writes too. Consensus does not help: the lock was released correctly, and C1 does not know.",
		Source: srcEtcdJepsen,
	},
	"partitioned-holder": {
		Title: "the holder's lease runs out while it is cut off, and it keeps writing",
		Story: "C1 holds the lock when the network cuts it off from every member. Its session's keepalive " +
			"cannot reach the cluster either: the lease's TTL passes, the leader revokes it and deletes C1's " +
			"key. C2 acquires and writes. C1 does not learn it lost the lock; it writes again.",
		Source: srcEtcdJepsen,
	},
	"session-replaced": {
		Title: "the holder's lease runs out while it is cut off, and its client connects again",
		Story: "C1 holds the lock when the network cuts it off from every member. Its keepalive cannot reach " +
			"the cluster either: the lease's TTL passes, the leader revokes it and deletes C1's key, and C2 " +
			"acquires and writes. The network heals, and etcd's client connects again on its own; a lease is " +
			"not replaced, though: etcd-lease's keepalive finds its lease gone, and a concurrency.Session closes " +
			"its Done channel, which tells only a holder that watches it. Nothing in C1's own requests says " +
			"anything: its write carries its key's create revision, lower than C2's, and the resource refuses " +
			"it; etcd-lease's release finds its lease gone, and Mutex.Unlock deletes nothing and returns " +
			"success. An acquirer has no gap to be cut off in: its put and its read of the first key are one " +
			"transaction, and Mutex.Lock reads its own key back after a wait (waiter-lease-expires).",
		Source: "etcd's Go client, package concurrency (Session.Done, Mutex.Lock, Mutex.Unlock); " + srcEtcdJepsen,
	},
	"waiter-lease-expires": {
		Title: "a waiter's session lease runs out while it waits in Mutex.Lock",
		Story: "C1 holds the lock. C2's Mutex.Lock puts its key under the lock's prefix, attached to its " +
			"session's lease, and watches the key created before its own. C2 pauses while it waits, past its " +
			"lease's TTL: its keepalive stops with it, the leader revokes the lease and deletes C2's key, " +
			"while C1's keepalive keeps C1's. Mutex.Lock does not notice (it watches its predecessor, not its " +
			"own key). C2 resumes; C1 releases, and C2's watch fires: no key created before its own is left. " +
			"Before Jepsen's etcd 3.4.3 analysis Lock returned there, and C2 held the lock beside C1, whose " +
			"next Lock finds its own new key first; since, Lock reads C2's key back, finds it gone and fails " +
			"with ErrSessionExpired.",
		Source: srcEtcdMutex,
	},
	"failover-loses-lock": {
		Title: "the leader dies for good; the others elect a new one, which has the lock",
		Story: "C1 holds the lock when the cluster's leader is killed, and stays down. The other two members " +
			"elect a new leader. A write is acknowledged only once a quorum of members has it, and only a " +
			"member with every acknowledged write can be elected: the new leader has C1's key and lease, " +
			"and C2 is refused.",
		Source: srcEtcdFailures,
	},
	"restart-loses-lock": {
		Title: "the leader restarts on its data directory; the lock survives",
		Story: "C1 holds the lock when the leader is killed and started again on its data directory. The " +
			"others elect a new leader, which has every committed key, and the restarted member catches " +
			"up from its raft log: C1's key is there, and C2 is refused.",
		Source: srcEtcdFailures,
	},
	"member-loses-data": {
		Title: "a member comes back with an empty data directory while another lags: etcd bootstraps it afresh",
		Story: "A, a follower, is killed before C1 takes the lock: B, the leader, and C acknowledge C1's key. " +
			"C and then B are killed, and C is started again on an emptied data directory, with its flags of " +
			"every start (its name, peer URL and cluster token, --initial-cluster-state new). etcd 3.4 first " +
			"asks its peers whether the member was bootstrapped before: where one answers, C refuses to start " +
			"(\"member ... has already been bootstrapped\") and nothing is lost. Here none answers, since A is " +
			"started only once C's log says it started its raft node: C bootstraps a fresh log as the same " +
			"member of the same cluster, votes for A, whose log is longer, and A leads without C1's key. B, " +
			"started again, takes the new leader's entries in place of the one it had (it had not recorded " +
			"that entry committed; a member that had stops instead, and stays down). C2 acquires while C1 " +
			"holds. The fence is a create revision, and the revision went back with the lost write.",
		Source: "etcd 3.4, etcdserver (isMemberBootstrapped); etcdproc's TestMemberRestartsEmpty; " +
			"Flavio Junqueira, \"Dude, where's my metadata?\" (2015); Alagappan et al., \"Protocol-Aware Recovery " +
			"for Consensus-Based Storage\" (FAST '18)",
	},
}

// known are the schedules told or found for the etcd strategies, by
// scenario and then strategy (harness.Driver.Known): each cell replays
// them before its search, and the pages pin them.
var known = map[string]map[string][]string{
	"member-loses-data": {
		"etcd-lease": {"lag(n1) c1 c1 c1 wipe(n1) c2 c2"},
		"etcd-mutex": {"lag(n1) c1 c1 c1 wipe(n1) c2 c2"},
	},
	"pause-past-ttl-guarded": {
		"etcd-lease": {"c1 c1 c1 c2 c2 c2 c1"},
	},
	"pause-past-ttl": {
		"etcd-lease": {"c1 c1 c1 c2 c2 c2 c2 c2 c1"},
	},
	"pause-past-ttl-fenced": {
		"etcd-lease": {"c1 c1 c1 c2 c2 c2 c2 c2 c1"},
	},
	"partitioned-holder": {
		"etcd-lease": {"c1 c1 isolate(c1) time c2 c2 c2 c2 c2 c1"},
	},
	"failover-loses-lock": {
		"etcd-lease": {"c1 c1 failover(n1) c2 c2"},
	},
	"session-replaced": {
		// The holder is cut off once it holds, its lease runs out, C2
		// takes the lock and writes, C1 comes back and writes, then
		// releases.
		"etcd-lease": {"c1 c1 isolate(c1) time c2 c2 c2 rejoin(c1) c1 c1 c1 c2 c2"},
		"etcd-mutex": {"c1 c1 isolate(c1) time c2 c2 c2 rejoin(c1) c1 c1 c2"},
	},
	"waiter-lease-expires": {
		// The story: c2 waits on its watch, pauses past its lease's TTL,
		// and is refused after c1's release.
		"etcd-mutex": {"c1 c1 c2 c2 c2 pause(c2) time resume(c2) c1 c1 c2 c2 c1 c1 c1"},
	},
}

// playLevels are the store's challenges in locklab play
// (harness.Driver.PlayLevels).
var playLevels = []harness.PlayLevel{
	{ID: "etcd-pause", Scenario: "pause-past-ttl", Strategy: "etcd-lease", Docs: "etcd.md",
		Title: "etcd: consensus does not wake a sleeper",
		Goal: "etcd-lease on a three-member etcd cluster: the lock is a key on a lease, replicated by Raft before any answer. " +
			"C1 sleeps past its lease's TTL. Make C1 write to the resource after C2, its successor, has written."},
	{ID: "etcd-fenced", Scenario: "pause-past-ttl-fenced", Strategy: "etcd-lease", Docs: "etcd.md", Safe: true,
		Title: "etcd's revision as a fence (you can't: why?)",
		Goal: "The same pause, but the resource now refuses a fence number lower than one it has seen, and etcd-lease's " +
			"fence is the lock key's revision. Try to get C1's stale write through; then play the run to its end.",
		Why: "C1's lease still ran out while it slept, and C2 took the lock: no lease can stop a paused holder. But the " +
			"fence is the create revision of the lock key, and etcd's one revision counter grows with every write: " +
			"C2's key was created after C1's, so C2's fence is higher, and once the resource has taken C2's write it " +
			"refuses C1's. The resource, not the lock, has the last word."},
	{ID: "etcd-session-replaced", Scenario: "session-replaced", Strategy: "etcd-mutex", Docs: "etcd.md", Safe: true,
		Title: "etcd: cut off, and back (you can't: why?)",
		Goal: "etcd-mutex is etcd's own concurrency.Mutex, on a Session's lease. Cut C1 off from the cluster while it " +
			"holds (isolate(c1)), let its lease run out, and let it back: etcd's client connects again on its own. " +
			"Try to get C1's stale write through after C2's; then play the run to its end.",
		Why: "C1's lease ran out while it was cut off: the leader revoked it and deleted C1's key, and C2 took the " +
			"lock. etcd's client connected again, and nothing in C1's own requests said the lock was gone: only the " +
			"Session's Done channel, which C1 does not watch. But C1's write carries its key's create revision, and " +
			"C2's key was created after it: the resource, which has seen C2's higher fence, refuses C1's write. " +
			"Mutex.Unlock then deletes nothing and returns success. The fence, not the lock, had the last word."},
}
