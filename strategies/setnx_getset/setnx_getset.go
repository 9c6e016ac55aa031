// Package setnx_getset holds the timestamp locks of the original SETNX
// documentation page: the key stores the moment the lock expires, as a Unix
// time written by the client, and the key itself never expires. A client
// that finds the lock taken reads that timestamp and, if it has passed,
// recovers the lock of the (presumably crashed) holder.
//
//   - SetNXDel ("setnx-del") recovers with DEL followed by SETNX. Two clients
//     that both see the stale timestamp both DEL and both SETNX, and both
//     hold the lock: the C1/C2 race the page itself describes.
//   - SetNXGetSet ("setnx-getset") recovers with GETSET, the page's fix: only
//     the client whose GETSET returns the stale timestamp wins (C4 and C5).
//     Its release follows the tornado-redis Lock quoted in an anonymous
//     Chinese survey of Redis locks:
//     GET, and DEL when the stored timestamp is not older than the holder's.
//     It still breaks: the timestamps come from client clocks, so a client
//     whose clock runs ahead steals a live lock; and a holder that runs past
//     its deadline sees its successor's later timestamp at release, finds it
//     "not older", and deletes the successor's lock.
//   - SetNXGetSetLua ("setnx-getset-lua") is the page's own remedy for that
//     release: the holder checks that its stamp has not expired, then
//     deletes with a Lua GET-compare-DEL. Clock skew still breaks it.
//   - SetNXForever ("setnx-forever") is tornado-redis's Lock without a TTL:
//     the stamp is LOCK_FOREVER, and a holder that crashes locks everyone
//     out for good.
//
// Sources: the SETNX command page of the Redis documentation, section
// "Design pattern: Locking with SETNX" (later withdrawn with a warning that
// the algorithm has race conditions, there and in huangz's Chinese
// translation), and the tornado-redis Lock quoted in that survey.
//
// The page writes <current Unix time + lock timeout + 1> in seconds. locklab
// writes milliseconds, <Unix time in ms + TTL in ms + 1>, so that TTLs can be
// milliseconds like those of the other strategies. Time is read only through
// the Config's Clock, which is what lets the harness skew a client's clock.
package setnx_getset

import (
	"context"
	_ "embed"
	"strconv"
	"time"

	"github.com/gomodule/redigo/redis"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/internal/rcmd"
	"github.com/locklab/locklab/internal/single"
	"github.com/locklab/locklab/lockkit"
)

// stamp is the value a client writes: its clock's Unix time in milliseconds
// plus the TTL plus 1.
func stamp(now time.Time, ttl time.Duration) int64 {
	return now.UnixMilli() + single.Millis(ttl) + 1
}

// parseStamp reads a stored timestamp the way the tornado-redis code does
// (float(result or 1)): a missing key reads as 1, long expired. ok is false
// for a value that is not a number at all, such as another strategy's token.
func parseStamp(v any) (ts int64, ok bool) {
	b, isBytes := v.([]byte)
	if v == nil || (isBytes && len(b) == 0) {
		return 1, true
	}
	if !isBytes {
		return 0, false
	}
	ts, err := strconv.ParseInt(string(b), 10, 64)
	return ts, err == nil
}

// lockForever is the stamp of a lock without TTL, tornado-redis's
// LOCK_FOREVER = float(2 ** 31 + 1), "1 past max unix time", in
// milliseconds as every stamp here.
const lockForever int64 = (1<<31 + 1) * 1000

// timestampLock is what the variants share: SETNX key <stamp>, and when
// the key exists, GET it; only the recovery of a stale stamp and the
// release differ. forever writes lockForever instead of a stamp that
// counts from the TTL.
type timestampLock struct {
	base    single.Base
	forever bool
}

// recovery takes over a lock whose stamp has passed; now is the client's
// Unix time in milliseconds and ts the stamp it writes.
type recovery func(ctx context.Context, c redis.Conn, key string, now, ts int64) (bool, error)

// acquire runs SETNX; on 0, GET; on a stale stamp, recover.
func (t timestampLock) acquire(ctx context.Context, key string, ttl time.Duration, recover recovery) (locklab.Lease, error) {
	c, err := t.base.BeginAcquire(ctx, key, ttl)
	if err != nil {
		return locklab.Lease{}, err
	}
	defer c.Close()
	start := t.base.Clock.Now()
	now, ts := start.UnixMilli(), stamp(start, ttl)
	if t.forever {
		ts = lockForever
	}
	won, err := setnx(ctx, c, key, ts)
	if err != nil {
		return locklab.Lease{}, err
	}
	if !won {
		v, err := rcmd.Do(ctx, c, "GET", key)
		if err != nil {
			return locklab.Lease{}, err
		}
		if existing, ok := parseStamp(v); ok && existing < now {
			if won, err = recover(ctx, c, key, now, ts); err != nil {
				return locklab.Lease{}, err
			}
		}
	}
	if !won {
		return locklab.Lease{}, single.NotAcquired(key)
	}
	return single.Lease(key, strconv.FormatInt(ts, 10), 0, start, ttl), nil
}

func setnx(ctx context.Context, c redis.Conn, key string, ts int64) (bool, error) {
	n, err := redis.Int64(rcmd.Do(ctx, c, "SETNX", key, ts))
	if err != nil {
		return false, lockkit.Unavailable(err)
	}
	return n == 1, nil
}

// recoverByDel is the page's naive recovery: DEL the stale key, SETNX again.
func recoverByDel(ctx context.Context, c redis.Conn, key string, _, ts int64) (bool, error) {
	if _, err := rcmd.Do(ctx, c, "DEL", key); err != nil {
		return false, err
	}
	return setnx(ctx, c, key, ts)
}

// recoverByGetSet is the page's fix: GETSET writes this client's stamp and
// returns the previous one; the client wins only if that one had passed too.
func recoverByGetSet(ctx context.Context, c redis.Conn, key string, now, ts int64) (bool, error) {
	v, err := rcmd.Do(ctx, c, "GETSET", key, ts)
	if err != nil {
		return false, err
	}
	old, ok := parseStamp(v)
	return ok && old < now, nil
}

// SetNXDel is the "setnx-del" strategy: SETNX key <stamp>; when the key
// exists, GET it, and if the stored stamp has passed, DEL it and SETNX again.
// Release is DEL. Two clients that see the same stale stamp both acquire.
//
// Broken by design, kept to be raced and watched failing: never protect
// anything with it. strategies.Info says how it breaks; set-nx-px is this
// family's lock to use instead.
type SetNXDel struct{ timestampLock }

// NewSetNXDel builds a SetNXDel from cfg.
func NewSetNXDel(cfg locklab.Config) (*SetNXDel, error) {
	return single.Build(cfg, "setnx-del", func(b single.Base) *SetNXDel { return &SetNXDel{timestampLock{base: b}} })
}

// Acquire runs SETNX; on failure GET; on a stale stamp DEL and SETNX.
func (l *SetNXDel) Acquire(ctx context.Context, key string, ttl time.Duration) (locklab.Lease, error) {
	return l.acquire(ctx, key, ttl, recoverByDel)
}

// Release deletes the key, whoever holds it.
func (l *SetNXDel) Release(ctx context.Context, ls locklab.Lease) error {
	return l.base.BlindDel(ctx, ls)
}

// SetNXGetSet is the "setnx-getset" strategy: SETNX key <stamp>; when the key
// exists, GET it, and if the stored stamp has passed, GETSET key <stamp>: the
// client wins only if GETSET returned a stamp that has passed too (else a
// faster client, C5, took it first, and this client, C4, has merely pushed
// C5's deadline a little). Release GETs the key and DELs it when the stored
// stamp is not older than the holder's own, as tornado-redis does.
//
// Broken by design, kept to be raced and watched failing: never protect
// anything with it. strategies.Info says how it breaks; set-nx-px is this
// family's lock to use instead.
type SetNXGetSet struct{ timestampLock }

// NewSetNXGetSet builds a SetNXGetSet from cfg.
func NewSetNXGetSet(cfg locklab.Config) (*SetNXGetSet, error) {
	return single.Build(cfg, "setnx-getset", func(b single.Base) *SetNXGetSet { return &SetNXGetSet{timestampLock{base: b}} })
}

// Acquire runs SETNX; on failure GET; on a stale stamp GETSET.
func (l *SetNXGetSet) Acquire(ctx context.Context, key string, ttl time.Duration) (locklab.Lease, error) {
	return l.acquire(ctx, key, ttl, recoverByGetSet)
}

// Release sends GET and, when the stored stamp is at least the lease's own
// (existing >= acquired_until in tornado-redis), DEL. A later stamp written
// by a successor passes that test too: its lock is deleted.
func (l *SetNXGetSet) Release(ctx context.Context, ls locklab.Lease) error {
	return l.tornadoRelease(ctx, ls)
}

// tornadoRelease is the release of tornado-redis's Lock: GET, and DEL when
// the stored stamp is not older than the holder's own.
func (t timestampLock) tornadoRelease(ctx context.Context, ls locklab.Lease) error {
	c, err := t.base.BeginRelease(ctx, ls)
	if err != nil {
		return err
	}
	defer c.Close()
	until, err := strconv.ParseInt(ls.Token, 10, 64)
	if err != nil {
		return lockkit.Invalid("lease token %q is not a timestamp lock's stamp", ls.Token)
	}
	v, err := rcmd.Do(ctx, c, "GET", ls.Key)
	if err != nil {
		return err
	}
	if existing, ok := parseStamp(v); !ok || existing < until {
		return single.NotHeld(ls.Key)
	}
	return single.Del(ctx, c, ls.Key)
}

// LeaseClock is the Clock Lease.Until is read from (Config.Clock), on
// which locklab.Watch judges expiry.
func (t timestampLock) LeaseClock() locklab.Clock { return t.base.Clock }

// SetNXGetSetLua is the "setnx-getset-lua" strategy: setnx-getset's acquire
// (SETNX, GET, GETSET on a stale stamp: C4/C5) with the release the SETNX
// page itself adds to make the algorithm "more robust": the holder first
// checks that its own stamp has not expired ("持有锁的客户端在解锁之前应当再检查一次自己的锁是没有过期",
// "the client holding the lock should check that its lock has not expired
// before unlocking with DEL"), then deletes the key with one Lua script that
// GETs the stamp and DELs only when it is the holder's own ("先确定锁没有过期,
// 再通过 EVAL 命令执行 Lua 脚本：先执行 GET 指令获取锁的时间戳,
// 确认和自己的时间戳一致后再执行 DEL 释放锁"), the CAS delete the plain DEL lacks.
//
// Source: the SETNX command page's "Design pattern: Locking with SETNX" as
// quoted in the anonymous Chinese survey (000 in the seeds), with its
// "解决方案" for the release of an expired lock. The survey's own caveats
// stay true here: the stamps are client clocks, so a client whose clock runs
// ahead still takes a live lock; and a losing GETSET (C4) overwrites the
// winner's (C5) stamp, whose release then finds a stamp not its own and
// leaves the lock to expire.
//
// Broken by design (clock skew), kept to be raced and watched failing:
// never protect anything with it. set-nx-px is the lock to use instead.
type SetNXGetSetLua struct{ timestampLock }

// NewSetNXGetSetLua builds a SetNXGetSetLua from cfg.
func NewSetNXGetSetLua(cfg locklab.Config) (*SetNXGetSetLua, error) {
	return single.Build(cfg, "setnx-getset-lua", func(b single.Base) *SetNXGetSetLua { return &SetNXGetSetLua{timestampLock{base: b}} })
}

// Acquire runs SETNX; on failure GET; on a stale stamp GETSET.
func (l *SetNXGetSetLua) Acquire(ctx context.Context, key string, ttl time.Duration) (locklab.Lease, error) {
	return l.acquire(ctx, key, ttl, recoverByGetSet)
}

//go:embed release.lua
var releaseSrc string

var releaseScript = rcmd.NewScript("setnx-getset-lua.release", 1, releaseSrc)

// Release checks the lease's own stamp against the Clock first: a stamp
// that has passed (a recoverer would find it stale) is not deleted, and the
// release fails with ErrNotHeld without sending anything. Otherwise one Lua
// script deletes the key when it still holds the lease's stamp.
func (l *SetNXGetSetLua) Release(ctx context.Context, ls locklab.Lease) error {
	if err := lockkit.CheckLease(ctx, ls); err != nil {
		return err
	}
	until, err := strconv.ParseInt(ls.Token, 10, 64)
	if err != nil {
		return lockkit.Invalid("lease token %q is not a timestamp lock's stamp", ls.Token)
	}
	if until < l.base.Clock.Now().UnixMilli() {
		return single.NotHeld(ls.Key)
	}
	c, err := l.base.BeginRelease(ctx, ls)
	if err != nil {
		return err
	}
	defer c.Close()
	v, err := releaseScript.Do(ctx, c, ls.Key, ls.Token)
	return single.DelReleased(ls.Key, v, err)
}

// SetNXForever is the "setnx-forever" strategy: tornado-redis's Lock built
// without lock_ttl. Its stamp is LOCK_FOREVER, "1 past max unix time"
// (2**31 + 1 seconds, in 2038), whatever ttl Acquire is given: "If none is
// specified, it will remain locked until release() is called", and the code
// itself says "Otherwise, set the timeout value at forever (dangerous)". No
// client ever finds that stamp stale, so a holder that crashes before its
// release locks everyone out for good: DEL by hand is the only way out.
// Acquire and release are tornado-redis's as in setnx-getset (SETNX, GET,
// GETSET on a stale stamp; release GET, compare, DEL).
//
// Acquire's ttl reaches neither the key nor the stamp; it bounds only
// Lease.Until, the holder's own budget, so that a Lease means what it means
// for every strategy: past Until, assume nothing.
//
// Source: the tornado-redis Lock (LOCK_FOREVER, lock_ttl=None) quoted in the
// anonymous Chinese survey of Redis locks (000 in the seeds).
//
// Broken by design, kept to be raced and watched failing: never protect
// anything with it.
type SetNXForever struct{ timestampLock }

// NewSetNXForever builds a SetNXForever from cfg.
func NewSetNXForever(cfg locklab.Config) (*SetNXForever, error) {
	return single.Build(cfg, "setnx-forever", func(b single.Base) *SetNXForever {
		return &SetNXForever{timestampLock{base: b, forever: true}}
	})
}

// Acquire runs SETNX key LOCK_FOREVER; on failure GET; on a stale stamp
// (never one of this strategy's) GETSET.
func (l *SetNXForever) Acquire(ctx context.Context, key string, ttl time.Duration) (locklab.Lease, error) {
	return l.acquire(ctx, key, ttl, recoverByGetSet)
}

// Release is tornado-redis's: GET, and DEL when the stored stamp is not
// older than LOCK_FOREVER.
func (l *SetNXForever) Release(ctx context.Context, ls locklab.Lease) error {
	return l.tornadoRelease(ctx, ls)
}
