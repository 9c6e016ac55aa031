package redislock_test

import (
	"context"
	"encoding/hex"
	"errors"
	"io"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/adapters/goredis"
	"github.com/locklab/locklab/locklabtest"
	"github.com/locklab/locklab/strategies"
)

// watchLock is a lock on go-redis, written as a Locker, that releases with WATCH, GET, then
// MULTI DEL EXEC: the transaction fails when the key changed after the
// WATCH, so the release deletes only its own token.
type watchLock struct {
	rdb   *redis.Client
	cfg   locklab.Config
	clock locklab.Clock
}

func (l watchLock) Acquire(ctx context.Context, key string, ttl time.Duration) (locklab.Lease, error) {
	b := make([]byte, 8)
	if _, err := io.ReadFull(l.cfg.Rand, b); err != nil {
		return locklab.Lease{}, err
	}
	token, start := hex.EncodeToString(b), l.clock.Now()
	ok, err := l.rdb.SetNX(ctx, key, token, ttl).Result()
	if err != nil {
		return locklab.Lease{}, err
	}
	if !ok {
		return locklab.Lease{}, locklab.ErrNotAcquired
	}
	return locklab.Lease{Key: key, Token: token, Until: start.Add(ttl)}, nil
}

func (l watchLock) Release(ctx context.Context, lease locklab.Lease) error {
	err := l.rdb.Watch(ctx, func(tx *redis.Tx) error {
		v, err := tx.Get(ctx, lease.Key).Result()
		if errors.Is(err, redis.Nil) || (err == nil && v != lease.Token) {
			return locklab.ErrNotHeld
		}
		if err != nil {
			return err
		}
		_, err = tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.Del(ctx, lease.Key)
			return nil
		})
		return err
	}, lease.Key)
	if errors.Is(err, redis.TxFailedErr) {
		return locklab.ErrNotHeld
	}
	return err
}

// TestWatchRelease runs a go-redis lock whose release is a WATCH … MULTI
// … EXEC transaction through goredis.NewClient: the harness schedules
// each of its commands, and finds the release safe where GET-then-DEL is
// not.
func TestWatchRelease(t *testing.T) {
	f := func(cfg locklab.Config) (locklab.Locker, error) {
		return watchLock{rdb: goredis.NewClient(cfg.Pool, nil), cfg: cfg, clock: cfg.ClockOrDefault()}, nil
	}
	d := strategies.Description{Name: "goredis-client-watch", Family: "test"}
	locklabtest.Run(t, d, f, locklabtest.Scenarios("release-after-expiry", "lost-reply"))

	// GET-then-DEL's counterexample, replayed on this lock: c1's GET sees
	// c2's token and its release ends with UNWATCH; c2's runs WATCH, GET,
	// MULTI, DEL (queued) and EXEC, a step each.
	h := locklabtest.Replay(t, d, f, "release-after-expiry", "c1 c1 c1 time c2 c1")
	var got []string
	for _, e := range h.Events {
		if len(e.Command) > 0 {
			got = append(got, e.Command[0])
		}
	}
	want := []string{"SET", "write", "WATCH", "SET", "GET", "UNWATCH", "write", "WATCH", "GET", "MULTI", "DEL", "EXEC"}
	if !slices.Equal(got, want) {
		t.Errorf("the replay's steps ran %q, want %q", got, want)
	}
	if len(h.WrongRelease) != 0 {
		t.Errorf("wrongful releases: %+v", h.WrongRelease)
	}
}
