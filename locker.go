package locklab

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Locker is a lock algorithm on Redis.
//
// Acquire makes one attempt to take the lock on key for ttl and returns the
// lease on success. It fails with ErrNotAcquired when another client holds
// the lock, with ErrUnavailable when Redis could not answer, and with
// ErrInvalid for bad input. Release gives a lease back; it fails with
// ErrNotHeld when the strategy can tell that the lock was no longer the
// caller's. Strategies that cannot tell (a blind DEL) return nil and may have
// deleted someone else's lock: that is their documented weakness.
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
	// Key is the Redis key of the lock.
	Key string
	// Token is the value the strategy wrote under Key (a random token, a
	// timestamp or a counter, depending on the strategy).
	Token string
	// Fence is a number that grows with every successful acquire of Key, for
	// strategies that keep one; 0 where the strategy has none. A protected
	// resource that refuses writes carrying a smaller fence than one it has
	// seen is safe against holders that lost their lease without knowing.
	Fence int64
	// Until is the local validity deadline, read from the strategy's Clock:
	// past it the holder must assume the lock may belong to someone else.
	Until time.Time
}

// Valid reports whether the lease is still within its validity at now.
func (l Lease) Valid(now time.Time) bool { return now.Before(l.Until) }

// The sentinel errors. Errors returned by strategies wrap one of them.
var (
	// ErrNotAcquired: the lock is held by someone else.
	ErrNotAcquired = errors.New("locklab: lock held by someone else")
	// ErrUnavailable: Redis could not be reached, timed out, or failed the
	// command.
	ErrUnavailable = errors.New("locklab: redis unreachable or failed")
	// ErrNotHeld: at release or extend the lock was gone or belonged to
	// another client.
	ErrNotHeld = errors.New("locklab: lock no longer held")
	// ErrInvalid: bad input, such as an empty key or a non-positive TTL.
	ErrInvalid = errors.New("locklab: invalid argument")
)

// Unavailable wraps err, a failure talking to Redis, so that
// errors.Is(result, ErrUnavailable) holds while err (for example a context
// error) stays visible to errors.Is and errors.As. It returns nil for nil.
func Unavailable(err error) error {
	if err == nil || errors.Is(err, ErrUnavailable) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrUnavailable, err)
}

// Invalid returns an error wrapping ErrInvalid with the given explanation.
func Invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
}

// CheckAcquire validates the arguments of an Acquire: the context must not be
// done (else ErrUnavailable wrapping ctx.Err()), the key must not be empty
// and the TTL must be at least 1ms (else ErrInvalid). Strategies call it
// before sending anything to Redis.
func CheckAcquire(ctx context.Context, key string, ttl time.Duration) error {
	if ctx == nil {
		return Invalid("nil context")
	}
	if key == "" {
		return Invalid("empty key")
	}
	if err := checkTTL(ttl); err != nil {
		return err
	}
	return Unavailable(ctx.Err())
}

// checkTTL refuses a TTL that is not positive or shorter than 1ms, the
// resolution of PX.
func checkTTL(ttl time.Duration) error {
	if ttl <= 0 {
		return Invalid("ttl must be positive, got %v", ttl)
	}
	if ttl < time.Millisecond {
		return Invalid("ttl must be at least 1ms, got %v", ttl)
	}
	return nil
}

// CheckLease validates the lease given to Release or Extend, with the same
// errors as CheckAcquire.
func CheckLease(ctx context.Context, lease Lease) error {
	if ctx == nil {
		return Invalid("nil context")
	}
	if lease.Key == "" {
		return Invalid("lease has an empty key (zero Lease?)")
	}
	return Unavailable(ctx.Err())
}
