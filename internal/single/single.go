// Package single holds what every single-node strategy is built from: one
// connection source, a clock and a token source, taken from a locklab.Config
// and checked once.
package single

import (
	"context"
	"strconv"
	"time"

	"github.com/gomodule/redigo/redis"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/internal/rcmd"
	"github.com/locklab/locklab/lockkit"
)

// Base is embedded by single-node strategies.
type Base struct {
	Pool   locklab.ConnSource
	Clock  locklab.Clock
	Tokens *locklab.TokenSource
}

// New checks cfg for the single-node strategy name, which reads the
// strategy-specific fields reads (locklab.Config.OnlyOptions), and applies
// the defaults.
func New(cfg locklab.Config, name string, reads ...string) (Base, error) {
	if err := cfg.OnlyOptions(name, reads...); err != nil {
		return Base{}, err
	}
	if rcmd.IsNil(cfg.Pool) {
		return Base{}, lockkit.Invalid("Config.Pool is %s: a single-node strategy needs a connection source such as a *redis.Pool", rcmd.NilWhat(cfg.Pool))
	}
	return Base{Pool: cfg.Pool, Clock: cfg.ClockOrDefault(), Tokens: cfg.Tokens()}, nil
}

// BeginAcquire validates an Acquire's arguments and takes a connection. The
// caller closes it.
func (b Base) BeginAcquire(ctx context.Context, key string, ttl time.Duration) (redis.Conn, error) {
	if err := lockkit.CheckAcquire(ctx, key, ttl); err != nil {
		return nil, err
	}
	return rcmd.Conn(ctx, b.Pool)
}

// BeginRelease validates a lease given back and takes a connection. The
// caller closes it.
func (b Base) BeginRelease(ctx context.Context, lease locklab.Lease) (redis.Conn, error) {
	if err := lockkit.CheckLease(ctx, lease); err != nil {
		return nil, err
	}
	return rcmd.Conn(ctx, b.Pool)
}

// BlindDel is the release of every strategy that deletes the key without
// asking whose it is: DEL key. It reports ErrNotHeld when there was no key,
// and nil when it deleted one, whoever held it.
func (b Base) BlindDel(ctx context.Context, lease locklab.Lease) error {
	c, err := b.BeginRelease(ctx, lease)
	if err != nil {
		return err
	}
	defer c.Close()
	return Del(ctx, c, lease.Key)
}

// Millis is ttl in whole milliseconds, at least 1: what PX, PEXPIRE and
// the scripts send.
func Millis(ttl time.Duration) int64 {
	return max(ttl.Milliseconds(), 1)
}

// Sent is the ttl the server is given, Millis(ttl) milliseconds: a lease's
// Until counts from it, so that it never ends after the key does.
func Sent(ttl time.Duration) time.Duration {
	return time.Duration(Millis(ttl)) * time.Millisecond
}

// NotAcquired is the error of a refused acquire.
func NotAcquired(key string) error {
	return &KeyError{Key: key, Err: locklab.ErrNotAcquired}
}

// NotHeld is the error of a release or extend that found the lock gone or
// taken.
func NotHeld(key string) error {
	return &KeyError{Key: key, Err: locklab.ErrNotHeld}
}

// KeyError names the key a sentinel error is about.
type KeyError struct {
	Key string
	Err error
}

func (e *KeyError) Error() string { return e.Err.Error() + ": " + strconv.Quote(e.Key) }

// Unwrap returns the sentinel.
func (e *KeyError) Unwrap() error { return e.Err }

// DelReleased turns the reply of a DEL into Release's result: nil when a key
// was deleted, ErrNotHeld when there was none.
func DelReleased(key string, reply any, err error) error {
	if err != nil {
		return err
	}
	if n, _ := reply.(int64); n == 0 {
		return NotHeld(key)
	}
	return nil
}

// Del sends DEL key on c and reports the result as Release does.
func Del(ctx context.Context, c redis.Conn, key string) error {
	v, err := rcmd.Do(ctx, c, "DEL", key)
	return DelReleased(key, v, err)
}

// Held is the refusal of an acquire of key whose script answered with the
// holder's PTTL, a one-element array (anything else: a refusal that tells
// no TTL). A PTTL of 0 is a lock in its last millisecond, not one without
// a TTL (-1): it is told as a millisecond left, so that a waiter retries
// then rather than at its policy's Max. A retry timed to the holder's
// expiry lands on that boundary.
func Held(key string, reply any) *locklab.HeldError {
	held := &locklab.HeldError{Key: key}
	if a, ok := reply.([]any); ok && len(a) == 1 {
		if ms, ok := a[0].(int64); ok && ms >= 0 {
			held.Remaining = max(time.Duration(ms)*time.Millisecond, time.Millisecond)
		}
	}
	return held
}

// Lease builds the lease of an acquire that started at start and sent ttl
// in whole milliseconds (Sent).
func Lease(key, token string, fence int64, start time.Time, ttl time.Duration) locklab.Lease {
	return locklab.Lease{Key: key, Token: token, Fence: fence, Until: start.Add(Sent(ttl))}
}

// Build checks cfg (as New) and wraps the resulting Base in a strategy; it
// returns a nil strategy with the error when cfg is bad.
func Build[T any](cfg locklab.Config, name string, wrap func(Base) *T, reads ...string) (*T, error) {
	b, err := New(cfg, name, reads...)
	if err != nil {
		return nil, err
	}
	return wrap(b), nil
}
