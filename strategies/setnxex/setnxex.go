// Package setnxex holds the locks that put an expiry on the key itself: first
// with two commands (SETNX, then EXPIRE), then atomically with SET NX PX
// (Redis 2.6.12), with three ways of releasing it.
//
//   - SetNXExpire ("setnx-expire"): SETNX key token, then PEXPIRE. A crash
//     between the two leaves a key that never expires: deadlock.
//   - SetNXExpireAlways ("setnx-expire-always"): the PHP form
//     $redis->setNX($key, $value); $redis->expire($key, $ttl); that sends
//     the EXPIRE after every SETNX, a failed one too: each waiter's try
//     pushes the holder's TTL forward, and also repairs the key a crash
//     between the two commands left without one.
//   - SetNXPXDel ("set-nx-px-del"): SET key token NX PX ttl; release is a blind
//     DEL, which deletes the successor's lock when the holder ran past its
//     TTL.
//   - SetNXPXGetDel ("set-nx-px-getdel"): release GETs the key and DELs it when
//     the token matches: two commands, so the key can expire and be taken by
//     another client between the check and the delete.
//   - SetNXPX ("set-nx-px"): release is a Lua compare-and-delete, and acquire
//     draws a fencing number from a per-key counter in the same script.
//   - SetNXPXWait ("set-nx-px-wait"): set-nx-px, then WAIT for a replica to
//     acknowledge the lock; without an acknowledgement the acquire fails.
//
// The articles these come from use EX (seconds); locklab uses PX and PEXPIRE
// so that TTLs can be milliseconds. Nothing else about the algorithms
// changes.
package setnxex

import (
	"context"
	"time"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/internal/rcmd"
	"github.com/locklab/locklab/internal/single"
	"github.com/locklab/locklab/lockkit"
)

// SetNXExpire is the "setnx-expire" strategy: SETNX key token, then PEXPIRE
// key ttl as a second command; release is DEL. If the client crashes between
// the two commands the key has no TTL and nobody can ever acquire it again.
//
// Broken by design, kept to be raced and watched failing: never protect
// anything with it. strategies.Info says how it breaks; set-nx-px is this
// family's lock to use instead.
type SetNXExpire struct{ base single.Base }

// NewSetNXExpire builds a SetNXExpire from cfg.Pool, cfg.Clock and cfg.Rand.
func NewSetNXExpire(cfg locklab.Config) (*SetNXExpire, error) {
	return single.Build(cfg, "setnx-expire", func(b single.Base) *SetNXExpire { return &SetNXExpire{b} })
}

// Acquire sends SETNX, and on success PEXPIRE. Like the code it comes from,
// it does not check the PEXPIRE: the lease is granted either way.
func (l *SetNXExpire) Acquire(ctx context.Context, key string, ttl time.Duration) (locklab.Lease, error) {
	c, err := l.base.BeginAcquire(ctx, key, ttl)
	if err != nil {
		return locklab.Lease{}, err
	}
	defer c.Close()
	token, err := l.base.Tokens.Token()
	if err != nil {
		return locklab.Lease{}, lockkit.Unavailable(err)
	}
	start := l.base.Clock.Now()
	v, err := rcmd.Do(ctx, c, "SETNX", key, token)
	if err != nil {
		return locklab.Lease{}, err
	}
	if n, _ := v.(int64); n != 1 {
		return locklab.Lease{}, single.NotAcquired(key)
	}
	rcmd.Do(ctx, c, "PEXPIRE", key, single.Millis(ttl)) // unchecked, as in the original
	return single.Lease(key, token, 0, start, ttl), nil
}

// Release deletes the key, whoever holds it.
func (l *SetNXExpire) Release(ctx context.Context, lease locklab.Lease) error {
	return l.base.BlindDel(ctx, lease)
}

// SetNXExpireAlways is the "setnx-expire-always" strategy, the PHP form
// quoted at the head of the anonymous Chinese survey of Redis locks (000 in
// the seeds):
//
//	$redis->setNX($key, $value); $redis->expire($key, $ttl);
//
// Two statements, the second unconditional: PEXPIRE follows every SETNX,
// whether it took the lock or not. A waiter's failed try therefore resets
// the holder's TTL, as incr-expire-multi's MULTI INCR EXPIRE EXEC does: a
// crashed holder's lock lives for as long as others keep trying, and they
// starve. A crash between the two commands leaves a key without TTL, but
// not for ever, as setnx-expire's does: the next client's refused try
// sends its own PEXPIRE, which gives the orphaned key the TTL it lacked,
// and a try after that TTL wins. The crash costs one TTL, not the lock
// (crash-before-expire is SAFE in the matrix, with one probe refused).
// Release is a blind DEL. The acquire succeeds when SETNX answered 1; the
// PEXPIRE's answer is not checked.
//
// Broken by design, kept to be raced and watched failing: never protect
// anything with it. set-nx-px is this family's lock to use instead.
type SetNXExpireAlways struct{ base single.Base }

// NewSetNXExpireAlways builds a SetNXExpireAlways from cfg.
func NewSetNXExpireAlways(cfg locklab.Config) (*SetNXExpireAlways, error) {
	return single.Build(cfg, "setnx-expire-always", func(b single.Base) *SetNXExpireAlways { return &SetNXExpireAlways{b} })
}

// Acquire sends SETNX, then PEXPIRE whatever SETNX answered.
func (l *SetNXExpireAlways) Acquire(ctx context.Context, key string, ttl time.Duration) (locklab.Lease, error) {
	c, err := l.base.BeginAcquire(ctx, key, ttl)
	if err != nil {
		return locklab.Lease{}, err
	}
	defer c.Close()
	token, err := l.base.Tokens.Token()
	if err != nil {
		return locklab.Lease{}, lockkit.Unavailable(err)
	}
	start := l.base.Clock.Now()
	v, err := rcmd.Do(ctx, c, "SETNX", key, token)
	if err != nil {
		return locklab.Lease{}, err
	}
	rcmd.Do(ctx, c, "PEXPIRE", key, single.Millis(ttl)) // sent on every try, unchecked, as in the original
	if n, _ := v.(int64); n != 1 {
		return locklab.Lease{}, single.NotAcquired(key)
	}
	return single.Lease(key, token, 0, start, ttl), nil
}

// Release deletes the key, whoever holds it.
func (l *SetNXExpireAlways) Release(ctx context.Context, lease locklab.Lease) error {
	return l.base.BlindDel(ctx, lease)
}

// LeaseClock is the Clock Lease.Until is read from (Config.Clock), on
// which locklab.Watch judges expiry.
func (l *SetNXExpireAlways) LeaseClock() locklab.Clock { return l.base.Clock }

// setNX sends SET key token NX PX ttl: the atomic acquire shared by
// SetNXPXDel and SetNXPXGetDel.
func setNX(ctx context.Context, b single.Base, key string, ttl time.Duration) (locklab.Lease, error) {
	c, err := b.BeginAcquire(ctx, key, ttl)
	if err != nil {
		return locklab.Lease{}, err
	}
	defer c.Close()
	token, err := b.Tokens.Token()
	if err != nil {
		return locklab.Lease{}, lockkit.Unavailable(err)
	}
	start := b.Clock.Now()
	v, err := rcmd.Do(ctx, c, "SET", key, token, "NX", "PX", single.Millis(ttl))
	if err != nil {
		return locklab.Lease{}, err
	}
	if v == nil {
		return locklab.Lease{}, single.NotAcquired(key)
	}
	return single.Lease(key, token, 0, start, ttl), nil
}

// SetNXPXDel is the "set-nx-px-del" strategy: SET key token NX PX ttl, and a
// blind DEL to release. A holder that runs past its TTL deletes the lock of
// whoever acquired it next.
//
// Broken by design, kept to be raced and watched failing: never protect
// anything with it. strategies.Info says how it breaks; set-nx-px is this
// family's lock to use instead.
type SetNXPXDel struct{ base single.Base }

// NewSetNXPXDel builds a SetNXPXDel from cfg.
func NewSetNXPXDel(cfg locklab.Config) (*SetNXPXDel, error) {
	return single.Build(cfg, "set-nx-px-del", func(b single.Base) *SetNXPXDel { return &SetNXPXDel{b} })
}

// Acquire sends SET key token NX PX ttl.
func (l *SetNXPXDel) Acquire(ctx context.Context, key string, ttl time.Duration) (locklab.Lease, error) {
	return setNX(ctx, l.base, key, ttl)
}

// Release deletes the key, whoever holds it.
func (l *SetNXPXDel) Release(ctx context.Context, lease locklab.Lease) error {
	return l.base.BlindDel(ctx, lease)
}

// SetNXPXGetDel is the "set-nx-px-getdel" strategy: SET key token NX PX ttl;
// release GETs the key and DELs it when it still holds the token. Check and
// delete are two commands: between them the key can expire and be acquired
// by another client, whose lock the DEL then removes.
//
// Broken by design, kept to be raced and watched failing: never protect
// anything with it. strategies.Info says how it breaks; set-nx-px is this
// family's lock to use instead.
type SetNXPXGetDel struct{ base single.Base }

// NewSetNXPXGetDel builds a SetNXPXGetDel from cfg.
func NewSetNXPXGetDel(cfg locklab.Config) (*SetNXPXGetDel, error) {
	return single.Build(cfg, "set-nx-px-getdel", func(b single.Base) *SetNXPXGetDel { return &SetNXPXGetDel{b} })
}

// Acquire sends SET key token NX PX ttl.
func (l *SetNXPXGetDel) Acquire(ctx context.Context, key string, ttl time.Duration) (locklab.Lease, error) {
	return setNX(ctx, l.base, key, ttl)
}

// Release sends GET, and DEL when the value is the lease's token.
func (l *SetNXPXGetDel) Release(ctx context.Context, lease locklab.Lease) error {
	c, err := l.base.BeginRelease(ctx, lease)
	if err != nil {
		return err
	}
	defer c.Close()
	v, err := rcmd.Do(ctx, c, "GET", lease.Key)
	if err != nil {
		return err
	}
	if b, ok := v.([]byte); !ok || string(b) != lease.Token {
		return single.NotHeld(lease.Key)
	}
	return single.Del(ctx, c, lease.Key)
}

// LeaseClock is the Clock Lease.Until is read from (Config.Clock), on
// which locklab.Watch judges expiry.
func (l *SetNXExpire) LeaseClock() locklab.Clock { return l.base.Clock }

// LeaseClock is the Clock Lease.Until is read from (Config.Clock), on
// which locklab.Watch judges expiry.
func (l *SetNXPXDel) LeaseClock() locklab.Clock { return l.base.Clock }

// LeaseClock is the Clock Lease.Until is read from (Config.Clock), on
// which locklab.Watch judges expiry.
func (l *SetNXPXGetDel) LeaseClock() locklab.Clock { return l.base.Clock }
