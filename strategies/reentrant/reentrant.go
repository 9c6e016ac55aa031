// Package reentrant holds the Redisson-style lock ("hash-reentrant"): the
// lock is a Redis hash whose one field is the holder's id and whose value
// counts how many times that holder has entered, so a holder that already
// has the lock can take it again without deadlocking itself. It is the lock
// Redisson's RedissonLock implements, as the notes "分布式锁 Distributed Lock"
// describe it.
//
//   - Acquire: if the key does not exist, or its hash has the holder's
//     field, HINCRBY the field and PEXPIRE the key; else refuse with the
//     holder's remaining TTL. One Lua script.
//   - Release: if the field exists, HINCRBY it by -1; at zero DEL the key and
//     PUBLISH on locklab.ReleaseChannelPrefix + key, so that the waiters of
//     a locklab.Notifier wake at once. One Lua script.
//   - Extend: PEXPIRE when the field exists; with Config.Watchdog a
//     locklab.Watchdog sends it every TTL/3 while the holder holds the lock.
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
)

var (
	//go:embed acquire.lua
	acquireSrc string
	//go:embed release.lua
	releaseSrc string
	//go:embed extend.lua
	extendSrc string

	acquireScript = rcmd.NewScript(1, acquireSrc)
	releaseScript = rcmd.NewScript(1, releaseSrc)
	extendScript  = rcmd.NewScript(1, extendSrc)
)

// HashReentrant is the "hash-reentrant" strategy. One HashReentrant is one
// holder: its id, drawn at New, is the field it writes, and its leases carry
// that id as their Token. Acquiring a key it already holds enters again
// (the count grows and the TTL is reset); each Release leaves once, and
// the lock is deleted only at the last. Goroutines that must exclude each
// other need holders of their own: Holder makes one on the same servers.
//
// With Config.Watchdog, the first Acquire of a key starts a
// locklab.Watchdog that extends the lock every TTL/3 until the last
// Release, Close, or the loss of the lock (Watchdog returns it, to watch
// Lost). The watchdog lives in the holder's process: when the process
// pauses, so does the watchdog, and the lock can expire under a holder that
// still believes it has it.
type HashReentrant struct {
	single.Base
	id    string
	watch bool

	mu   sync.Mutex
	dogs map[string]*dog
}

// dog is the watchdog of one key, with the cancel that ends its extends.
type dog struct {
	w      *locklab.Watchdog
	cancel context.CancelFunc
}

var _ locklab.Extender = (*HashReentrant)(nil)

// New builds a HashReentrant from cfg.Pool, cfg.Clock, cfg.Rand and
// cfg.Watchdog. Its release always publishes, so Config.Notify is accepted
// and changes nothing.
func New(cfg locklab.Config) (*HashReentrant, error) {
	b, err := single.New(cfg, "hash-reentrant", locklab.OptNotify, locklab.OptWatchdog)
	if err != nil {
		return nil, err
	}
	return newHolder(b, cfg.Watchdog)
}

func newHolder(b single.Base, watch bool) (*HashReentrant, error) {
	id, err := b.Tokens.Token()
	if err != nil {
		return nil, locklab.Unavailable(err)
	}
	return &HashReentrant{Base: b, id: id, watch: watch, dogs: map[string]*dog{}}, nil
}

// Holder returns a new holder on the same servers, clock and options, with
// an id of its own: it competes with l for every key.
func (l *HashReentrant) Holder() (*HashReentrant, error) { return newHolder(l.Base, l.watch) }

// ID is the holder's id, the hash field its locks carry.
func (l *HashReentrant) ID() string { return l.id }

// Acquire runs the acquire script: one command. A refusal is a
// *locklab.HeldError that tells how long the other holder's lock has left.
func (l *HashReentrant) Acquire(ctx context.Context, key string, ttl time.Duration) (locklab.Lease, error) {
	c, err := l.BeginAcquire(ctx, key, ttl)
	if err != nil {
		return locklab.Lease{}, err
	}
	defer c.Close()
	start := l.Clock.Now()
	v, err := acquireScript.Do(ctx, c, key, l.id, single.Millis(ttl))
	if err != nil {
		return locklab.Lease{}, err
	}
	if n, ok := v.(int64); ok {
		lease := single.Lease(key, l.id, 0, start, ttl)
		if l.watch {
			l.startDog(ctx, lease, ttl, n == 1)
		}
		return lease, nil
	}
	held := &locklab.HeldError{Key: key}
	if a, ok := v.([]any); ok && len(a) == 1 {
		if ms, _ := a[0].(int64); ms > 0 {
			held.Remaining = time.Duration(ms) * time.Millisecond
		}
	}
	return locklab.Lease{}, held
}

// startDog starts the watchdog of lease's key, unless one is already
// watching it and the acquire was a re-entry.
func (l *HashReentrant) startDog(ctx context.Context, lease locklab.Lease, ttl time.Duration, first bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	old := l.dogs[lease.Key]
	if old != nil && !first {
		select {
		case <-old.w.Lost():
		default:
			return
		}
	}
	if old != nil {
		old.cancel()
		old.w.Stop()
	}
	// The watchdog outlives the Acquire's context, not the holder.
	wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	w, err := locklab.Watch(wctx, l, lease, ttl, 0)
	if err != nil {
		cancel()
		delete(l.dogs, lease.Key)
		return
	}
	l.dogs[lease.Key] = &dog{w: w, cancel: cancel}
}

// stopDog ends the watchdog of key, if any.
func (l *HashReentrant) stopDog(key string) {
	l.mu.Lock()
	d := l.dogs[key]
	delete(l.dogs, key)
	l.mu.Unlock()
	if d != nil {
		d.cancel()
		d.w.Stop()
	}
}

// Watchdog returns the watchdog keeping key alive, or nil when none runs
// (Config.Watchdog unset, or the key is not held).
func (l *HashReentrant) Watchdog(key string) *locklab.Watchdog {
	l.mu.Lock()
	defer l.mu.Unlock()
	if d := l.dogs[key]; d != nil {
		return d.w
	}
	return nil
}

// Close stops every watchdog of the holder, as the holder's process ending
// would; the locks then expire at their TTL. It does not release them.
func (l *HashReentrant) Close() error {
	l.mu.Lock()
	dogs := l.dogs
	l.dogs = map[string]*dog{}
	l.mu.Unlock()
	for _, d := range dogs {
		d.cancel()
		d.w.Stop()
	}
	return nil
}

// Release leaves the lock once: one command. At the last exit the key is
// deleted, the release published and the watchdog stopped. It fails with
// ErrNotHeld when the lock is gone or another holder's.
func (l *HashReentrant) Release(ctx context.Context, lease locklab.Lease) error {
	c, err := l.BeginRelease(ctx, lease)
	if err != nil {
		return err
	}
	defer c.Close()
	v, err := releaseScript.Do(ctx, c, lease.Key, lease.Token, locklab.ReleaseChannelPrefix+lease.Key)
	if err != nil {
		return err
	}
	n, ok := v.(int64)
	if !ok {
		l.stopDog(lease.Key)
		return single.NotHeld(lease.Key)
	}
	if n == 0 {
		l.stopDog(lease.Key)
	}
	return nil
}

// Extend resets the TTL of a lock lease's holder still has and returns the
// lease with its new deadline. It fails with ErrNotHeld when the lock is
// gone or another holder's, and never re-creates it.
func (l *HashReentrant) Extend(ctx context.Context, lease locklab.Lease, ttl time.Duration) (locklab.Lease, error) {
	if err := locklab.CheckAcquire(ctx, lease.Key, ttl); err != nil {
		return locklab.Lease{}, err
	}
	c, err := l.BeginRelease(ctx, lease)
	if err != nil {
		return locklab.Lease{}, err
	}
	defer c.Close()
	start := l.Clock.Now()
	v, err := extendScript.Do(ctx, c, lease.Key, lease.Token, single.Millis(ttl))
	if err != nil {
		return locklab.Lease{}, err
	}
	if n, _ := v.(int64); n != 1 {
		return locklab.Lease{}, single.NotHeld(lease.Key)
	}
	lease.Until = start.Add(ttl)
	return lease, nil
}
