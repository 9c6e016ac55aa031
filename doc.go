// Package locklab defines the contract shared by every Redis lock in this
// module: the Locker interface, the Lease a successful acquire returns, the
// errors that tell the outcomes apart, and the Config every strategy is built
// from.
//
// A lock on Redis is a key. Whoever manages to create the key holds the lock;
// deleting the key, or letting it expire, releases it. Over the years many
// ways of doing that have been published, and most of them are broken in a
// way that only shows under a particular interleaving of commands or a
// particular fault: two clients recovering the same stale lock at once, a
// crash between two commands that were meant to be one, a holder that runs
// past its TTL and deletes its successor's key. locklab implements each of
// those algorithms faithfully, bugs included, behind one interface, so that
// they can be compared, raced and broken on real Redis servers.
//
// Strategies are picked by name through the strategies package:
//
//	pool := locklab.NewPool("127.0.0.1:6379")
//	l, err := strategies.New("set-nx-px", locklab.Config{Pool: pool})
//	lease, err := l.Acquire(ctx, "orders:42", 30*time.Second)
//	...
//	err = l.Release(ctx, lease)
//
// Acquire makes exactly one attempt. Wait turns one-shot attempts into a
// blocking acquire with backoff and context cancellation.
//
// Strategies reach Redis only through a ConnSource (a redigo *redis.Pool is
// one) and read time only through a Clock. Both are injected through Config,
// which is what lets the race harness wrap every connection, see every Redis
// command as a scheduling point, and run clients on virtual clocks. Each step
// of an algorithm is one Redis command: nothing is pipelined behind the
// harness's back.
//
// Outcomes are told apart with errors.Is: ErrNotAcquired means someone else
// holds the lock, ErrUnavailable means the server (Redis, or the PostgreSQL
// server or etcd cluster of those families' strategies) could not be reached
// or failed a command, ErrNotHeld means a release or extend found the lock
// gone or owned by another client, and ErrInvalid marks bad input. A context
// that is done, before the call or during it, gives ErrUnavailable with the
// context error kept in the chain, so errors.Is(err, context.Canceled) works
// as well.
//
// To write a lock of your own, build it with package lockkit (the argument
// checks and the errors above) and register it with strategies.Register: it
// then runs in the harness, the matrix and the conformance suite.
package locklab
