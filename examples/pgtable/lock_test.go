package pgtable_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/examples/pgtable"
	"github.com/locklab/locklab/locklabtest"
	"github.com/locklab/locklab/strategies"
)

// mutex is what both locks of pgtable offer.
type mutex interface {
	TryLock(ctx context.Context, key string, ttl time.Duration) (string, error)
	Unlock(ctx context.Context, key, token string) error
}

// locker puts a mutex behind locklab.Locker; the lease's end is read on
// the clock the harness gives.
type locker struct {
	m     mutex
	clock locklab.Clock
}

func (l locker) Acquire(ctx context.Context, key string, ttl time.Duration) (locklab.Lease, error) {
	start := l.clock.Now()
	token, err := l.m.TryLock(ctx, key, ttl)
	if errors.Is(err, pgtable.ErrTaken) {
		return locklab.Lease{}, locklab.ErrNotAcquired
	}
	if err != nil {
		return locklab.Lease{}, err
	}
	return locklab.Lease{Key: key, Token: token, Until: start.Add(ttl)}, nil
}

func (l locker) Release(ctx context.Context, lease locklab.Lease) error {
	err := l.m.Unlock(ctx, lease.Key, lease.Token)
	if errors.Is(err, pgtable.ErrNotHeld) {
		return locklab.ErrNotHeld
	}
	return err
}

// factory builds the lock newLock makes on the pgx pool the harness
// gives a lock of the postgres family (cfg.Store): each statement is a
// step of the schedule. Expiry is written and judged on the run's clock.
// The table is the one where the harness reads who holds a key (the
// token of the key's row) and which it empties between runs.
func factory(newLock func(*pgtable.GetThenDel) mutex) strategies.Factory {
	return func(cfg locklab.Config) (locklab.Locker, error) {
		pool, ok := cfg.Store.(*pgxpool.Pool)
		if !ok {
			return nil, fmt.Errorf("Config.Store is %T, want a *pgxpool.Pool", cfg.Store)
		}
		clock := cfg.ClockOrDefault()
		l := &pgtable.GetThenDel{Pool: pool, Table: "locklab_lock_table", Now: clock.Now, Rand: cfg.Rand}
		return locker{newLock(l), clock}, nil
	}
}

// TestGetThenDel pins the SELECT-then-DELETE release's known break: the
// holder reads its own token, its row expires and another client takes it
// over, and the DELETE deletes the other's row.
func TestGetThenDel(t *testing.T) {
	d := strategies.Description{Name: "pgx-get-then-del", Family: "postgres",
		Options: []string{strategies.OptStore}} // the factory reads Config.Store
	broken := factory(func(l *pgtable.GetThenDel) mutex { return l })
	m := locklabtest.Run(t, d, broken,
		locklabtest.Scenarios("release-after-expiry"), locklabtest.ExpectViolation("release-after-expiry"))
	cell, ok := m.Cell(d.Name, "release-after-expiry")
	if !ok {
		t.Fatal("no cell for release-after-expiry")
	}
	t.Log(locklabtest.Failure(cell))
	// c2 takes the lock and writes; time passes the TTL; c2 SELECTs its
	// token; c1 takes the expired row over; c2's DELETE deletes c1's row.
	const schedule, message = "c2 c2 time c2 c1 c2", "c2's release deleted c1's lock on n1 at step 6"
	if cell.Schedule != schedule || cell.Message != message {
		t.Errorf("counterexample %q (%s), want %q (%s)", cell.Schedule, cell.Message, schedule, message)
	}
}

// TestTokenDelete passes the same lock released by one DELETE.
func TestTokenDelete(t *testing.T) {
	d := strategies.Description{Name: "pgx-token-delete", Family: "postgres",
		Options: []string{strategies.OptStore}} // the factory reads Config.Store
	fixed := factory(func(l *pgtable.GetThenDel) mutex { return pgtable.TokenDelete{GetThenDel: l} })
	locklabtest.Run(t, d, fixed, locklabtest.Scenarios("release-after-expiry"))
}
