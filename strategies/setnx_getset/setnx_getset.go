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
	"strconv"
	"time"

	"github.com/gomodule/redigo/redis"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/internal/rcmd"
	"github.com/locklab/locklab/internal/single"
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

// timestampLock is what both variants share: SETNX key <stamp>, and when
// the key exists, GET it; only the recovery of a stale stamp differs.
type timestampLock struct{ single.Base }

// recovery takes over a lock whose stamp has passed; now is the client's
// Unix time in milliseconds and ts the stamp it writes.
type recovery func(ctx context.Context, c redis.Conn, key string, now, ts int64) (bool, error)

// acquire runs SETNX; on 0, GET; on a stale stamp, recover.
func (t timestampLock) acquire(ctx context.Context, key string, ttl time.Duration, recover recovery) (locklab.Lease, error) {
	c, err := t.BeginAcquire(ctx, key, ttl)
	if err != nil {
		return locklab.Lease{}, err
	}
	defer c.Close()
	start := t.Clock.Now()
	now, ts := start.UnixMilli(), stamp(start, ttl)
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
		return false, locklab.Unavailable(err)
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
type SetNXDel struct{ timestampLock }

// NewSetNXDel builds a SetNXDel from cfg.
func NewSetNXDel(cfg locklab.Config) (*SetNXDel, error) {
	return single.Build(cfg, "setnx-del", func(b single.Base) *SetNXDel { return &SetNXDel{timestampLock{b}} })
}

// Acquire runs SETNX; on failure GET; on a stale stamp DEL and SETNX.
func (l *SetNXDel) Acquire(ctx context.Context, key string, ttl time.Duration) (locklab.Lease, error) {
	return l.acquire(ctx, key, ttl, recoverByDel)
}

// Release deletes the key, whoever holds it.
func (l *SetNXDel) Release(ctx context.Context, ls locklab.Lease) error {
	return l.BlindDel(ctx, ls)
}

// SetNXGetSet is the "setnx-getset" strategy: SETNX key <stamp>; when the key
// exists, GET it, and if the stored stamp has passed, GETSET key <stamp>: the
// client wins only if GETSET returned a stamp that has passed too (else a
// faster client, C5, took it first, and this client, C4, has merely pushed
// C5's deadline a little). Release GETs the key and DELs it when the stored
// stamp is not older than the holder's own, as tornado-redis does.
type SetNXGetSet struct{ timestampLock }

// NewSetNXGetSet builds a SetNXGetSet from cfg.
func NewSetNXGetSet(cfg locklab.Config) (*SetNXGetSet, error) {
	return single.Build(cfg, "setnx-getset", func(b single.Base) *SetNXGetSet { return &SetNXGetSet{timestampLock{b}} })
}

// Acquire runs SETNX; on failure GET; on a stale stamp GETSET.
func (l *SetNXGetSet) Acquire(ctx context.Context, key string, ttl time.Duration) (locklab.Lease, error) {
	return l.acquire(ctx, key, ttl, recoverByGetSet)
}

// Release sends GET and, when the stored stamp is at least the lease's own
// (existing >= acquired_until in tornado-redis), DEL. A later stamp written
// by a successor passes that test too: its lock is deleted.
func (l *SetNXGetSet) Release(ctx context.Context, ls locklab.Lease) error {
	c, err := l.BeginRelease(ctx, ls)
	if err != nil {
		return err
	}
	defer c.Close()
	until, err := strconv.ParseInt(ls.Token, 10, 64)
	if err != nil {
		return locklab.Invalid("lease token %q is not a setnx-getset timestamp", ls.Token)
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
