// Package locklab defines the contract shared by every lock in this module,
// whatever store it runs on: the Locker interface, the Lease a successful
// acquire returns, the errors that tell the outcomes apart, and the Config
// every strategy is built from; and the functions that work on any Locker:
// Wait, Extend, Watch and Close.
//
// A distributed lock is a record that several clients share in a store.
// Whoever manages to create it holds the lock; deleting it, or letting it
// expire, releases it. Over the years many ways of doing that have been
// published, and most of them are broken in a way that only shows under a
// particular interleaving of commands or a particular fault: two clients
// recovering the same stale lock at once, a crash between two commands that
// were meant to be one, a holder that runs past its TTL and deletes its
// successor's lock. locklab implements each of those algorithms faithfully,
// bugs included, behind one interface, so that they can be compared, raced
// and broken on real servers.
//
// Strategies are picked by name through the strategies package. The Redis
// ones are built in and take a connection source in Config.Pool (or
// Config.Nodes); the strategies of the other stores are registered by
// importing their package, which brings that store's client, and take the
// client in Config.Store:
//
//	pool := locklab.NewPool("127.0.0.1:6379")
//	l, err := strategies.New("set-nx-px", locklab.Config{Pool: pool})
//
//	import _ "github.com/locklab/locklab/strategies/etcdlock" // or pglock
//	l, err := strategies.New("etcd-lease", locklab.Config{Store: etcdClient})
//
// and then, whatever the store:
//
//	lease, err := l.Acquire(ctx, "orders:42", 30*time.Second)
//	...
//	err = l.Release(ctx, lease)
//	err = locklab.Close(l) // what the lock opened; the client stays open
//
// docs/library.md in the repository shows the whole program for each store.
//
// Acquire makes exactly one attempt. Wait turns one-shot attempts into a
// blocking acquire with backoff and context cancellation. Extend pushes a
// held lease's expiry forward on the strategies that can, and Watch does so
// in the background.
//
// The client is the caller's: it builds it, hands it over in Config, and
// closes it when done, after Close. Strategies reach their store only
// through that client (for Redis a ConnSource, which a redigo *redis.Pool
// is) and read time only through a Clock. Both are injected through Config,
// which is what lets the race harness wrap every connection, see every
// command as a scheduling point, and run clients on virtual clocks. Each
// step of an algorithm is one command to the store: nothing is pipelined
// behind the harness's back.
//
// Outcomes are told apart with errors.Is: ErrNotAcquired means someone else
// holds the lock, ErrUnavailable means the store could not be reached or
// failed a command, ErrNotHeld means a release or extend found the lock
// gone or owned by another client, and ErrInvalid marks bad input. A
// context that is done, before the call or during it, gives ErrUnavailable
// with the context error kept in the chain, so errors.Is(err,
// context.Canceled) works as well.
//
// The connection sources in this package (NewPool, NewPoolOptions,
// ParseURL, NewSentinelPool, NewClusterPool) and the Notifier are for the
// Redis strategies.
//
// To write a lock of your own, build it with package lockkit (the argument
// checks and the errors above) and register it with strategies.Register: it
// then runs in the harness, the matrix and the conformance suite.
package locklab
