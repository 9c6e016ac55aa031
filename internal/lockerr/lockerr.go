// Package lockerr holds the sentinel errors of invalid input and failed
// servers, and the argument checks, that package locklab re-exports and
// package lockkit offers strategy authors: one implementation for both.
package lockerr

import (
	"context"
	"errors"
	"fmt"
	"time"
)

var (
	// ErrUnavailable is locklab.ErrUnavailable.
	ErrUnavailable = errors.New("locklab: server unreachable or failed")
	// ErrInvalid is locklab.ErrInvalid.
	ErrInvalid = errors.New("locklab: invalid argument")
)

// Unavailable wraps err, a failure talking to a server, so that errors.Is
// matches ErrUnavailable while err stays visible. Nil for nil.
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

// CheckAcquire validates the arguments of an Acquire: a context that is not
// done (else ErrUnavailable wrapping ctx.Err()), a key that is not empty and
// a TTL of at least 1ms (else ErrInvalid).
func CheckAcquire(ctx context.Context, key string, ttl time.Duration) error {
	if ctx == nil {
		return Invalid("nil context")
	}
	if key == "" {
		return Invalid("empty key")
	}
	if err := CheckTTL(ttl); err != nil {
		return err
	}
	return Unavailable(ctx.Err())
}

// CheckTTL refuses a TTL that is not positive or shorter than 1ms, the
// resolution of PX.
func CheckTTL(ttl time.Duration) error {
	if ttl <= 0 {
		return Invalid("ttl must be positive, got %v", ttl)
	}
	if ttl < time.Millisecond {
		return Invalid("ttl must be at least 1ms, got %v", ttl)
	}
	return nil
}

// CheckLeaseKey validates a lease given back, by its key, with the same
// errors as CheckAcquire.
func CheckLeaseKey(ctx context.Context, key string) error {
	if ctx == nil {
		return Invalid("nil context")
	}
	if key == "" {
		return Invalid("lease has an empty key (zero Lease?)")
	}
	return Unavailable(ctx.Err())
}
