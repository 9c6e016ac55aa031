// Package redlock implements Redlock, the multi-master lock of the
// "Distributed locks with Redis" page of the Redis documentation, as the
// strategy "redlock".
//
// # The algorithm
//
// A Redlock runs on N independent Redis masters: no replication, no cluster,
// nothing shared between them. To take the lock on a key for a TTL, a client
//
//  1. reads the time (the Config's Clock; with SystemClock that is Go's
//     monotonic reading, immune to wall-clock steps);
//
//  2. sends SET key token NX PX ttl to every node at once, each answer
//     bounded by a node timeout that is small next to the TTL, so that a dead
//     or paused node cannot eat the lease;
//
//  3. counts the nodes that granted the key. With a majority (N/2+1) of them,
//     the lock is held for the validity time
//
//     validity = ttl - elapsed - (DriftFactor*ttl + 2ms)
//
//     where elapsed is the time the round took and the last term allows for
//     clock drift between the nodes. Lease.Until is the end of that validity;
//     a lease with no validity left is never returned;
//
//  4. otherwise releases the key at once on every node that granted it or
//     did not answer in time (a node that timed out may still have set it).
//     A node that answered "no" holds somebody else's key and is left alone.
//     The caller retries after a random delay: Wait does that with the
//     Config's Retry policy.
//
// Release runs a compare-and-delete script on every node, whatever the node
// answered at acquire. Extend runs a compare-and-PEXPIRE script on every node
// and needs a majority again; it refuses a lease that has already expired
// locally and never re-creates a key that has lapsed.
//
// Every step sends one command to each node through that node's own
// connection source, so a harness can schedule, delay and fault each node
// separately.
//
// The number of nodes must be odd. An even N needs N/2+1 nodes for a majority
// and so survives no more node failures than N-1 nodes would: the extra node
// only adds a way to fail. New refuses it and says so.
//
// # Fencing
//
// Lease.Fence is always 0. A fencing number must grow with every grant of
// the lock, and that needs one counter that every grant passes through and
// that survives the failures the lock survives. Redlock has no such counter:
// it is meant to keep working while a minority of its nodes are down,
// restarted empty or cut off, and a counter kept on one node, or on each node
// separately, would go backwards or split exactly then. Numbering grants
// safely takes a consensus system, which Redlock deliberately is not.
//
// # The controversy
//
// Martin Kleppmann's "How to do distributed locking" (2016) argues that
// Redlock is unsafe for correctness: a client paused (by GC, by a page fault)
// past its validity, a network delay, or a node whose clock jumps can leave
// two clients each believing it holds the lock, and without fencing numbers
// the protected resource cannot tell them apart; Redlock relies on bounded
// delays and well-behaved clocks, which asynchronous systems do not give.
// Salvatore Sanfilippo (antirez) replied in "Is Redlock safe?" that the
// validity check after the acquire catches delays that happen before the
// lock is used, that a pause after the check harms every lock with a timeout
// alike, that the random token can serve the resource for a compare-and-set
// where fencing numbers would, and that clocks need only advance at roughly
// the same rate: stepping a node's clock is an operations error. The spec
// itself adds that a crashed node must stay down longer than the TTL (or
// persist every write with fsync) for the majority argument to hold.
// locklab's harness can stage each of those faults: a node restarted without
// persistence, a clock jump on a node, a client paused past its validity.
package redlock
