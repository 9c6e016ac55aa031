package rueidislock_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/locklab/locklab"
	locklabrueidis "github.com/locklab/locklab/adapters/rueidis"
	"github.com/locklab/locklab/examples/rueidislock"
	"github.com/locklab/locklab/locklabtest"
	"github.com/locklab/locklab/strategies"
)

// mutex is what both locks of rueidislock offer.
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
	if errors.Is(err, rueidislock.ErrTaken) {
		return locklab.Lease{}, locklab.ErrNotAcquired
	}
	if err != nil {
		return locklab.Lease{}, err
	}
	return locklab.Lease{Key: key, Token: token, Until: start.Add(ttl)}, nil
}

func (l locker) Release(ctx context.Context, lease locklab.Lease) error {
	err := l.m.Unlock(ctx, lease.Key, lease.Token)
	if errors.Is(err, rueidislock.ErrNotHeld) {
		return locklab.ErrNotHeld
	}
	return err
}

// factory builds the lock newLock makes on a rueidis client whose every
// command goes through the harness's connections (cfg.Pool): each one is
// a step of the schedule. Tokens come from the run's seeded source, so
// that a schedule replays exactly. The harness does not close the locks
// it builds: the clients are closed when the test ends.
func factory(t *testing.T, newLock func(rueidislock.GetThenDel) mutex) strategies.Factory {
	var mu sync.Mutex
	var clients []rueidis.Client
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range clients {
			c.Close()
		}
	})
	return func(cfg locklab.Config) (locklab.Locker, error) {
		client, err := locklabrueidis.NewClient(cfg.Pool, rueidis.ClientOption{})
		if err != nil {
			return nil, err
		}
		mu.Lock()
		clients = append(clients, client)
		mu.Unlock()
		return locker{newLock(rueidislock.GetThenDel{Client: client, Rand: cfg.Rand}), cfg.ClockOrDefault()}, nil
	}
}

// TestGetThenDel pins the GET-then-DEL release's known break: the holder
// reads its own token, its lock expires and another client takes it, and
// the DEL deletes the other's lock.
func TestGetThenDel(t *testing.T) {
	d := strategies.Description{Name: "rueidis-get-then-del", Family: "example"}
	broken := factory(t, func(l rueidislock.GetThenDel) mutex { return l })
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
	d := strategies.Description{Name: "rueidis-compare-and-delete", Family: "example"}
	fixed := factory(t, func(l rueidislock.GetThenDel) mutex { return rueidislock.CompareAndDelete{GetThenDel: l} })
	locklabtest.Run(t, d, fixed, locklabtest.Scenarios("release-after-expiry"))
}
