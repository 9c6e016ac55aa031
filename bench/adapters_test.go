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
// (pair): the metric "peer/locklab" is the peer's mean time in units of
// locklab's, "p50-peer/locklab" the same of their medians, which a stall
// of the machine in one cycle does not move.

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
	l := setNXPX(b, adgoredis.New(g))
	pair(b, "locklab", cycleOnce(b, l), "redislock", redislockCycle(b, redislock.New(g)), "peer/locklab")
}

func BenchmarkRueidisAdapterVsRedsync(b *testing.B) {
	rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{startServer(b)}, DisableCache: true})
	if err != nil {
		b.Fatal(err)
	}
	defer rc.Close()
	l := setNXPX(b, adrueidis.New(rc))
	rs := redsync.New(rsrueidis.NewPool(rueidiscompat.NewAdapter(rc)))
	ctx := context.Background()
	pair(b, "locklab", cycleOnce(b, l), "redsync", func() {
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
	l := setNXPX(b, pool)
	pair(b, "locklab", cycleOnce(b, l), "redislock", redislockCycle(b, redislock.New(g)), "peer/locklab")
}

// The same strategy on the same server, through the go-redis adapter and
// on redigo, in alternation: "goredis/redigo" is what the adapter and
// go-redis cost beyond redigo, in units of the redigo cycle.
func BenchmarkGoRedisAdapterVsRedigo(b *testing.B) {
	addr := startServer(b)
	pool := locklab.NewPool(addr)
	defer pool.Close()
	g := goredis.NewClient(&goredis.Options{Addr: addr, PoolSize: 8})
	defer g.Close()
	onRedigo, viaGoRedis := setNXPX(b, pool), setNXPX(b, adgoredis.New(g))
	pair(b, "redigo", cycleOnce(b, onRedigo), "goredis", cycleOnce(b, viaGoRedis), "goredis/redigo")
}

// BenchmarkCycle is each contender's uncontended cycle alone, for its
// allocations (B/op, allocs/op): the pairs above report the two
// contenders' together.
func BenchmarkCycle(b *testing.B) {
	addr := startServer(b)
	pool := locklab.NewPool(addr)
	defer pool.Close()
	g := goredis.NewClient(&goredis.Options{Addr: addr, PoolSize: 8})
	defer g.Close()
	rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: true})
	if err != nil {
		b.Fatal(err)
	}
	defer rc.Close()
	rs := redsync.New(rsrueidis.NewPool(rueidiscompat.NewAdapter(rc)))
	ctx := context.Background()
	for _, c := range []struct {
		name  string
		cycle func()
	}{
		{"locklab-redigo", cycleOnce(b, setNXPX(b, pool))},
		{"locklab-goredis", cycleOnce(b, setNXPX(b, adgoredis.New(g)))},
		{"redislock-goredis", redislockCycle(b, redislock.New(g))},
		{"locklab-rueidis", cycleOnce(b, setNXPX(b, adrueidis.New(rc)))},
		{"redsync-rueidis", func() {
			m := rs.NewMutex("bench:adapter:peer", redsync.WithExpiry(10*time.Second), redsync.WithTries(1))
			if err := m.LockContext(ctx); err != nil {
				b.Fatal(err)
			}
			if _, err := m.UnlockContext(ctx); err != nil {
				b.Fatal(err)
			}
		}},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				c.cycle()
			}
		})
	}
}

// pair times a and then b once per iteration of tb's loop, as
// benchutil.Pair does, and reports each one's mean time per call
// ("<nameA>-ns/op", "<nameB>-ns/op"), b's mean in units of a's (ratio),
// and the same of their medians ("p50-" + ratio).
func pair(tb *testing.B, nameA string, a func(), nameB string, b func(), ratio string) {
	var ta, tbb []time.Duration
	for tb.Loop() {
		t0 := time.Now()
		a()
		t1 := time.Now()
		b()
		ta = append(ta, t1.Sub(t0))
		tbb = append(tbb, time.Since(t1))
	}
	sa, sb := benchutil.Summarize(ta), benchutil.Summarize(tbb)
	tb.ReportMetric(float64(sa.Mean.Nanoseconds()), nameA+"-ns/op")
	tb.ReportMetric(float64(sb.Mean.Nanoseconds()), nameB+"-ns/op")
	tb.ReportMetric(float64(sb.Mean)/float64(sa.Mean), ratio)
	tb.ReportMetric(float64(sb.P50)/float64(sa.P50), "p50-"+ratio)
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

// setNXPX is the set-nx-px strategy on src.
func setNXPX(b *testing.B, src locklab.ConnSource) locklab.Locker {
	l, err := strategies.New("set-nx-px", locklab.Config{Pool: src})
	if err != nil {
		b.Fatal(err)
	}
	return l
}
