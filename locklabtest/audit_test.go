package locklabtest_test

import (
	"context"
	"encoding/hex"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/harness"
	"github.com/locklab/locklab/locklabtest"
	"github.com/locklab/locklab/strategies"
)

// getThenDel is a lock as many services still write it: SET NX PX takes
// it; the release GETs the key, compares the token, then DELs it.
type getThenDel struct{ cfg locklab.Config }

func (l getThenDel) Acquire(ctx context.Context, key string, ttl time.Duration) (locklab.Lease, error) {
	b := make([]byte, 8)
	if _, err := io.ReadFull(l.cfg.Rand, b); err != nil {
		return locklab.Lease{}, err
	}
	token, start := hex.EncodeToString(b), l.cfg.Clock.Now()
	c, err := l.cfg.Pool.GetContext(ctx)
	if err != nil {
		return locklab.Lease{}, err
	}
	defer c.Close()
	_, err = redis.String(c.Do("SET", key, token, "NX", "PX", ttl.Milliseconds()))
	if errors.Is(err, redis.ErrNil) {
		return locklab.Lease{}, locklab.ErrNotAcquired
	}
	if err != nil {
		return locklab.Lease{}, err
	}
	return locklab.Lease{Key: key, Token: token, Until: start.Add(ttl)}, nil
}

func (l getThenDel) Release(ctx context.Context, lease locklab.Lease) error {
	c, err := l.cfg.Pool.GetContext(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	v, err := redis.String(c.Do("GET", lease.Key))
	if errors.Is(err, redis.ErrNil) || v != lease.Token {
		return locklab.ErrNotHeld
	}
	if err != nil {
		return err
	}
	_, err = c.Do("DEL", lease.Key) // the key may have expired, and be another's, since the GET
	return err
}

// compareAndDelete is the same lock, released by one script that deletes
// the key only if it still holds the token.
type compareAndDelete struct{ getThenDel }

var release = redis.NewScript(1, `if redis.call("GET", KEYS[1]) == ARGV[1] then return redis.call("DEL", KEYS[1]) end return 0`)

func (l compareAndDelete) Release(ctx context.Context, lease locklab.Lease) error {
	c, err := l.cfg.Pool.GetContext(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	n, err := redis.Int(release.DoContext(ctx, c, lease.Key, lease.Token))
	if err == nil && n == 0 {
		return locklab.ErrNotHeld
	}
	return err
}

// TestAudit puts both locks through the scenario of a release that comes
// after the lock expired: the GET-then-DEL release deletes the next
// holder's lock (pinned: a known break), the script's does not.
func TestAudit(t *testing.T) {
	broken := func(cfg locklab.Config) (locklab.Locker, error) { return getThenDel{cfg}, nil }
	locklabtest.Run(t, strategies.Description{Name: "audit-get-then-del", Family: "audit"}, broken,
		locklabtest.Scenarios("release-after-expiry"), locklabtest.ExpectViolation("release-after-expiry"))

	fixed := func(cfg locklab.Config) (locklab.Locker, error) { return compareAndDelete{getThenDel{cfg}}, nil }
	locklabtest.Run(t, strategies.Description{Name: "audit-compare-and-delete", Family: "audit"}, fixed,
		locklabtest.Scenarios("release-after-expiry"))
}

// waiterRetries is a scenario of one's own: release-after-expiry's story
// with a waiter that tries three times before it gives up. The explorer
// places the time step (the TTL passing) between any two steps.
var waiterRetries = &harness.Scenario{
	Name:      "release-after-expiry-retrying",
	Title:     "a late release against a waiter that tries three times",
	Property:  harness.ReleaseSafety,
	Programs:  harness.MustPrograms("acquire write release", "acquire*3 write release"),
	Faults:    []string{"time"},
	MaxFaults: 1,
}

// TestAuditOwnScenario puts both locks through that scenario alone.
func TestAuditOwnScenario(t *testing.T) {
	broken := func(cfg locklab.Config) (locklab.Locker, error) { return getThenDel{cfg}, nil }
	locklabtest.Run(t, strategies.Description{Name: "audit-get-then-del-own", Family: "audit"}, broken,
		locklabtest.With(waiterRetries), locklabtest.Scenarios(waiterRetries.Name), locklabtest.ExpectViolation(waiterRetries.Name))

	fixed := func(cfg locklab.Config) (locklab.Locker, error) { return compareAndDelete{getThenDel{cfg}}, nil }
	locklabtest.Run(t, strategies.Description{Name: "audit-compare-and-delete-own", Family: "audit"}, fixed,
		locklabtest.With(waiterRetries), locklabtest.Scenarios(waiterRetries.Name))
}
