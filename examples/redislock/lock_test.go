package redislock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/adapters/goredis"
	"github.com/locklab/locklab/examples/redislock"
	"github.com/locklab/locklab/locklabtest"
	"github.com/locklab/locklab/strategies"
)

// mutex is what both locks of redislock offer.
type mutex interface {
	TryLock(ctx context.Context, key string, ttl time.Duration) (string, error)
	Unlock(ctx context.Context, key, token string) error
}

// locker puts a mutex behind locklab.Locker, the interface the harness
// drives; the lease's end is read on the clock the harness gives.
type locker struct {
	m     mutex
	clock locklab.Clock
}

func (l locker) Acquire(ctx context.Context, key string, ttl time.Duration) (locklab.Lease, error) {
	start := l.clock.Now()
	token, err := l.m.TryLock(ctx, key, ttl)
	if errors.Is(err, redislock.ErrTaken) {
		return locklab.Lease{}, locklab.ErrNotAcquired
	}
	if err != nil {
		return locklab.Lease{}, err
	}
	return locklab.Lease{Key: key, Token: token, Until: start.Add(ttl)}, nil
}

func (l locker) Release(ctx context.Context, lease locklab.Lease) error {
	err := l.m.Unlock(ctx, lease.Key, lease.Token)
	if errors.Is(err, redislock.ErrNotHeld) {
		return locklab.ErrNotHeld
	}
	return err
}

// factory builds the lock newLock makes on a go-redis client whose every
// command goes through the harness's connections (cfg.Pool): each one is
// a step of the schedule. Tokens come from the run's seeded source, so
// that a schedule replays exactly.
func factory(newLock func(redislock.GetThenDel) mutex) strategies.Factory {
	return func(cfg locklab.Config) (locklab.Locker, error) {
		rdb := goredis.NewClient(cfg.Pool, nil)
		return locker{newLock(redislock.GetThenDel{RDB: rdb, Rand: cfg.Rand}), cfg.ClockOrDefault()}, nil
	}
}

// TestGetThenDel pins the GET-then-DEL release's known break: the holder
// reads its own token, its lock expires and another client takes it, and
// the DEL deletes the other's lock.
func TestGetThenDel(t *testing.T) {
	d := strategies.Description{Name: "goredis-get-then-del", Family: "example"}
	broken := factory(func(l redislock.GetThenDel) mutex { return l })
	m := locklabtest.Run(t, d, broken,
		locklabtest.Scenarios("release-after-expiry"), locklabtest.ExpectViolation("release-after-expiry"))
	cell, ok := m.Cell(d.Name, "release-after-expiry")
	if !ok {
		t.Fatal("no cell for release-after-expiry")
	}
	t.Log(locklabtest.Failure(cell))
	// c1 takes the lock, writes, and GETs its token; time passes the TTL;
	// c2 takes the lock; c1's DEL deletes it.
	const schedule, message = "c1 c1 c1 time c2 c1", "c1's release deleted c2's lock on n1 at step 6"
	if cell.Schedule != schedule || cell.Message != message {
		t.Errorf("counterexample %q (%s), want %q (%s)", cell.Schedule, cell.Message, schedule, message)
	}
}

// TestCompareAndDelete passes the same lock released by the script.
func TestCompareAndDelete(t *testing.T) {
	d := strategies.Description{Name: "goredis-compare-and-delete", Family: "example"}
	fixed := factory(func(l redislock.GetThenDel) mutex { return redislock.CompareAndDelete{GetThenDel: l} })
	locklabtest.Run(t, d, fixed, locklabtest.Scenarios("release-after-expiry"))
}
