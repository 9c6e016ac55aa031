// The scenario catalog: each story of how a lock fails, with its clients'
// programs, its schedule or the faults the explorer may insert, and the
// property it threatens.

package harness

import (
	"time"

	"github.com/locklab/locklab/harness/fault"
)

// TTL is the lock TTL of every catalog scenario. It is virtual: the servers
// see it as a real TTL too, long enough that only the harness's "time"
// events make keys expire during a run.
const TTL = 30 * time.Second

const setnxPage = "Redis documentation, SETNX command page, \"Design pattern: Locking with SETNX\" (withdrawn)"

var catalog = []*Scenario{
	{
		Name:  "stale-recovery",
		Title: "two clients recover a crashed holder's stale lock at once (C1/C2)",
		Story: "C3 takes the lock and crashes. Its TTL passes. C1 and C2 both try the lock: SETNX answers 0 to " +
			"both, both GET the expired timestamp, C1 sends DEL and SETNX and wins, then C2 sends DEL, deleting " +
			"C1's fresh lock, and SETNX, and wins too: both hold the lock. GETSET (C4/C5) closes this hole: the " +
			"second client's GETSET returns the first one's fresh timestamp and it backs off. " +
			"On Redlock's three nodes C3 wins all three and crashes, and C1 and C2 race node by node: SET NX lets" +
			" one of them in on each node and two majorities of three always share a node, so at most one wins; " +
			"the other releases what it got.",
		Source:    setnxPage,
		Property:  MutualExclusion,
		Programs:  progs("acquire write release", "acquire write release", "acquire crash"),
		Schedule:  "c3 time c1 c2 c1 c2 c1 c1 c2 c2",
		Faults:    []string{"time"},
		MaxFaults: 1,
		Several: &Several{Schedule: "c3 c3@n1 c3@n2 c3@n3 time c1 c2 c1@n1 c2@n2 c1@n3 c2@n1 c1@n2 c2@n3",
			MaxPreemptions: 1},
	},
	{
		Name:  "stale-recovery-getset",
		Title: "the C4/C5 recovery with GETSET: the slower client sees a fresh timestamp",
		Story: "C3 takes the lock and crashes; its TTL passes. C1 and C2 both find the stale timestamp. C2 " +
			"sends GETSET first and gets the stale value: it holds the lock. C1's GETSET returns C2's fresh " +
			"timestamp, so C1 is refused (and has overwritten C2's timestamp with its own, which the page " +
			"says does no harm). " +
			"On Redlock the slower client, C1, finds C2's fresh key on every node and is refused.",
		Source:    setnxPage,
		Property:  MutualExclusion,
		Programs:  progs("acquire write release", "acquire write release", "acquire crash"),
		Schedule:  "c3 time c1 c2 c1 c2 c2 c1",
		Faults:    []string{"time"},
		MaxFaults: 1,
		Several: &Several{Schedule: "c3 c3@n1 c3@n2 c3@n3 time c2 c2@n1 c2@n2 c2@n3 c1 c1@n1 c1@n2 c1@n3",
			NoPreemption: true},
	},
	{
		Name:  "crash-before-expire",
		Title: "the holder crashes between the acquiring command and EXPIRE",
		Story: "C1's acquire is two commands, SETNX (or INCR) then EXPIRE. C1 crashes after the first: the key " +
			"exists with no TTL, nobody will ever delete it, and every later client is refused forever. " +
			"Redlock's acquire is one SET NX PX per node: C1 crashes after its SET reached n1, that key carries " +
			"its TTL, and C2 wins n2 and n3.",
		Source:    "the SETNX+EXPIRE and INCR+EXPIRE locks of the Chinese articles on Redis locks (葉劍峰, \"解鎖redis鎖的正確姿勢\", cnblogs; blog post \"Redis实现分布式全局锁\")",
		Property:  NoDeadlock,
		Programs:  progs("acquire write release", "acquire*2 write release"),
		Schedule:  "c1 crash(c1)",
		Faults:    []string{"crash(c1)"},
		MaxFaults: 1,
		Several:   &Several{Schedule: "c1 c1@n1 crash(c1)", NoPreemption: true},
	},
	{
		Name:  "ttl-pushed-by-waiters",
		Title: "failed tries push the TTL forward and starve the waiters",
		Story: "C1 takes the lock and crashes. C2 tries every 20s with a 30s TTL. When a failed try resets the " +
			"TTL (MULTI INCR EXPIRE EXEC runs EXPIRE whether or not INCR returned 1), the key never reaches its " +
			"expiry while someone keeps trying: C2 starves, although the lock frees itself as soon as nobody tries. " +
			"Redlock's failed try deletes the keys it set itself and leaves the holder's TTL alone.",
		Source:   "the INCR/EXPIRE lock in a MULTI/EXEC transaction, after the blog post \"Redis实现分布式全局锁\"",
		Property: NoStarvation,
		Programs: progs("acquire crash",
			"acquire sleep(20s) acquire sleep(20s) acquire sleep(20s) acquire sleep(20s) acquire write release"),
		Waiter:       2,
		NoPreemption: true,
		Several:      &Several{},
	},
	{
		Name:  "release-after-expiry",
		Title: "a holder past its TTL releases and deletes its successor's lock",
		Story: "C1 holds the lock and runs past its TTL; the key expires and C2 acquires. C1 then releases: a " +
			"blind DEL deletes C2's key; a GET-compare-then-DEL checks first, but the key can expire and be taken " +
			"between the GET and the DEL. Either way C2 is now unprotected and a third client can walk in. " +
			"Redlock releases with a compare-and-delete on every node: the late release deletes nothing of C2's.",
		Source:    "the DEL release of the Chinese articles on Redis locks (葉劍峰, \"解鎖redis鎖的正確姿勢\", cnblogs); Redis SET command page on safe release",
		Property:  ReleaseSafety,
		Programs:  progs("acquire write release", "acquire write release"),
		Faults:    []string{"time"},
		MaxFaults: 1,
		Several: &Several{Schedule: "c1 c1@n1 c1@n2 c1@n3 c1 time c2 c2@n1 c2@n2 c2@n3 c1 c1@n1 c1@n2 c1@n3",
			MaxPreemptions: 1},
	},
	{
		Name:  "pause-in-release",
		Title: "the holder stops inside its release, past its TTL, and deletes its successor's lock",
		Story: "C1 holds the lock and begins its release. Anywhere in it, between a GET and its DEL say, C1's " +
			"process stops (a GC pause, a swapped-out VM) for longer than the TTL: the key expires and C2 " +
			"acquires. C1 wakes and finishes its release: a GET-compare-then-DEL deletes C2's key, whose " +
			"value C1 checked before it stopped. This is release-after-expiry with the delay inside the " +
			"release, where a lock whose expiry is a session's (ZooKeeper, etcd) lets the holder's lock go only " +
			"while the holder is silent. A compare-and-delete in one script has no inside.",
		Source:     "Martin Kleppmann, \"How to do distributed locking\" (2016): process pauses; the Redis SET command page on safe release",
		Property:   ReleaseSafety,
		Programs:   progs("acquire write release", "acquire write release"),
		Faults:     []string{"pause(c1)", "time", "resume(c1)"},
		MaxFaults:  3,
		FaultAfter: map[string]string{"time": "pause(c1)", "resume(c1)": "time"},
		Several:    &Several{NoPreemption: true},
	},
	{
		Name:  "clock-skew",
		Title: "a client whose clock runs ahead steals a live timestamp lock",
		Story: "Timestamp locks decide expiry with the client's own clock. C2's clock is 32s ahead: C1's fresh " +
			"timestamp looks expired to it, so C2 recovers the lock C1 still validly holds. " +
			"Redlock reads the client's clock only to time its own round: keys expire on the servers' clocks, so " +
			"C2's clock cannot make C1's keys look expired (a jump during C2's round only shrinks C2's validity).",
		Source:    setnxPage + "; the tornado-redis Lock",
		Property:  MutualExclusion,
		Programs:  progs("acquire write release", "acquire write release"),
		Faults:    []string{"skew(c2,+32s)"},
		MaxFaults: 1,
		Several:   &Several{Schedule: "c1 c1@n1 c1@n2 c1@n3 skew(c2,+32s) c2 c2@n1 c2@n2 c2@n3", MaxPreemptions: 1},
	},
	{
		Name:  "pause-past-ttl",
		Title: "a holder pauses past its TTL and writes after its successor (no fencing)",
		Story: "C1 acquires, then stops (a GC pause) for longer than the TTL. The key expires, C2 acquires and " +
			"writes to the protected resource. C1 wakes up, still believing it holds the lock, and writes too: " +
			"the resource, which does not check fence numbers, accepts the stale write. " +
			"On Redlock the pause outlasts C1's validity on every node: the same stale write, since nothing " +
			"checks the lock after the acquire.",
		Source:   "Martin Kleppmann, \"How to do distributed locking\" (2016)",
		Property: Fencing,
		Programs: progs("acquire sleep(32s) write release", "acquire write release"),
		Several:  &Several{Schedule: "c1 c1@n1 c1@n2 c1@n3 c1 c2 c2@n1 c2@n2 c2@n3 c2 c1", MaxPreemptions: 1},
	},
	{
		Name:  "pause-past-ttl-fenced",
		Title: "the same pause against a resource that checks fence numbers",
		Story: "As in pause-past-ttl, but every write carries the lease's fence number and the resource refuses " +
			"a number lower than one it has seen: C1's stale write is refused when the strategy issues fence " +
			"numbers, and accepted when it does not. " +
			"Redlock's leases all carry fence 0, as in redlock-pause: the resource cannot tell the stale write.",
		Source:   "Martin Kleppmann, \"How to do distributed locking\" (2016)",
		Property: Fencing,
		Programs: progs("acquire sleep(32s) write release", "acquire write release"),
		Fenced:   true,
		Several:  &Several{Schedule: "c1 c1@n1 c1@n2 c1@n3 c1 c2 c2@n1 c2@n2 c2@n3 c2 c1", MaxPreemptions: 1},
	},
	{
		Name:  "partitioned-holder",
		Title: "the holder is cut off from Redis and keeps writing",
		Story: "C1 holds the lock when the network cuts it off from Redis. The TTL passes, C2 acquires and " +
			"writes. C1 cannot reach Redis to learn it lost the lock; it writes again, and its release fails. " +
			"On Redlock C1 is cut off from all three nodes: the same stale write.",
		Source:     "Martin Kleppmann, \"How to do distributed locking\" (2016)",
		Property:   Fencing,
		Programs:   progs("acquire write write release", "acquire write release"),
		Faults:     []string{"isolate(c1)", "time"},
		FaultAfter: map[string]string{"time": "isolate(c1)"},
		MaxFaults:  2,
		Several: &Several{Schedule: "c1 c1@n1 c1@n2 c1@n3 c1 isolate(c1) time c2 c2@n1 c2@n2 c2@n3 c2 c1",
			MaxPreemptions: 1},
	},
	{
		Name:  "pause-past-ttl-guarded",
		Title: "the same pause against a write the lock's own store guards",
		Story: "As in pause-past-ttl, but the protected resource lives on the lock's own store, and each write is " +
			"one atomic request that the store carries out only while the writer holds the lock, checked " +
			"against what the lock handed the client when it took it: on Redis a script that writes only if " +
			"the lock key still holds the client's token; on etcd a Txn that writes only if the lock key still " +
			"has the create revision it had; on ZooKeeper a multi whose check op names the lock node and its " +
			"version; on PostgreSQL an UPDATE of a row with a version column, read when the lock was taken. " +
			"C1 takes the lock and stops past its TTL; C2 takes it and writes. C1 wakes up and writes: the " +
			"store refuses the write wherever its guard tells C2's hold from C1's. A guard that cannot (a " +
			"token every holder shares, a node path and version a successor's node has too) lets the stale " +
			"write through.",
		Source: "etcd, v3lock API (\"can be used in conjunction with transactions to safely ensure updates to etcd " +
			"only occur while holding lock ownership\"); ZooKeeper Programmer's Guide, multi and its check op; " +
			"Redis distributed locks page (a script that compares the token); Martin Kleppmann, \"How to do " +
			"distributed locking\" (2016)",
		Property: Fencing,
		Programs: progs("acquire sleep(32s) write release", "acquire write release"),
		Guarded:  true,
	},
	{
		Name:  "partitioned-holder-guarded",
		Title: "the partitioned holder against a write the lock's own store guards",
		Story: "As in partitioned-holder, but each write is one atomic request to the lock's own store that " +
			"it carries out only while the writer holds the lock (pause-past-ttl-guarded says each store's " +
			"guard). While C1 is cut off its writes cannot reach the store at all; once the network heals, " +
			"C1's write carries the guard it had when it took the lock: the store refuses it wherever the " +
			"guard tells C2's hold, or no hold, from C1's.",
		Source: "etcd, v3lock API; ZooKeeper Programmer's Guide, multi and its check op; Redis distributed " +
			"locks page; Martin Kleppmann, \"How to do distributed locking\" (2016)",
		Property:   Fencing,
		Programs:   progs("acquire write write release", "acquire write release"),
		Faults:     []string{"isolate(c1)", "time", "rejoin(c1)"},
		FaultAfter: map[string]string{"time": "isolate(c1)", "rejoin(c1)": "isolate(c1)"},
		MaxFaults:  3,
		Guarded:    true,
	},
	{
		Name:  "waiter-lease-expires",
		Title: "a waiter's lease runs out while it waits in the queue",
		Story: "C1 holds the lock. C2 queues behind it: it puts its key, attached to its own lease, in the " +
			"lock's queue on the server and waits for the key before its own to go. C2 then stops (a GC pause) " +
			"while it waits, past its lease's TTL: nothing renews its lease, the server ends it and deletes C2's " +
			"key, while C1, running, keeps its own. C2 resumes; C1 releases and takes the lock again. A lock " +
			"that now tells C2 it holds, because the key before its own went, gives two holders: C2's key is " +
			"gone and C1's new key is first. A lock that reads its own key back after the wait tells C2 it " +
			"lost its place instead.",
		Source: "Jepsen, \"etcd 3.4.3\" (Kyle Kingsbury, 2020): a waiting lock returned after its lease had expired; " +
			"etcd's Go client, concurrency/mutex.go (Mutex.Lock reads its key back: ErrSessionExpired)",
		Property:   MutualExclusion,
		Programs:   progs("acquire write release acquire write release", "acquire write release"),
		Faults:     []string{"pause(c2)", "time", "resume(c2)"},
		FaultAfter: map[string]string{"time": "pause(c2)", "resume(c2)": "time"},
		MaxFaults:  3,
		// A wait is no preemption: one switch from C1 to C2 queues C2.
		MaxPreemptions: 1,
		Applies:        queues,
	},
	{
		Name:  "session-replaced",
		Title: "the holder's session ends while it is cut off, and its client opens another",
		Story: "C1's lock lives in a session: a ZooKeeper session, an etcd lease, a PostgreSQL connection. The " +
			"network cuts C1 off from the servers, while it holds the lock or while it is acquiring it, between " +
			"a request that queued its node and the read that tells it its place. Nothing is heard from C1 for " +
			"the session's timeout: the server ends the session and deletes what it owned. C2 acquires and " +
			"writes. The network heals and C1's client library connects again, as it does by default, on a " +
			"new session: its requests succeed again, and nothing in them says that the lock went with the old " +
			"session. A holder goes on as one; an acquirer that looks for the lowest node from its own place " +
			"in line, without checking that its node is still there, takes itself for the holder beside C2. " +
			"The resource checks fence numbers: what stops C1's stale write is a fence from the server that " +
			"grows with C2's acquire. " +
			"A Redis lock is a key with a TTL and no session: a client cut off past it and back is " +
			"partitioned-holder's.",
		Source: "samuel/go-zookeeper#20 (\"Is there a way to tell if a previously acquired lock has been lost?\": " +
			"go-zookeeper opens a new session on its own after the old one expired, and zk.Lock never learns); " +
			"CURATOR-604 (an acquire after a reconnection succeeds on the previous session's node); " +
			"Martin Kleppmann, \"How to do distributed locking\" (2016)",
		Property:   Fencing,
		Programs:   progs("acquire write release", "acquire write release"),
		Faults:     []string{"isolate(c1)", "time", "rejoin(c1)"},
		FaultAfter: map[string]string{"time": "isolate(c1)", "rejoin(c1)": "time"},
		MaxFaults:  3,
		Fenced:     true,
		Applies:    ownSessions,
	},
	{
		Name:  "lost-reply",
		Title: "the server carries out a request whose reply never reaches the client",
		Story: "C1 sends a request, and the server carries it out, but the connection drops before the reply " +
			"reaches C1: its client sees the connection lost, not what the server did, and C1 tries again on a " +
			"new one, as a client whose acquire failed does. An acquire that succeeded unheard leaves a lock " +
			"that nobody knows is held: the retry finds the key taken, by C1 itself, and is refused, and so is " +
			"everyone else until the key expires. Where the acquire is SETNX or INCR and then EXPIRE, the " +
			"EXPIRE is never sent: the key has no TTL, and nobody acquires again, as after crash-before-expire " +
			"but with C1 alive. A release that succeeded unheard did what it was asked; one that only read " +
			"first gives up. The explorer loses the reply to each of C1's requests in turn. " +
			"On Redlock the reply lost is one node's: C1 counts that node as failed, and its majority decides.",
		Source:    "ZOOKEEPER-1262 (a create whose reply is lost, and Apache Curator's protected mode); samuel/go-zookeeper#229",
		Property:  NoDeadlock,
		Programs:  progs("acquire*2 write release", "acquire write release"),
		Faults:    []string{"lose(c1)"},
		MaxFaults: 1,
		Several:   &Several{NoPreemption: true},
	},
	{
		Name:  "pause-session-killed",
		Title: "the server ends a paused holder's session (no fencing)",
		Story: "C1 acquires, then stops (a GC pause) for 5s, well within its lock's TTL. Meanwhile the server " +
			"ends C1's session: an administrator kills it, an idle-session timeout fires, a pooler or a proxy " +
			"closes the idle connection. A lock that lives in the session ends with it: C2 acquires and " +
			"writes, and C1 wakes up, still believing it holds the lock, and writes too. A lock kept as data " +
			"outlives the session, and C2 is refused until its expiry.",
		Source:    "Martin Kleppmann, \"How to do distributed locking\" (2016)",
		Property:  Fencing,
		Programs:  progs("acquire sleep(5s) write release", "acquire write release"),
		Faults:    []string{"terminate(c1)"},
		MaxFaults: 1,
		Applies:   sessionEnds,
	},
	{
		Name:  "pause-session-killed-fenced",
		Title: "the same ended session against a resource that checks fence numbers",
		Story: "As in pause-session-killed, but every write carries the lease's fence number and the resource " +
			"refuses a number lower than one it has seen: C1's stale write is refused when the lock issues " +
			"fence numbers, and accepted when it does not.",
		Source:    "Martin Kleppmann, \"How to do distributed locking\" (2016)",
		Property:  Fencing,
		Programs:  progs("acquire sleep(5s) write release", "acquire write release"),
		Faults:    []string{"terminate(c1)"},
		MaxFaults: 1,
		Fenced:    true,
		Applies:   sessionEnds,
	},
	{
		Name:  "pause-session-killed-guarded",
		Title: "the same ended session against a write the lock's own store guards",
		Story: "As in pause-session-killed, but each write is one atomic request to the lock's own store that " +
			"it carries out only while the writer holds the lock (pause-past-ttl-guarded says each store's " +
			"guard): C1 took its guard with the lock, C2 takes the lock and writes, and C1's write is refused " +
			"wherever the guard tells C2's hold from C1's, whatever the lock let through.",
		Source:    "Martin Kleppmann, \"How to do distributed locking\" (2016)",
		Property:  Fencing,
		Programs:  progs("acquire sleep(5s) write release", "acquire write release"),
		Faults:    []string{"terminate(c1)"},
		MaxFaults: 1,
		Guarded:   true,
		Applies:   sessionEnds,
	},
	{
		Name:  "redlock-restart",
		Title: "a Redlock node restarts without persistence and forgets the lock",
		Story: "C1 gets n1 and n2, a majority of three. n2 restarts without persistence and comes back empty. " +
			"C2, which got n3, now gets n2 as well: a majority too. C1 and C2 both hold the lock.",
		Source:    "Martin Kleppmann, \"How to do distributed locking\" (2016); Redis distributed locks page",
		Property:  MutualExclusion,
		Programs:  progs("acquire write release", "acquire write release"),
		Schedule:  "c1 c2 c1@n1 c1@n2 c2@n3 restart(n2) c2@n1 c2@n2 c1@n3",
		Faults:    []string{"restart(n2)"},
		MaxFaults: 1,
		MultiNode: true,
		Needs:     []fault.Fault{fault.Restart},
	},
	{
		Name:  "redlock-restart-delayed",
		Title: "the same restart, delayed until the TTL has passed: Redlock's own remedy",
		Story: "As in redlock-restart, C1 gets n1 and n2 and n2 restarts without persistence. But n2 stays down " +
			"longer than the TTL before it rejoins, as the Redlock page asks: by then every lock it could have " +
			"held has expired everywhere, C1's lease included, so whatever majority C2 wins, nobody else holds one. " +
			"After the story's own interleaving, the explorer tries the restart at every point of the clients' " +
			"natural order: the remedy is a matter of time, not of interleaving.",
		Source: "Redis distributed locks page (\"Performance, crash recovery and fsync\": delayed restarts); " +
			"the notes \"分布式锁 Distributed Lock\" (如果某一台 redis 挂了，要延迟重启)",
		Property:     MutualExclusion,
		Programs:     progs("acquire write release", "acquire write release"),
		Schedule:     "c1 c2 c1@n1 c1@n2 c2@n3 restart(n2,delayed) c2@n1 c2@n2 c1@n3",
		Faults:       []string{"restart(n2,delayed)"},
		MaxFaults:    1,
		NoPreemption: true,
		MultiNode:    true,
		Needs:        []fault.Fault{fault.Restart},
	},
	{
		Name:  "redlock-restart-fsync",
		Title: "the same restart, with every write fsynced to the append-only file: Redlock's other remedy",
		Story: "As in redlock-restart, C1 gets n1 and n2, C2 gets n3, and n2 restarts. But every node writes " +
			"each command to its append-only file before it answers (appendfsync always), and n2 comes back from " +
			"that file: C1's key is there again, with its expiry, so n1 and n2 both refuse C2, which has no " +
			"majority. The explorer then tries the restart at every point of the clients' natural order.",
		Source: "Redis distributed locks page (\"Performance, crash recovery and fsync\": fsync=always); " +
			"Redis persistence page (AOF, appendfsync always)",
		Property:     MutualExclusion,
		Programs:     progs("acquire write release", "acquire write release"),
		Schedule:     "c1 c2 c1@n1 c1@n2 c2@n3 restart(n2,keep) c2@n1 c2@n2 c1@n3",
		Faults:       []string{"restart(n2,keep)"},
		MaxFaults:    1,
		NoPreemption: true,
		MultiNode:    true,
		Needs:        []fault.Fault{fault.RestartKeep},
		AppendFsync:  "always",
	},
	{
		Name:  "redlock-clock-jump",
		Title: "one Redlock node's clock jumps and its key expires early",
		Story: "C1 gets n1 and n2. The clock of n2 jumps forward, so its copy of the key expires at once. C2, " +
			"which got n3, gets n2 too: two majorities at once.",
		Source:    "Martin Kleppmann, \"How to do distributed locking\" (2016)",
		Property:  MutualExclusion,
		Programs:  progs("acquire write release", "acquire write release"),
		Schedule:  "c1 c2 c1@n1 c1@n2 c2@n3 expire(n2) c2@n1 c2@n2 c1@n3",
		Faults:    []string{"expire(n2)"},
		MaxFaults: 1,
		MultiNode: true,
	},
	{
		Name:  "redlock-minority-down",
		Title: "one of Redlock's three nodes is cut off during the race: the other two still decide",
		Story: "C1 and C2 race for the lock, and n3 is cut off from both at some point of the race. A client can then win " +
			"at most n1 and n2 besides what it got from n3 before, and two majorities of three always share a " +
			"node, which grants the key to one client only: whoever holds a majority holds the only one, and the " +
			"loser releases what it got. The explorer kills n3 at every point of the clients' natural order.",
		Source: "Redis distributed locks page (\"Safety arguments\": the majority of N/2+1 instances; " +
			"\"Liveness arguments\")",
		Property:     MutualExclusion,
		Programs:     progs("acquire write release", "acquire write release"),
		Schedule:     "c1 c2 c1@n1 c1@n2 partition(n3) c2@n1 c2@n2 c1@n3 c2@n3",
		Faults:       []string{"partition(n3)"},
		MaxFaults:    1,
		NoPreemption: true,
		MultiNode:    true,
		Needs:        []fault.Fault{fault.Partition},
	},
	{
		Name:  "redlock-pause",
		Title: "a Redlock holder pauses past its validity; Redlock has no fence to stop it",
		Story: "C1 wins a majority, then stops (a GC pause) for longer than the TTL. The keys expire on every " +
			"node, C2 wins a majority and writes. C1 wakes up and writes too. The resource checks fence " +
			"numbers, but Redlock's leases all carry 0, so it cannot tell the stale write from the fresh one.",
		Source:    "Martin Kleppmann, \"How to do distributed locking\" (2016), and antirez, \"Is Redlock safe?\" (2016)",
		Property:  Fencing,
		Programs:  progs("acquire sleep(32s) write release", "acquire write release"),
		Fenced:    true,
		MultiNode: true,
	},
	{
		Name:  "failover-loses-lock",
		Title: "asynchronous replication: the promoted replica never saw the lock",
		Story: "C1 acquires on the master. Before the write reaches the replica, the master fails and the " +
			"replica is promoted: the lock is gone, and C2 acquires it while C1 still holds it. The replica " +
			"misses every write, except that a client's WAIT lets it catch up first: a lock that waits for " +
			"the replica's acknowledgement before it is granted survives the failover to that replica. " +
			"On Redlock each node is a master of its own. When n1 fails over to its replica at the wrong moment, " +
			"C1 having won n1 and n2 and C2 still asking, the replica never saw C1's key and C2 wins n1 and n3: a" +
			" node that forgets a key it granted breaks the majority argument as a restart without persistence " +
			"does (redlock-restart). A failover before or after that overlap is harmless.",
		Source:    "Redis distributed locks page (\"Why failover-based implementations are not enough\"); Redis WAIT command page",
		Property:  MutualExclusion,
		Programs:  progs("acquire write release", "acquire write release"),
		Schedule:  "c1 failover(n1) c2",
		Faults:    []string{"failover(n1)"},
		MaxFaults: 1,
		Needs:     []fault.Fault{fault.Failover},
		Several:   &Several{Schedule: "c1 c1@n1 c1@n2 c2 failover(n1) c2@n1 c2@n2 c2@n3 c1@n3", NoPreemption: true},
	},
	{
		Name:  "restart-loses-lock",
		Title: "the lock's server restarts without persistence and forgets the lock",
		Story: "C1 acquires. The server restarts without persistence and comes back empty: C2 acquires while C1 " +
			"still holds the lock. A replica that acknowledged the lock (WAIT) does not help: it resyncs from " +
			"the restarted, empty master and forgets the lock too. " +
			"On Redlock, n1 restarts empty while C1 holds n1 and n2 and C2 is still asking: C2 wins n1 and n3, as" +
			" in redlock-restart.",
		Source:    "Redis distributed locks page (\"Performance, crash recovery and fsync\"); Redis WAIT command page",
		Property:  MutualExclusion,
		Programs:  progs("acquire write release", "acquire write release"),
		Schedule:  "c1 c1 restart(n1) c2",
		Faults:    []string{"restart(n1)"},
		MaxFaults: 1,
		Needs:     []fault.Fault{fault.Restart},
		Several:   &Several{Schedule: "c1 c1@n1 c1@n2 c2 restart(n1) c2@n1 c2@n2 c2@n3 c1@n3", NoPreemption: true},
	},
	{
		Name:  "member-loses-data",
		Title: "a member of a consensus cluster comes back with an empty data directory while another lags",
		Story: "The lock lives on a cluster of three members that acknowledges a write once a majority has it on " +
			"disk. A, a follower, is down (it lags) when C1 takes the lock: B and C acknowledge it. Then C " +
			"loses its disk, and B is down as C comes back empty: C and A are a majority that never saw the " +
			"lock. Where the servers let the emptied member vote, or bootstrap again, as if it were new, they " +
			"elect A and the acknowledged lock is gone; B, back, is told by the new leader what the log holds " +
			"and drops it too. C2, which tries after C1 has taken the lock and written, and before C1 " +
			"releases, acquires: both hold it. The explorer tries the lag and the emptying at every point of " +
			"the clients' natural order, the lag first.",
		Source: "Flavio Junqueira, \"Dude, where's my metadata?\" (2015); Ramnatthan Alagappan, Aishwarya Ganesan, " +
			"Eric Lee, Aws Albarghouthi, Vijay Chidambaram, Andrea C. Arpaci-Dusseau and Remzi H. Arpaci-Dusseau, " +
			"\"Protocol-Aware Recovery for Consensus-Based Storage\" (FAST '18)",
		Property: MutualExclusion,
		// C1 holds to the end of its program: C2's acquire comes while
		// it holds, in the natural order, whatever C1's acquire takes.
		Programs: progs("acquire write", "acquire write release"),
		// As many of C1's steps as any lock's acquire and write take:
		// those past the end of its program are skipped.
		Schedule:     "lag(n1) c1 c1 c1 c1 c1 c1 c1 c1 wipe(n1)",
		Faults:       []string{"lag(n1)", "wipe(n1)"},
		FaultAfter:   map[string]string{"wipe(n1)": "lag(n1)"},
		MaxFaults:    2,
		NoPreemption: true,
		Needs:        []fault.Fault{fault.MemberLoss},
	},
}

func progs(texts ...string) []Program {
	out := make([]Program, len(texts))
	for i, t := range texts {
		out[i] = mustParseProgram(t)
	}
	return out
}
