// Command lockcli is locklab's command line on a lock of its own: init
// registers the lock, main calls cli.Main, and every command of locklab
// runs on it, with locklab's flags and output:
//
//	go run . list
//	go run . explore --strategy get-then-del --scenario release-after-expiry
//	go run . demo release-after-expiry -s get-then-del
//	go run . matrix -s get-then-del,set-nx-px
//
// The lock is written as a service writes it, on the redigo connections
// the harness gives in Config.Pool, each command one step of a schedule.
// Its release GETs the key, compares the token, then DELs it: the DEL may
// delete the next holder's lock.
package main

import (
	"context"
	"errors"
	"time"

	"github.com/gomodule/redigo/redis"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/cli"
	"github.com/locklab/locklab/strategies"
)

func init() {
	strategies.MustRegister(strategies.Description{Name: "get-then-del", Family: "mine",
		Summary: "SET NX PX; the release GETs, compares, then DELs"},
		func(cfg locklab.Config) (locklab.Locker, error) { return getThenDel{cfg, cfg.Tokens()}, nil })
}

func main() { cli.Main() }

// getThenDel draws its tokens from the Config's Rand (seeded in a
// schedule's run; crypto/rand in stress mode, which gives none) and reads
// time on its Clock (the run's virtual clock).
type getThenDel struct {
	cfg    locklab.Config
	tokens *locklab.TokenSource
}

func (l getThenDel) Acquire(ctx context.Context, key string, ttl time.Duration) (locklab.Lease, error) {
	token, err := l.tokens.Token()
	if err != nil {
		return locklab.Lease{}, err
	}
	start := l.cfg.ClockOrDefault().Now()
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
	if errors.Is(err, redis.ErrNil) || (err == nil && v != lease.Token) {
		return locklab.ErrNotHeld
	}
	if err != nil {
		return err
	}
	_, err = c.Do("DEL", lease.Key) // the key may have expired, and be another's, since the GET
	return err
}
