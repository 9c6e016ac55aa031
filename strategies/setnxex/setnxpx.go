package setnxex

import (
	"context"
	_ "embed"
	"time"

	"github.com/gomodule/redigo/redis"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/internal/rcmd"
	"github.com/locklab/locklab/internal/single"
	"github.com/locklab/locklab/lockkit"
)

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
		return locklab.Lease{}, single.Held(key, v)
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

// LeaseClock is the Clock Lease.Until is read from (Config.Clock), on
// which locklab.Watch judges expiry.
func (l *SetNXPX) LeaseClock() locklab.Clock { return l.base.Clock }
