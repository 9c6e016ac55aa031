// Package incr_expire holds the counter locks: INCR the key, and whoever
// reads 1 holds the lock; an expiry set after the fact keeps a crashed
// holder from keeping it forever. Three published variants differ in how the
// expiry is set, and each breaks in its own way.
//
//   - IncrExpire ("incr-expire"): INCR, then EXPIRE as a second command. A
//     crash between the two leaves a key with no TTL: deadlock.
//   - IncrExpireLua ("incr-expire-lua"): INCR and PEXPIRE in one Lua script.
//     Acquire is now atomic, but release is still a blind DEL: a holder past
//     its TTL deletes its successor's lock.
//   - IncrExpireMulti ("incr-expire-multi"): MULTI, INCR, EXPIRE, EXEC, for
//     servers older than 2.6 without EVAL. A transaction cannot make EXPIRE
//     depend on INCR's result, so every failed attempt pushes the TTL
//     forward: under contention the lock of a crashed holder lives for as
//     long as others keep trying, and waiters starve.
//
// Source: the INCR + EXPIRE section of an anonymous Chinese survey of Redis
// locks (citing the blog post "Redis实现分布式全局锁"), which shows the
// two-command version, the Lua script, and the MULTI/EXEC caveat. Expiries
// use PEXPIRE (milliseconds) throughout so that TTLs can be milliseconds.
package incr_expire

import (
	"context"
	_ "embed"
	"fmt"
	"time"

	"github.com/gomodule/redigo/redis"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/internal/rcmd"
	"github.com/locklab/locklab/internal/single"
	"github.com/locklab/locklab/lockkit"
)

// token is the value a holder sees: the counter that INCR returned.
const token = "1"

// acquired turns INCR's result into Acquire's result.
func acquired(key string, n int64, start time.Time, ttl time.Duration) (locklab.Lease, error) {
	if n != 1 {
		return locklab.Lease{}, single.NotAcquired(key)
	}
	return single.Lease(key, token, 0, start, ttl), nil
}

// IncrExpire is "incr-expire": INCR key; if it returned 1, PEXPIRE key ttl as
// a second command. Release is DEL.
//
// Broken by design, kept to be raced and watched failing: never protect
// anything with it. strategies.Info says how it breaks; set-nx-px is this
// family's lock to use instead.
type IncrExpire struct{ base single.Base }

// NewIncrExpire builds an IncrExpire from cfg.
func NewIncrExpire(cfg locklab.Config) (*IncrExpire, error) {
	return single.Build(cfg, "incr-expire", func(b single.Base) *IncrExpire { return &IncrExpire{b} })
}

// Acquire sends INCR and, when it returned 1, PEXPIRE. As in the original,
// the PEXPIRE's outcome is not checked.
func (l *IncrExpire) Acquire(ctx context.Context, key string, ttl time.Duration) (locklab.Lease, error) {
	c, err := l.base.BeginAcquire(ctx, key, ttl)
	if err != nil {
		return locklab.Lease{}, err
	}
	defer c.Close()
	start := l.base.Clock.Now()
	n, err := redis.Int64(rcmd.Do(ctx, c, "INCR", key))
	if err != nil {
		return locklab.Lease{}, lockkit.Unavailable(err)
	}
	if n == 1 {
		rcmd.Do(ctx, c, "PEXPIRE", key, single.Millis(ttl)) // unchecked, as in the original
	}
	return acquired(key, n, start, ttl)
}

// Release deletes the key, whoever holds it.
func (l *IncrExpire) Release(ctx context.Context, lease locklab.Lease) error {
	return l.base.BlindDel(ctx, lease)
}

//go:embed acquire.lua
var acquireSrc string

var acquireScript = rcmd.NewScript("incr-expire-lua.acquire", 1, acquireSrc)

// IncrExpireLua is "incr-expire-lua": INCR and, when it returned 1, PEXPIRE,
// in one Lua script. Release is DEL.
//
// Broken by design, kept to be raced and watched failing: never protect
// anything with it. strategies.Info says how it breaks; set-nx-px is this
// family's lock to use instead.
type IncrExpireLua struct{ base single.Base }

// NewIncrExpireLua builds an IncrExpireLua from cfg.
func NewIncrExpireLua(cfg locklab.Config) (*IncrExpireLua, error) {
	return single.Build(cfg, "incr-expire-lua", func(b single.Base) *IncrExpireLua { return &IncrExpireLua{b} })
}

// Acquire runs the script: one command.
func (l *IncrExpireLua) Acquire(ctx context.Context, key string, ttl time.Duration) (locklab.Lease, error) {
	c, err := l.base.BeginAcquire(ctx, key, ttl)
	if err != nil {
		return locklab.Lease{}, err
	}
	defer c.Close()
	start := l.base.Clock.Now()
	n, err := redis.Int64(acquireScript.Do(ctx, c, key, single.Millis(ttl)))
	if err != nil {
		return locklab.Lease{}, lockkit.Unavailable(err)
	}
	return acquired(key, n, start, ttl)
}

// Release deletes the key, whoever holds it.
func (l *IncrExpireLua) Release(ctx context.Context, lease locklab.Lease) error {
	return l.base.BlindDel(ctx, lease)
}

// IncrExpireMulti is "incr-expire-multi": MULTI, INCR, PEXPIRE, EXEC, each
// sent as its own command. The PEXPIRE runs whatever INCR returned, so a
// failed attempt extends the holder's TTL. Release is DEL.
//
// Broken by design, kept to be raced and watched failing: never protect
// anything with it. strategies.Info says how it breaks; set-nx-px is this
// family's lock to use instead.
type IncrExpireMulti struct{ base single.Base }

// NewIncrExpireMulti builds an IncrExpireMulti from cfg.
func NewIncrExpireMulti(cfg locklab.Config) (*IncrExpireMulti, error) {
	return single.Build(cfg, "incr-expire-multi", func(b single.Base) *IncrExpireMulti { return &IncrExpireMulti{b} })
}

// Acquire sends MULTI, INCR, PEXPIRE and EXEC, and reads INCR's result from
// EXEC's reply.
func (l *IncrExpireMulti) Acquire(ctx context.Context, key string, ttl time.Duration) (locklab.Lease, error) {
	c, err := l.base.BeginAcquire(ctx, key, ttl)
	if err != nil {
		return locklab.Lease{}, err
	}
	defer c.Close()
	start := l.base.Clock.Now()
	if _, err := rcmd.Do(ctx, c, "MULTI"); err != nil {
		return locklab.Lease{}, err
	}
	if _, err := rcmd.Do(ctx, c, "INCR", key); err != nil {
		return locklab.Lease{}, err
	}
	if _, err := rcmd.Do(ctx, c, "PEXPIRE", key, single.Millis(ttl)); err != nil {
		return locklab.Lease{}, err
	}
	replies, err := redis.Values(rcmd.Do(ctx, c, "EXEC"))
	if err != nil || len(replies) != 2 {
		return locklab.Lease{}, lockkit.Unavailable(fmtExec(err, replies))
	}
	n, err := redis.Int64(replies[0], nil)
	if err != nil {
		return locklab.Lease{}, lockkit.Unavailable(err)
	}
	return acquired(key, n, start, ttl)
}

// Release deletes the key, whoever holds it.
func (l *IncrExpireMulti) Release(ctx context.Context, lease locklab.Lease) error {
	return l.base.BlindDel(ctx, lease)
}

func fmtExec(err error, replies []any) error {
	if err != nil {
		return err
	}
	return fmt.Errorf("EXEC returned %d replies, want 2", len(replies))
}

// LeaseClock is the Clock Lease.Until is read from (Config.Clock), on
// which locklab.Watch judges expiry.
func (l *IncrExpire) LeaseClock() locklab.Clock { return l.base.Clock }

// LeaseClock is the Clock Lease.Until is read from (Config.Clock), on
// which locklab.Watch judges expiry.
func (l *IncrExpireLua) LeaseClock() locklab.Clock { return l.base.Clock }

// LeaseClock is the Clock Lease.Until is read from (Config.Clock), on
// which locklab.Watch judges expiry.
func (l *IncrExpireMulti) LeaseClock() locklab.Clock { return l.base.Clock }
