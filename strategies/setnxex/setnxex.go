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
	_ "embed"
	"fmt"
	"time"

	"github.com/gomodule/redigo/redis"

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

var (
	//go:embed acquire.lua
	acquireSrc string
	//go:embed release.lua
	releaseSrc string
	//go:embed extend.lua
	extendSrc string
	//go:embed release_notify.lua
	releaseNotifySrc string
	//go:embed handoff.lua
	handoffSrc string

	acquireScript = rcmd.NewScript("set-nx-px.acquire", 3, acquireSrc)
	releaseScript = rcmd.NewScript("set-nx-px.release", 1, releaseSrc)
	extendScript  = rcmd.NewScript("set-nx-px.extend", 1, extendSrc)
	notifyScript  = rcmd.NewScript("set-nx-px.release-notify", 1, releaseNotifySrc)
	handoffScript = rcmd.NewScript("set-nx-px.handoff", 3, handoffSrc)
)

// SetNXPX is the "set-nx-px" strategy, the lock the Redis SET page
// recommends for a single instance: acquire runs SET key token NX PX ttl and,
// when it succeeds, INCR of the lock's fence counter (FenceKey), in one Lua
// script; release is the Lua compare-and-delete; Extend is a
// compare-and-PEXPIRE.
//
// It is safe on one Redis without faults as long as the holder finishes
// within its TTL. A holder that pauses past its TTL (GC, swapping, a stopped
// VM) still believes it holds the lock while a successor does too; only a
// resource that checks Lease.Fence can refuse the stale holder's writes.
//
// With Config.Notify, release also publishes on
// locklab.ReleaseChannelPrefix + key, and a locklab.Notifier wakes the next
// waiter at once; Handoff passes the lock to a waiter without letting it
// fall free. A refusal is a *locklab.HeldError that tells how long the
// holder's lock has left.
//
// With Config.Watchdog, each Acquire starts a locklab.Watchdog that extends
// the lock to its TTL every TTL/3 until its Release, Close, or the loss of
// the lock (Watchdog returns it, to watch Lost): the "看门狗" (watch dog)
// that section 1.1 of the notes "分布式锁 Distributed Lock" proposes for
// this very lock, "服务 A 后台开一个守护子线程,定期检查 A 是否执行完了本地业务,
// 没干完就给锁续期" (a daemon thread of service A checks whether A's work is
// done, and if not renews the lock). It keeps a healthy holder's lock from
// running out under a TTL that was too short; it does nothing for a holder
// that pauses, since the watchdog pauses with it: the fence number is what
// protects the resource then.
type SetNXPX struct {
	base   single.Base
	notify bool
	watch  bool
	dogs   single.Dogs
}

var (
	_ locklab.Extender  = (*SetNXPX)(nil)
	_ locklab.Handoffer = (*SetNXPX)(nil)
)

// NewSetNXPX builds a SetNXPX from cfg.
func NewSetNXPX(cfg locklab.Config) (*SetNXPX, error) {
	return single.Build(cfg, "set-nx-px", func(b single.Base) *SetNXPX {
		return &SetNXPX{base: b, notify: cfg.Notify, watch: cfg.Watchdog}
	}, locklab.OptNotify, locklab.OptWatchdog)
}

// checkKey refuses a fence counter or a floor as a lock key: the lock
// would break the fence numbers of other keys.
func checkKey(key string) error {
	if isFenceKey(key) {
		return lockkit.Invalid("set-nx-px: key %q names a fence counter and cannot be a lock", key)
	}
	return nil
}

// Acquire runs the acquire script: one command, on the lock key, its fence
// counter and its slot's floor, all in one Redis Cluster hash slot. A key
// that names a fence counter or a floor is refused with ErrInvalid.
func (l *SetNXPX) Acquire(ctx context.Context, key string, ttl time.Duration) (locklab.Lease, error) {
	lease, err := acquire(ctx, &l.base, key, ttl, nil)
	if err == nil && l.watch {
		l.dogs.Start(ctx, l, lease, ttl, 0, false)
	}
	return lease, err
}

// Watchdog returns the watchdog keeping key alive, or nil when none runs
// (Config.Watchdog unset, or the key is not held).
func (l *SetNXPX) Watchdog(key string) *locklab.Watchdog { return l.dogs.Get(key) }

// Close stops every watchdog, as the holder's process ending would; the
// locks then expire at their TTL. It does not release them.
func (l *SetNXPX) Close() error {
	l.dogs.Close()
	return nil
}

// sticky is a connection whose commands may each take another connection
// of a client (the go-redis and rueidis adapters'): Stick keeps them, until
// Close, on one connection to the server that serves key.
type sticky interface {
	Stick(ctx context.Context, key string) error
}

// acquire runs set-nx-px's acquire script on a connection of b and, when
// it grants the lock and then is set, runs then on the same connection
// before the lease is returned; an error from then fails the acquire. With
// then, a sticky connection is stuck to the key's server first: then's
// commands (WAIT) must follow the script on its connection.
func acquire(ctx context.Context, b *single.Base, key string, ttl time.Duration,
	then func(c redis.Conn, lease locklab.Lease) error) (locklab.Lease, error) {
	if err := checkKey(key); err != nil {
		return locklab.Lease{}, err
	}
	c, err := b.BeginAcquire(ctx, key, ttl)
	if err != nil {
		return locklab.Lease{}, err
	}
	defer c.Close()
	if s, ok := c.(sticky); ok && then != nil {
		if err := s.Stick(ctx, key); err != nil {
			return locklab.Lease{}, lockkit.Unavailable(err)
		}
	}
	token, err := b.Tokens.Token()
	if err != nil {
		return locklab.Lease{}, lockkit.Unavailable(err)
	}
	start := b.Clock.Now()
	v, err := acquireScript.Do(ctx, c, key, FenceKey(key), FloorKey(key), token, single.Millis(ttl))
	if err != nil {
		return locklab.Lease{}, err
	}
	fence, ok := v.(int64)
	if !ok {
		held := &locklab.HeldError{Key: key}
		if a, ok := v.([]any); ok && len(a) == 1 {
			if ms, _ := a[0].(int64); ms > 0 {
				held.Remaining = time.Duration(ms) * time.Millisecond
			}
		}
		return locklab.Lease{}, held
	}
	lease := single.Lease(key, token, fence, start, ttl)
	if then != nil {
		if err := then(c, lease); err != nil {
			return locklab.Lease{}, err
		}
	}
	return lease, nil
}

// Release runs the compare-and-delete script: one command.
func (l *SetNXPX) Release(ctx context.Context, lease locklab.Lease) error {
	c, err := l.base.BeginRelease(ctx, lease)
	if err != nil {
		return err
	}
	defer c.Close()
	l.dogs.Stop(lease.Key, lease.Token)
	var v any
	if l.notify {
		v, err = notifyScript.Do(ctx, c, lease.Key, lease.Token, locklab.ReleaseChannelPrefix+lease.Key)
	} else {
		v, err = releaseScript.Do(ctx, c, lease.Key, lease.Token)
	}
	return single.DelReleased(lease.Key, v, err)
}

// Extend resets the TTL of a lock still held with lease's token and returns
// the lease with its new deadline. It fails with ErrNotHeld when the lock is
// gone or held by another token, and never re-creates it.
func (l *SetNXPX) Extend(ctx context.Context, lease locklab.Lease, ttl time.Duration) (locklab.Lease, error) {
	if err := lockkit.CheckAcquire(ctx, lease.Key, ttl); err != nil {
		return locklab.Lease{}, err
	}
	c, err := l.base.BeginRelease(ctx, lease)
	if err != nil {
		return locklab.Lease{}, err
	}
	defer c.Close()
	start := l.base.Clock.Now()
	v, err := extendScript.Do(ctx, c, lease.Key, lease.Token, single.Millis(ttl))
	if err != nil {
		return locklab.Lease{}, err
	}
	if n, _ := v.(int64); n != 1 {
		return locklab.Lease{}, single.NotHeld(lease.Key)
	}
	lease.Until = start.Add(single.Sent(ttl))
	return lease, nil
}

// Handoff passes the lock lease holds to a successor in one script: if the
// key still holds lease's token, it gets a fresh token and ttl, and a new
// fence number is drawn. It fails with ErrNotHeld, changing nothing, when
// the lock was lost.
func (l *SetNXPX) Handoff(ctx context.Context, lease locklab.Lease, ttl time.Duration) (locklab.Lease, error) {
	if err := lockkit.CheckAcquire(ctx, lease.Key, ttl); err != nil {
		return locklab.Lease{}, err
	}
	if err := checkKey(lease.Key); err != nil {
		return locklab.Lease{}, err
	}
	c, err := l.base.BeginRelease(ctx, lease)
	if err != nil {
		return locklab.Lease{}, err
	}
	defer c.Close()
	token, err := l.base.Tokens.Token()
	if err != nil {
		return locklab.Lease{}, lockkit.Unavailable(err)
	}
	start := l.base.Clock.Now()
	l.dogs.Stop(lease.Key, lease.Token)
	v, err := handoffScript.Do(ctx, c, lease.Key, FenceKey(lease.Key), FloorKey(lease.Key), lease.Token, token, single.Millis(ttl))
	if err != nil {
		return locklab.Lease{}, err
	}
	fence, ok := v.(int64)
	if !ok {
		return locklab.Lease{}, single.NotHeld(lease.Key)
	}
	return single.Lease(lease.Key, token, fence, start, ttl), nil
}

// SetNXPXWait is the "set-nx-px-wait" strategy: set-nx-px's acquire, then
// WAIT 1 for a replica to acknowledge the key. When no replica acknowledges
// within the WAIT timeout, the acquire deletes what it set (compare-and-
// delete) and fails with ErrUnavailable: a lock only its master knows is
// one a failover would lose. Release is set-nx-px's compare-and-delete.
//
// WAIT narrows failover's hole without closing it: the lock survives a
// failover to the replica that acknowledged it, not one to a replica that
// did not (with several replicas, WAIT 1 names none in particular), nor a
// restart of the master without persistence, and a key that reached a
// replica can still expire there on the replica's own clock. Replication
// stays asynchronous; WAIT only reports how far it got.
type SetNXPXWait struct {
	base single.Base
}

// NewSetNXPXWait builds a SetNXPXWait from cfg. The server cfg.Pool reaches
// must be a master with at least one replica, or every acquire fails.
func NewSetNXPXWait(cfg locklab.Config) (*SetNXPXWait, error) {
	return single.Build(cfg, "set-nx-px-wait", func(b single.Base) *SetNXPXWait { return &SetNXPXWait{base: b} })
}

// WaitTimeout is how long an acquire of a ttl lock waits for a replica's
// acknowledgement: a tenth of the ttl, at least 50ms, at most 1s, and never
// more than half the ttl.
func WaitTimeout(ttl time.Duration) time.Duration {
	return min(max(ttl/10, 50*time.Millisecond), time.Second, ttl/2)
}

// Acquire runs set-nx-px's acquire script, then WAIT 1 <timeout>: two
// commands on one connection. WAIT waits for the writes of its own
// connection: a connection of a client adapter that sends each command on
// any of its connections (and on a Redis Cluster, keyless ones to any
// node) is stuck to one connection to the key's master first, when it can
// be (its Stick method).
func (l *SetNXPXWait) Acquire(ctx context.Context, key string, ttl time.Duration) (locklab.Lease, error) {
	return acquire(ctx, &l.base, key, ttl, func(c redis.Conn, lease locklab.Lease) error {
		wait := WaitTimeout(ttl)
		n, err := rcmd.Do(ctx, c, "WAIT", 1, single.Millis(wait))
		if acked, _ := n.(int64); err == nil && acked >= 1 {
			return nil
		}
		if err == nil {
			err = lockkit.Unavailable(fmt.Errorf("set-nx-px-wait: no replica acknowledged the lock %q within %v", key, wait))
		}
		// Take back what only the master knows. The WAIT's failure is the
		// answer whatever this does; a lock left behind expires at its TTL.
		releaseScript.Do(ctx, c, key, lease.Token)
		return err
	})
}

// Release runs the compare-and-delete script: one command.
func (l *SetNXPXWait) Release(ctx context.Context, lease locklab.Lease) error {
	c, err := l.base.BeginRelease(ctx, lease)
	if err != nil {
		return err
	}
	defer c.Close()
	v, err := releaseScript.Do(ctx, c, lease.Key, lease.Token)
	return single.DelReleased(lease.Key, v, err)
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

// LeaseClock is the Clock Lease.Until is read from (Config.Clock), on
// which locklab.Watch judges expiry.
func (l *SetNXPX) LeaseClock() locklab.Clock { return l.base.Clock }

// LeaseClock is the Clock Lease.Until is read from (Config.Clock), on
// which locklab.Watch judges expiry.
func (l *SetNXPXWait) LeaseClock() locklab.Clock { return l.base.Clock }
