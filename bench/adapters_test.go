package main

import (
	"context"
	"testing"
	"time"

	"github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
	rsrueidis "github.com/go-redsync/redsync/v4/redis/rueidis"
	goredis "github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
	"github.com/redis/rueidis/rueidiscompat"

	"github.com/locklab/locklab"
	adgoredis "github.com/locklab/locklab/adapters/goredis"
	adrueidis "github.com/locklab/locklab/adapters/rueidis"
	"github.com/locklab/locklab/internal/tooling/benchutil"
	"github.com/locklab/locklab/internal/tooling/redisproc"
	"github.com/locklab/locklab/strategies"
)

// The uncontended cycle through each adapter next to the peer built on the
// same client, both on one client and one server, timed in alternation
// (benchutil.Pair): the metric "peer/locklab" is the peer's time in units
// of locklab's.

func startServer(b *testing.B) string {
	s, err := redisproc.Start(redisproc.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(s.Stop)
	return s.Addr
}

func cycleOnce(b *testing.B, l locklab.Locker) func() {
	ctx := context.Background()
	return func() {
		lease, err := l.Acquire(ctx, "bench:adapter:locklab", ttl)
		if err != nil {
			b.Fatal(err)
		}
		if err := l.Release(ctx, lease); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkGoRedisAdapterVsRedislock(b *testing.B) {
	g := goredis.NewClient(&goredis.Options{Addr: startServer(b), PoolSize: 8})
	defer g.Close()
	l, err := strategies.New("set-nx-px", locklab.Config{Pool: adgoredis.New(g)})
	if err != nil {
		b.Fatal(err)
	}
	benchutil.Pair(b, "locklab", cycleOnce(b, l), "redislock", redislockCycle(b, redislock.New(g)), "peer/locklab")
}

func BenchmarkRueidisAdapterVsRedsync(b *testing.B) {
	rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{startServer(b)}, DisableCache: true})
	if err != nil {
		b.Fatal(err)
	}
	defer rc.Close()
	l, err := strategies.New("set-nx-px", locklab.Config{Pool: adrueidis.New(rc)})
	if err != nil {
		b.Fatal(err)
	}
	rs := redsync.New(rsrueidis.NewPool(rueidiscompat.NewAdapter(rc)))
	ctx := context.Background()
	benchutil.Pair(b, "locklab", cycleOnce(b, l), "redsync", func() {
		m := rs.NewMutex("bench:adapter:peer", redsync.WithExpiry(10*time.Second), redsync.WithTries(1))
		if err := m.LockContext(ctx); err != nil {
			b.Fatal(err)
		}
		if _, err := m.UnlockContext(ctx); err != nil {
			b.Fatal(err)
		}
	}, "peer/locklab")
}

// The same pair with locklab on redigo: what the go-redis pair costs beyond
// it is the adapter's.
func BenchmarkRedigoVsRedislock(b *testing.B) {
	addr := startServer(b)
	pool := locklab.NewPool(addr)
	defer pool.Close()
	g := goredis.NewClient(&goredis.Options{Addr: addr, PoolSize: 8})
	defer g.Close()
	l, err := strategies.New("set-nx-px", locklab.Config{Pool: pool})
	if err != nil {
		b.Fatal(err)
	}
	benchutil.Pair(b, "locklab", cycleOnce(b, l), "redislock", redislockCycle(b, redislock.New(g)), "peer/locklab")
}

// redislockCycle is one uncontended redislock cycle: obtain, release.
func redislockCycle(b *testing.B, rl *redislock.Client) func() {
	ctx := context.Background()
	return func() {
		lk, err := rl.Obtain(ctx, "bench:adapter:peer", ttl, nil)
		if err != nil {
			b.Fatal(err)
		}
		if err := lk.Release(ctx); err != nil {
			b.Fatal(err)
		}
	}
}
