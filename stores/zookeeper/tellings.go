// The scenarios as told for ZooKeeper: the same clients and faults, and
// what they do to a lock that is an ephemeral node of a session.

package zookeeper

import "github.com/locklab/locklab/harness"

// Sources of the tellings.
const (
	srcZKRecipe = "ZooKeeper documentation, \"ZooKeeper Recipes and Solutions\" (Locks); Apache Curator, " +
		"InterProcessMutex (a protected ephemeral sequential node; the lowest holds)"
	srcZKSessions = "ZooKeeper Programmer's Guide, \"ZooKeeper Sessions\" (a session expires when the ensemble " +
		"hears nothing from its client for the session timeout; its ephemeral nodes are deleted)"
	srcZKCurator = "Apache Curator, CURATOR-206 (\"2 clients acquired the same InterProcessLock\") and " +
		"CURATOR-604; Martin Kleppmann, \"How to do distributed locking\" (2016): the zxid as a fencing token"
	srcZKZab = "Junqueira, Reed and Serafini, \"Zab: High-performance broadcast for primary-backup systems\" " +
		"(2011): a new leader has every committed transaction"
)

// tellings are the scenarios' stories on ZooKeeper, by scenario.
var tellings = map[string]harness.Telling{
	"lost-reply": {
		Title: "the ensemble carries out a request whose reply never reaches the client",
		Story: "C1's request is carried out, but its connection drops before the reply comes: go-zookeeper " +
			"fails the request with \"connection closed\" and reconnects to the same session, which lives on, " +
			"and with it every ephemeral node the request made. zk-ephemeral's create made the lock's node: " +
			"its retry is refused by its own node, which no one deletes while C1 lives, so every client is " +
			"refused for good. zk.Lock's create is protected (its node's name carries a GUID, and after a lost " +
			"reply it looks for it), but its wait is not: a lost reply to its getChildren returns an error with " +
			"its node left behind, its retry queues a second node behind the first, and C1 waits for itself " +
			"while everyone waits for C1. zk-recipe, as Curator does, finds its node by the GUID and deletes " +
			"what a failed acquire made.",
		Source: "ZOOKEEPER-1262 and Apache Curator's protected mode (CreateBuilder.withProtection); " +
			"samuel/go-zookeeper#229; " + srcZKRecipe,
	},
	"stale-recovery": {
		Title: "two clients take a crashed holder's lock at once",
		Story: "C3 takes the lock and crashes; nothing is heard from its session for the session timeout, " +
			"the ensemble expires it and deletes its node. C1 and C2 both create a node under the lock's " +
			"path: the server numbers them in order, the lowest holds, and exactly one of them acquires.",
		Source: srcZKRecipe,
	},
	"clock-skew": {
		Title: "a client whose clock runs ahead: nothing to steal",
		Story: "C2's clock is 32s ahead. A session expires on the ensemble's clock, not a client's: C2 " +
			"finds C1's node first in line and is refused.",
		Source: srcZKSessions,
	},
	"crash-before-expire": {
		Title: "the holder crashes holding the lock",
		Story: "C1 crashes holding the lock. Its node lives as long as its session: nothing is heard from " +
			"C1 for the session timeout, the ensemble expires the session and deletes the node, and the " +
			"next client acquires.",
		Source: srcZKSessions,
	},
	"ttl-pushed-by-waiters": {
		Title: "waiters cannot push a session's timeout",
		Story: "C2 and C3 try while C1 holds the lock. Their requests touch their own sessions and nodes, " +
			"not C1's: C1's session lives on its own heartbeats, and the waiters are refused.",
		Source: srcZKRecipe,
	},
	"pause-in-release": {
		Title: "the holder stops inside its release, and its session expires",
		Story: "C1 holds the lock and begins its release: zk-ephemeral's reads the node's czxid, then deletes " +
			"the node at the version it read. Anywhere in it C1's process stops past its session timeout: no " +
			"heartbeat leaves it, the ensemble expires the session and deletes C1's node, and C2 creates its " +
			"own, whose version is 0 as C1's was. C1 wakes and sends the rest of its release. Here a request " +
			"C1's library had handed to its connection before it stopped goes out on that connection, which " +
			"the session's end closed: the delete fails, and C2's node stays. go-zookeeper can also keep a " +
			"request it has not yet written for the session it opens next, and then the delete at version 0 " +
			"removes C2's node: this harness steps a client at its requests and cannot pause it before its " +
			"library writes one (strategies/zklock's TestEphemeralReleaseGap pauses it there). The " +
			"queues' releases delete their own node by name, which is gone.",
		Source: srcZKSessions + "; " + srcZKRecipe,
	},
	"release-after-expiry": {
		Title: "a release after the session expired deletes nothing of another's",
		Story: "C1's session expires while it holds the lock (it was paused), and C2 acquires with a node of " +
			"its own. C1 then releases: it deletes its own node, which is gone, not C2's.",
		Source: srcZKRecipe,
	},
	"pause-past-ttl": {
		Title: "a holder pauses past its session timeout (no fencing)",
		Story: "C1 acquires, then stops for longer than its session timeout. No heartbeat leaves its " +
			"stopped process: the ensemble expires the session and deletes C1's node. C2 acquires and " +
			"writes; C1 wakes up and writes too. Consensus does not help: the lock was released " +
			"correctly, and C1 does not know.",
		Source: srcZKCurator,
	},
	"partitioned-holder": {
		Title: "the holder's session expires while it is cut off, and it keeps writing",
		Story: "C1 holds the lock when the network cuts it off from every server. Its heartbeats cannot " +
			"reach the ensemble: the session timeout passes, the ensemble expires the session and deletes " +
			"C1's node. C2 acquires and writes. C1 does not learn it lost the lock until it reaches a " +
			"server again; it writes again.",
		Source: srcZKCurator,
	},
	"session-replaced": {
		Title: "the holder's session expires while it is cut off, and go-zookeeper opens another",
		Story: "C1 holds the lock when the network cuts it off from every server. Nothing is heard from it " +
			"for the session timeout: the ensemble expires the session and deletes C1's node, and C2 acquires " +
			"and writes. The network heals; go-zookeeper's connection finds its session expired and opens a " +
			"new one on its own, and C1's requests succeed again. zk.Lock never learns that its node is gone " +
			"(go-zookeeper#20): C1 writes as the holder, with no fence, and the resource takes the stale write; " +
			"only its release, which finds no node, says anything. zk-recipe's and zk-ephemeral's leases carry " +
			"their node's czxid, lower than C2's: the resource refuses C1's write. The cut may also fall on an " +
			"acquirer, after its create: here the request after the create is handed to the connection the " +
			"session's end closes, and fails. zk.Lock looks for the lowest sequence number from its own " +
			"node's, and never checks that its node is still in line: had the read been queued for the next " +
			"session instead (a process stopped past its timeout between the two requests), zk.Lock would " +
			"take C1 for the holder beside C2 (strategies/zklock's TestGolibNodeGoneBeforeChildren shows it " +
			"on an ensemble). zk-recipe reads its node's absence as its session's end, and queues again.",
		Source: "samuel/go-zookeeper#20; go-zookeeper v1.0.4, lock.go (LockWithData); CURATOR-604; " + srcZKCurator,
	},
	"failover-loses-lock": {
		Title: "the leader fails while a client holds the lock; the lock survives",
		Story: "C1 holds the lock when the leader is killed. The others elect a new leader, which has every " +
			"committed transaction, C1's node among them: C2 finds it and is refused.",
		Source: srcZKZab,
	},
	"restart-loses-lock": {
		Title: "the leader restarts on its data directory; the lock survives",
		Story: "C1 holds the lock when the leader is killed and started again on its data directory. The " +
			"others elect a new leader, which has every committed node, and the restarted server catches " +
			"up from it: C1's node is there, and C2 is refused.",
		Source: srcZKZab,
	},
	"member-loses-data": {
		Title: "a server comes back with an empty data directory while another lags: it votes with a zxid of 0",
		Story: "A, a follower, is killed before C1 takes the lock: B, the leader, and C acknowledge C1's node. " +
			"C and then B are killed, and C is started again with its snapshots, transaction log and epochs " +
			"removed, its myid kept. ZooKeeper 3.8 lets it vote as it is, with a zxid and epochs of 0: had B " +
			"been up, B would lead and sync C, and nothing would be lost. B is down: C votes for A, A leads " +
			"and sends C a snapshot without C1's node. B, started again, follows A and drops the node too. " +
			"C2 acquires while C1 holds.",
		Source: "ZooKeeper 3.8, FastLeaderElection; zkproc's TestServerRestartsEmpty; " +
			"Flavio Junqueira, \"Dude, where's my metadata?\" (2015); Alagappan et al., \"Protocol-Aware Recovery " +
			"for Consensus-Based Storage\" (FAST '18)",
	},
}

// known are the schedules told or found for the ZooKeeper strategies, by
// scenario and then strategy (harness.Driver.Known): each cell replays
// them before its search, and the pages pin them.
var known = map[string]map[string][]string{
	"member-loses-data": {
		"zk-ephemeral": {"lag(n1) c1 c1 c1 wipe(n1) c2 c2"},
		"zk-golib":     {"lag(n1) c1 c1 c1 c1 c1 wipe(n1) c2 c2"},
		"zk-recipe":    {"lag(n1) c1 c1 c1 c1 wipe(n1) c2 c2 c2"},
	},
	"lost-reply": {
		"zk-golib": {"c2 c1 lose(c1) c1 c1 c1 c1 c2 c2 c2"},
	},
	"pause-past-ttl-guarded": {
		// zk-ephemeral's successor creates the node at the same path, at
		// version 0: the stale holder's check passes on it.
		"zk-ephemeral": {"c1 c1 c1 c2 c2 c2 c1"},
		"zk-recipe":    {"c1 c1 c1 c1 c2 c2 c2 c2 c1"},
	},
	"pause-past-ttl": {
		"zk-golib":  {"c1 c1 c1 c2 c2 c2 c2 c1"},
		"zk-recipe": {"c1 c1 c1 c1 c2 c2 c2 c2 c2 c1"},
	},
	"pause-past-ttl-fenced": {
		"zk-recipe": {"c1 c1 c1 c1 c2 c2 c2 c2 c2 c1"},
	},
	"partitioned-holder": {
		"zk-golib": {"c2 c1 c1 c1 c2 c2 c2 c1"},
	},
	"session-replaced": {
		// The holder is cut off once it holds, its session expires, C2
		// takes the lock and writes, C1 comes back on a new session and
		// writes; for zk-golib also the cut between an acquirer's create
		// and its getChildren, which fails on the closed connection.
		"zk-golib":  {"c1 c1 isolate(c1) time c2 c2 c2 rejoin(c1) c1 c1 c2", "c1 isolate(c1) time rejoin(c1) c2 c2 c2 c1 c2"},
		"zk-recipe": {"c1 c1 c1 isolate(c1) time c2 c2 c2 c2 rejoin(c1) c1 c1 c2"},
	},
}

// playLevels are the store's challenges in locklab play
// (harness.Driver.PlayLevels).
var playLevels = []harness.PlayLevel{
	{ID: "zk-golib", Scenario: "pause-past-ttl-fenced", Strategy: "zk-golib", Docs: "zookeeper.md",
		Title: "ZooKeeper: go-zookeeper's lock has no fence",
		Goal: "zk-golib is go-zookeeper's zk.NewLock on a three-server ZooKeeper ensemble: the lock is an ephemeral " +
			"node that lives as long as C1's session. C1 sleeps past its session timeout, and the resource refuses a " +
			"fence lower than one it has seen. Make C1's stale write go through after C2's."},
	{ID: "zk-lost-reply", Scenario: "lost-reply", Strategy: "zk-golib", Docs: "zookeeper.md",
		Title: "ZooKeeper: a lost reply, and zk.Lock waits for itself",
		Goal: "zk.Lock on a three-server ensemble. You may lose the reply to one of C1's requests (lose(c1)): the " +
			"ensemble carries it out, and C1's connection drops before the answer comes. C1 tries again once. Lock " +
			"everyone out for good while every client lives.",
		Story: "zk.Lock creates its node with a GUID in the name, so a lost create is found again; but if the reply " +
			"to the getChildren after it is lost, Lock returns an error and leaves its node in line, kept by C1's " +
			"session, which reconnects and lives on. C1's retry queues a second node behind its own first one: C1 " +
			"waits for itself, and every later client waits for C1 (go-zookeeper#229)."},
	{ID: "zk-session-replaced", Scenario: "session-replaced", Strategy: "zk-golib", Docs: "zookeeper.md",
		Title: "ZooKeeper: a new session, and zk.Lock never learns",
		Goal: "zk.Lock on a three-server ensemble. Cut C1 off while it holds the lock (isolate(c1)), let its session " +
			"expire, and let it back (rejoin(c1)): go-zookeeper opens a new session on its own, and C1's requests " +
			"succeed again. The resource refuses a fence lower than one it has seen. Make C1's stale write go " +
			"through after C2's.",
		Answer: "c1 c1 isolate(c1) time c2 c2 c2 rejoin(c1) c1"},
}
