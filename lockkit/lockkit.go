// Package lockkit is for those who write a strategy of their own: the
// argument checks every Acquire, Release and Extend starts with, and the
// constructors of the errors that match locklab's sentinels (ErrInvalid,
// ErrUnavailable) and that Wait retries. Users of the locks need none of it.
//
//	func (l *MyLock) Acquire(ctx context.Context, key string, ttl time.Duration) (locklab.Lease, error) {
//		if err := lockkit.CheckAcquire(ctx, key, ttl); err != nil {
//			return locklab.Lease{}, err
//		}
//		...
//		if err != nil {
//			return locklab.Lease{}, lockkit.Unavailable(err)
//		}
//
// A strategy registered with strategies.Register then runs in the harness,
// the matrix and the conformance suite (strategies/strategytest) as the
// built-in ones do.
package lockkit

import (
	"context"
	"time"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/internal/lockerr"
)

// CheckAcquire validates the arguments of an Acquire: the context must not
// be done (else locklab.ErrUnavailable wrapping ctx.Err()), the key must
// not be empty and the TTL must be at least 1ms (else locklab.ErrInvalid).
// Call it before sending anything to a server.
func CheckAcquire(ctx context.Context, key string, ttl time.Duration) error {
	return lockerr.CheckAcquire(ctx, key, ttl)
}

// CheckLease validates the lease given to Release or Extend, with the same
// errors as CheckAcquire.
func CheckLease(ctx context.Context, lease locklab.Lease) error {
	return lockerr.CheckLeaseKey(ctx, lease.Key)
}

// Invalid returns an error wrapping locklab.ErrInvalid with the given
// explanation.
func Invalid(format string, args ...any) error {
	return lockerr.Invalid(format, args...)
}

// Unavailable wraps err, a failure talking to a server, so that
// errors.Is(result, locklab.ErrUnavailable) holds while err (for example a
// context error) stays visible to errors.Is and errors.As. It returns nil
// for nil.
func Unavailable(err error) error {
	return lockerr.Unavailable(err)
}

// Retryable marks err as a failure that locklab.Wait retries after a delay
// although it was not refused (see locklab.RetryableError). It returns nil
// for nil and err itself when it is already marked.
func Retryable(err error) error {
	if err == nil || locklab.IsRetryable(err) {
		return err
	}
	return &locklab.RetryableError{Err: err}
}
