// Package reentrant holds the Redisson-style lock ("hash-reentrant"): the
// lock is a Redis hash whose one field is the holder's id and whose value
// counts how many times that holder has entered, so a holder that already
// has the lock can take it again without deadlocking itself. It is the lock
// Redisson's RedissonLock implements, as the notes "分布式锁 Distributed Lock"
// (section 1.4) describe it, with Redisson's defaults.
//
//   - Acquire: if the key does not exist, or its hash has the holder's
//     field, HINCRBY the field and PEXPIRE the key; else refuse with the
//     holder's remaining TTL. One Lua script.
//   - Release: if the field exists, HINCRBY it by -1; above zero PEXPIRE
//     the key to the holder's lease again (Redisson's unlock does); at zero
//     DEL the key and PUBLISH on locklab.ReleaseChannelPrefix + key, so that
//     the waiters of a locklab.Notifier wake at once. One Lua script.
//   - Extend: PEXPIRE when the field exists. A locklab.Watchdog sends it
//     every TTL/3 while the holder holds the lock: on by default, as
//     Redisson's watch dog ("每隔 10 秒检查一下,如果 client A 还持有锁 key,
//     那么就会不断的延长锁 key 的生存时间": every 10 s, while client A still
//     holds the key, it keeps extending the key's life); Config.NoWatchdog
//     turns it off.
//
// How Redisson's calls map onto Acquire's ttl. Redisson's lock() and
// tryLock() take no lease time: the key gets lockWatchdogTimeout (30 s by
// default) and the watch dog renews it to that every lockWatchdogTimeout/3
// (10 s). lock(leaseTime) and tryLock(wait, leaseTime) start no watch dog:
// the key expires at leaseTime. A Go Acquire always names a ttl, so the ttl
// plays the part of lockWatchdogTimeout while the watchdog runs (the
// default): Acquire(ctx, key, LockWatchdogTimeout) is Redisson's tryLock(),
// and locklab.Wait or a Notifier's Wait with it is lock(). With
// Config.NoWatchdog the ttl is a lease time: Acquire(ctx, key, leaseTime)
// is tryLock(0, leaseTime).
//
// Who re-enters. Redisson names the holder UUID:threadId, the client's id
// and the thread's: a thread re-enters its own lock, and two threads of one
// client exclude each other. Go has no goroutine id, and no way to tell
// which goroutine holds what; Go's own sync.Mutex does not re-enter at
// all. So a holder here is the Locker's id (ID, Redisson's UUID) and an
// owner the caller names with WithOwner on the context (the threadId's
// part): acquires whose contexts name the same owner re-enter, and an
// acquire whose context names none is an owner of its own, which re-enters
// nothing. Goroutines that share one Locker therefore exclude each other
// unless they say they are one owner.
//
// Re-entry and the watchdog fix nothing of what set-nx-px lacks: a holder
// paused past its TTL pauses its watchdog too, the lease carries no fence
// number, and a restart without persistence or a failover to a replica that
// missed the write loses the lock.
package reentrant

import (
	"context"
	_ "embed"
	"sync"
	"time"

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

	acquireScript = rcmd.NewScript("hash-reentrant.acquire", 1, acquireSrc)
	releaseScript = rcmd.NewScript("hash-reentrant.release", 1, releaseSrc)
	extendScript  = rcmd.NewScript("hash-reentrant.extend", 1, extendSrc)
)

// LockWatchdogTimeout is Redisson's default lockWatchdogTimeout, 30 s: the
// lease of a lock taken without a lease time, which the watch dog renews
// every third of it (10 s). Pass it as Acquire's ttl for Redisson's
// defaults.
const LockWatchdogTimeout = 30 * time.Second

type ownerKey struct{}

// WithOwner returns ctx naming owner as the owner of the locks acquired
// with it: on one HashReentrant, acquires whose contexts name the same
// owner re-enter each other's lock, as one Redisson thread's do. An empty
// owner names none.
func WithOwner(ctx context.Context, owner string) context.Context {
	return context.WithValue(ctx, ownerKey{}, owner)
}

// Owner returns the owner ctx names (WithOwner), or "".
func Owner(ctx context.Context) string {
	o, _ := ctx.Value(ownerKey{}).(string)
	return o
}

// HashReentrant is the "hash-reentrant" strategy. Its id, drawn at New,
// and the owner an Acquire's context names (WithOwner) make the field it
// writes, ID:owner; an Acquire whose context names no owner draws a fresh
// one. Leases carry the field as their Token. Acquiring a key the same
// field already holds enters again (the count grows and the TTL is reset);
// each Release leaves once and renews the TTL while entries remain, and
// the lock is deleted only at the last.
//
// The watchdog is on unless Config.NoWatchdog: the first Acquire of a key
// starts a locklab.Watchdog that extends the lock to the Acquire's ttl
// every ttl/3 until the last Release, Close, or the loss of the lock
// (Watchdog returns it, to watch Lost). The watchdog lives in the holder's
// process: when the process pauses, so does the watchdog, and the lock can
// expire under a holder that still believes it has it.
type HashReentrant struct {
	base  single.Base
	id    string
	watch bool
	dogs  single.Dogs

	mu sync.Mutex
	// leases is the ttl of each field's last acquire of each key, which a
	// release that leaves entries renews (Redisson's internalLockLeaseTime).
	leases map[fieldKey]time.Duration
}

type fieldKey struct{ key, field string }

var _ locklab.Extender = (*HashReentrant)(nil)

// New builds a HashReentrant from cfg.Pool, cfg.Clock, cfg.Rand and
// cfg.NoWatchdog. Its release always publishes, so Config.Notify is
// accepted and changes nothing; so is Config.Watchdog, the default.
func New(cfg locklab.Config) (*HashReentrant, error) {
	b, err := single.New(cfg, "hash-reentrant", locklab.OptNotify, locklab.OptWatchdog, locklab.OptNoWatchdog)
	if err != nil {
		return nil, err
	}
	if cfg.Watchdog && cfg.NoWatchdog {
		return nil, lockkit.Invalid("Config.Watchdog and Config.NoWatchdog are both set")
	}
	return newHolder(b, !cfg.NoWatchdog)
}

func newHolder(b single.Base, watch bool) (*HashReentrant, error) {
	id, err := b.Tokens.Token()
	if err != nil {
		return nil, lockkit.Unavailable(err)
	}
	return &HashReentrant{base: b, id: id, watch: watch, leases: map[fieldKey]time.Duration{}}, nil
}

// Holder returns a new holder on the same servers, clock and options, with
// an id of its own: it competes with l for every key, whatever the owners.
func (l *HashReentrant) Holder() (*HashReentrant, error) { return newHolder(l.base, l.watch) }

// ID is the holder's id, the first part of the hash fields its locks carry.
func (l *HashReentrant) ID() string { return l.id }

// field is the hash field of an acquire with ctx: ID:owner.
func (l *HashReentrant) field(ctx context.Context) (string, error) {
	o := Owner(ctx)
	if o == "" {
		var err error
		if o, err = l.base.Tokens.Token(); err != nil {
			return "", lockkit.Unavailable(err)
		}
	}
	return l.id + ":" + o, nil
}

// Acquire runs the acquire script: one command. A refusal is a
// *locklab.HeldError that tells how long the other holder's lock has left.
func (l *HashReentrant) Acquire(ctx context.Context, key string, ttl time.Duration) (locklab.Lease, error) {
	c, err := l.base.BeginAcquire(ctx, key, ttl)
	if err != nil {
		return locklab.Lease{}, err
	}
	defer c.Close()
	field, err := l.field(ctx)
	if err != nil {
		return locklab.Lease{}, err
	}
	start := l.base.Clock.Now()
	v, err := acquireScript.Do(ctx, c, key, field, single.Millis(ttl))
	if err != nil {
		return locklab.Lease{}, err
	}
	if n, ok := v.(int64); ok {
		lease := single.Lease(key, field, 0, start, ttl)
		l.mu.Lock()
		l.leases[fieldKey{key, field}] = ttl
		l.mu.Unlock()
		if l.watch {
			l.dogs.Start(ctx, l, lease, ttl, 0, n > 1)
		}
		return lease, nil
	}
	return locklab.Lease{}, single.Held(key, v)
}

// Watchdog returns the watchdog keeping key alive, or nil when none runs
// (Config.NoWatchdog, or the key is not held).
func (l *HashReentrant) Watchdog(key string) *locklab.Watchdog { return l.dogs.Get(key) }

// Close stops every watchdog of the holder, as the holder's process ending
// would; the locks then expire at their TTL. It does not release them.
func (l *HashReentrant) Close() error {
	l.dogs.Close()
	return nil
}

// Release leaves the lock once: one command. While entries remain the
// key's TTL is reset to the lease's acquire's ttl, as Redisson's unlock
// does. At the last exit the key is deleted, the release published and the
// watchdog stopped. It fails with ErrNotHeld when the lock is gone or
// another holder's.
func (l *HashReentrant) Release(ctx context.Context, lease locklab.Lease) error {
	c, err := l.base.BeginRelease(ctx, lease)
	if err != nil {
		return err
	}
	defer c.Close()
	fk := fieldKey{lease.Key, lease.Token}
	l.mu.Lock()
	ttl := l.leases[fk]
	l.mu.Unlock()
	var renew int64 // 0: a lease of another Locker, whose ttl is unknown: no renewal
	if ttl > 0 {
		renew = single.Millis(ttl)
	}
	v, err := releaseScript.Do(ctx, c, lease.Key, lease.Token, locklab.ReleaseChannelPrefix+lease.Key, renew)
	if err != nil {
		return err
	}
	n, ok := v.(int64)
	if !ok || n == 0 {
		l.mu.Lock()
		delete(l.leases, fk)
		l.mu.Unlock()
		l.dogs.Stop(lease.Key, lease.Token)
	}
	if !ok {
		return single.NotHeld(lease.Key)
	}
	return nil
}

// Extend resets the TTL of a lock lease's holder still has and returns the
// lease with its new deadline. It fails with ErrNotHeld when the lock is
// gone or another holder's, and never re-creates it.
func (l *HashReentrant) Extend(ctx context.Context, lease locklab.Lease, ttl time.Duration) (locklab.Lease, error) {
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

// LeaseClock is the Clock Lease.Until is read from (Config.Clock), on
// which locklab.Watch judges expiry.
func (l *HashReentrant) LeaseClock() locklab.Clock { return l.base.Clock }
