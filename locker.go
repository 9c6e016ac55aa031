package locklab

import (
	"context"
	"errors"
	"io"
	"time"

	"github.com/locklab/locklab/internal/lockerr"
)

// Locker is a lock algorithm, on whichever store its strategy uses.
//
// Acquire makes one attempt to take the lock on key for ttl and returns the
// lease on success. It fails with ErrNotAcquired when another client holds
// the lock, with ErrUnavailable when the store could not answer, and with
// ErrInvalid for bad input. Release gives a lease back; it fails with
// ErrNotHeld when the strategy can tell that the lock was no longer the
// caller's. Strategies that cannot tell (a blind DEL or DELETE) return nil
// and may have deleted someone else's lock: that is their documented
// weakness.
//
// Every error wraps one of the sentinels below. A context that is cancelled
// or past its deadline, whether before the call or during it, gives
// ErrUnavailable wrapping ctx.Err(): errors.Is(err, context.Canceled) and
// errors.Is(err, context.DeadlineExceeded) hold as well. The one exception is
// Wait (and Notifier.Wait), which, when ctx ends the wait after a refusal,
// wraps ctx.Err() and the last ErrNotAcquired.
type Locker interface {
	Acquire(ctx context.Context, key string, ttl time.Duration) (Lease, error)
	Release(ctx context.Context, lease Lease) error
}

// Extender is implemented by strategies that can push a held lease's expiry
// forward. Extend fails with ErrNotHeld when the lease was lost; it never
// re-creates a lock that has lapsed.
type Extender interface {
	Extend(ctx context.Context, lease Lease, ttl time.Duration) (Lease, error)
}

// Extend pushes a held lease's expiry to ttl from now, through l's Extend
// when l is an Extender (strategies.Info tells which strategies are:
// Properties.Extend). On a Locker that cannot extend it fails with
// ErrInvalid and changes nothing.
//
// A strategy may give less than ttl: it may round it to what its store
// keeps, or cap it at what the store grants. etcd-lease does both: etcd's
// leases have whole seconds, and etcd renews a lease to the TTL it was
// granted with, so asking 10s of a lock taken for 5s gives 5s, and no
// error. The returned Lease.Until is always the deadline the lock really
// got, on the strategy's Clock: never later than the lock's expiry in the
// store, and earlier than now plus ttl when the strategy gave less. Read
// Until rather than adding ttl to the time of the call; each strategy's
// documentation says what it rounds or caps.
//
// Extend is a function and not a method of Locker because most locks here
// have no safe extend: a TTL pushed without checking the owner would
// lengthen a successor's lock. Locker keeps the two operations every lock
// has, and a strategy of your own needs no Extend that only fails; the
// function looks for the method as io.Copy looks for WriterTo.
func Extend(ctx context.Context, l Locker, lease Lease, ttl time.Duration) (Lease, error) {
	ext, err := extender(l)
	if err != nil {
		return Lease{}, err
	}
	return ext.Extend(ctx, lease, ttl)
}

// Close closes what l opened for itself, and never what the caller gave it
// in Config: the Redis pool, the etcd client or the PostgreSQL pool stays
// open, for the caller to close once done with every Locker built on it.
// What a strategy opens is what runs or is held between its calls: the
// watchdogs of Config.Watchdog, etcd-lease's lease keepalives, the sessions
// that hold pg-advisory's and pg-for-update's locks. The strategies
// package's documentation lists which strategies open anything.
//
// Close releases nothing: a lock still held ends as it would if the
// holder's process died, at its TTL or with its session. Release first to
// free a lock at once. Close calls l's Close method when l is an
// io.Closer and returns nil on a Locker that opens nothing, so it can be
// deferred on any Locker; l is not to be used afterwards.
func Close(l Locker) error {
	if l == nil {
		return lockerr.Invalid("nil Locker")
	}
	if c, ok := l.(io.Closer); ok {
		return c.Close()
	}
	return nil
}

// LeaseClock is implemented by Lockers that read Lease.Until from a Clock of
// their own (Config.Clock): Watch judges a lease's expiry on that clock, so
// that a Clock skewed from the system's shifts no deadline. Every strategy
// here implements it; a Locker that does not is taken to read the system
// clock.
type LeaseClock interface {
	LeaseClock() Clock
}

// leaseClock is the Clock l's leases are read from.
func leaseClock(l Locker) Clock {
	if lc, ok := l.(LeaseClock); ok {
		if c := lc.LeaseClock(); c != nil {
			return c
		}
	}
	return SystemClock
}

// extender is l as an Extender, or ErrInvalid.
func extender(l Locker) (Extender, error) {
	if l == nil {
		return nil, lockerr.Invalid("nil Locker")
	}
	ext, ok := l.(Extender)
	if !ok {
		return nil, lockerr.Invalid("%T cannot extend a lease: it has no owner-checked extend (strategies.Info: Properties.Extend is false)", l)
	}
	return ext, nil
}

// Handoffer is implemented by strategies that can pass a held lock straight
// to a successor in one atomic step: if lease still holds the lock, the key
// gets a new token and TTL, and the successor's lease is returned. It fails
// with ErrNotHeld, changing nothing, when the lock was lost. Notifier.Release
// uses it to serve waiters in order without letting the key fall free.
type Handoffer interface {
	Handoff(ctx context.Context, lease Lease, ttl time.Duration) (Lease, error)
}

// Lease is what a successful Acquire returns: a plain value that Release and
// Extend take back.
type Lease struct {
	// Key is the key given to Acquire: the lock's name. How the store
	// keeps it (a Redis key, an etcd key under a prefix, a row, an advisory
	// lock number) is the strategy's business.
	Key string
	// Token tells this hold of the lock from every other: the value the
	// strategy wrote in the store (a random token, a timestamp or a
	// counter), the store's own name for the holder (etcd-lease's key), or
	// a token the strategy keeps for the session that holds the lock.
	Token string
	// Fence is a number that grows with every successful acquire of Key, for
	// strategies that keep one; 0 where the strategy has none. A protected
	// resource that refuses writes carrying a smaller fence than one it has
	// seen is safe against holders that lost their lease without knowing.
	Fence int64
	// Until is the local validity deadline, read from the strategy's Clock:
	// past it the holder must assume the lock may belong to someone else.
	// It is never later than the lock's expiry in the store: a strategy
	// that rounds or caps a TTL sets Until from what it got (see Extend).
	Until time.Time
}

// Valid reports whether the lease is still within its validity at now.
func (l Lease) Valid(now time.Time) bool { return now.Before(l.Until) }

// The sentinel errors. Errors returned by strategies wrap one of them.
var (
	// ErrNotAcquired: the lock is held by someone else.
	ErrNotAcquired = errors.New("locklab: lock held by someone else")
	// ErrUnavailable: the store could not be reached, timed out, or failed
	// the command: the Redis server, etcd cluster or PostgreSQL server the
	// strategy locks on.
	ErrUnavailable = lockerr.ErrUnavailable
	// ErrNotHeld: at release or extend the lock was gone or belonged to
	// another client.
	ErrNotHeld = errors.New("locklab: lock no longer held")
	// ErrInvalid: bad input, such as an empty key or a non-positive TTL.
	ErrInvalid = lockerr.ErrInvalid
)
