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
// A failed round is told apart by what the nodes answered. When the nodes
// that refused leave no majority to win (even if every node that failed had
// granted, the round would have lost), the lock is held by others:
// locklab.ErrNotAcquired. Otherwise, when too few nodes answered to decide
// (refusals and failures mixed, as long as the failed nodes could have made
// the majority), or when the round took so long that no validity was left,
// it is locklab.ErrUnavailable. Of five nodes, two granting, one refusing and
// two timing out is unavailable; one granting, three refusing and one timing
// out is refused.
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
// # Retrying, and connections being set up
//
// Acquire is one round, and the harness drives it as one. The spec's "retry
// on failure" applies to a round that failed for any reason: "it will try to
// unlock all the instances", then "try again after a random delay in order
// to try to desynchronize multiple clients". locklab.Wait (and Redlock.Wait)
// does that: the error of every round that failed unavailable is marked
// lockkit.Retryable, so Wait retries it as it retries a refused one, with
// the policy's jittered backoff, until a round wins or ctx ends. Its final
// error still tells the last round's outcome: errors.Is finds
// locklab.ErrNotAcquired when a majority refused, locklab.ErrUnavailable when
// the round could not decide.
//
// The node timeout (by default a fiftieth of the TTL, 2ms to 50ms) bounds how
// long a round waits for each node, connection set-up included: the spec
// sets that timeout so that "a Redis node which is down" cannot hold the
// client, and a node that is cut off is one whose dial does not finish. A
// connection's set-up on a cold pool (dial, AUTH, a TLS handshake: several
// round trips) can take longer than the timeout although the node is fine,
// so the round stops waiting for it but does not cut it short: the set-up
// goes on, bounded by the connection source's own timeouts and by
// SetupTimeout where the source honours its context, and its connection goes
// back to the source, where the next round (Wait's retry) finds it ready. The node counts as failed in that round and gets no
// release, since nothing was sent to it. A first acquire on cold connections
// can therefore fail as unavailable, but it does not fail a Wait.
//
// Excluding set-up from the timed round altogether (connecting to every node
// before reading the start time) would be safe: nothing is locked before the
// SET, and the spec's safety argument needs only a start time read before
// the first key is set. It is not done, for two reasons. A node whose dial
// hangs would then hold every attempt for the whole dial timeout, which is
// what the node timeout prevents. And sources over go-redis and rueidis
// clients set up connections inside the command itself, where a round
// cannot tell set-up from the SET; what becomes of a set-up that outlasts
// the node timeout is then the client's own business (go-redis finishes a
// dial in the background, rueidis gives it up with the command), and it is
// Wait's retries that carry a cold start. Where set-up always takes longer
// than the node timeout (TLS across a long round trip), set
// Config.NodeTimeout to cover it.
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
