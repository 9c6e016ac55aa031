package strategies_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/internal/tooling/benchutil"
	"github.com/locklab/locklab/internal/tooling/counting"
	"github.com/locklab/locklab/internal/tooling/redistest"
	"github.com/locklab/locklab/strategies"
)

// commandsPerCycle is how many commands one uncontended acquire+release
// sends, by strategy: the algorithms' own step counts.
var commandsPerCycle = map[string]int64{
	"setnx-del":           2, // SETNX, DEL
	"setnx-getset":        3, // SETNX, GET, DEL
	"setnx-getset-lua":    2, // SETNX, EVALSHA
	"setnx-forever":       3, // SETNX, GET, DEL
	"setnx-expire-always": 3, // SETNX, PEXPIRE, DEL
	"incr-expire":         3, // INCR, PEXPIRE, DEL
	"incr-expire-lua":     2, // EVALSHA, DEL
	"incr-expire-multi":   5, // MULTI, INCR, PEXPIRE, EXEC, DEL
	"setnx-expire":        3, // SETNX, PEXPIRE, DEL
	"set-nx-px-del":       2, // SET, DEL
	"set-nx-px-getdel":    3, // SET, GET, DEL
	"set-nx-px":           2, // EVALSHA, EVALSHA
}

// TestCommandsPerCycle checks that each strategy sends exactly its
// algorithm's commands, one per step, and nothing else.
func TestCommandsPerCycle(t *testing.T) {
	srv := redistest.StartOne(t)
	ctx := context.Background()
	for name, want := range commandsPerCycle {
		src := &counting.Source{Src: srv.Pool}
		l, err := strategies.New(name, locklab.Config{Pool: src})
		require.NoError(t, err)
		cycle(t, ctx, l, "warm:"+name) // loads the scripts
		before := src.Commands()
		cycle(t, ctx, l, "count:"+name)
		require.Equal(t, want, src.Commands()-before, "%s: commands per uncontended cycle", name)
	}
}

func cycle(tb testing.TB, ctx context.Context, l locklab.Locker, key string) {
	lease, err := l.Acquire(ctx, key, time.Minute)
	if err != nil {
		tb.Fatal(err)
	}
	if err := l.Release(ctx, lease); err != nil {
		tb.Fatal(err)
	}
}

// BenchmarkCycle measures one uncontended acquire+release per strategy, next
// to a raw PING round trip through the same pool: the floor. Compare ratios
// within one run, e.g. set-nx-px against Ping (target: at most 2.2x, since
// its cycle is two round trips).
func BenchmarkCycle(b *testing.B) {
	srv := redistest.StartOne(b)
	ctx := context.Background()
	b.Run("Ping", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			c := srv.Pool.Get()
			if _, err := c.Do("PING"); err != nil {
				b.Fatal(err)
			}
			c.Close()
		}
	})
	for _, name := range strategies.Names() {
		d, _ := strategies.Info(name)
		if d.Properties.MultiNode {
			continue // measured by its own package's benchmark
		}
		b.Run(name, func(b *testing.B) {
			pool := srv.Pool
			if d.Replica {
				// A master of its own with a replica to acknowledge: the
				// others' figures stay free of replication.
				m := redistest.StartOne(b)
				redistest.StartReplica(b, m)
				pool = m.Pool
			}
			l, err := strategies.New(name, locklab.Config{Pool: pool})
			if err != nil {
				b.Fatal(err)
			}
			key := "bench:" + name
			one := func() { cycle(b, ctx, l, key) }
			var unacked int
			if d.Replica {
				// On a loaded machine a replica may miss WAIT's timeout:
				// that acquire fails, as it must, and is tried again and
				// counted rather than failing the benchmark.
				one = func() {
					for try := 0; ; try++ {
						lease, err := l.Acquire(ctx, key, time.Minute)
						if errors.Is(err, locklab.ErrUnavailable) && try < 3 {
							unacked++
							continue
						}
						if err != nil {
							b.Fatal(err)
						}
						if err := l.Release(ctx, lease); err != nil {
							b.Fatal(err)
						}
						return
					}
				}
			}
			one()
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				one()
			}
			if n, ok := commandsPerCycle[name]; ok {
				b.ReportMetric(float64(n), "cmds/op")
			}
			if d.Replica {
				b.ReportMetric(float64(unacked)/float64(b.N), "unacked/op")
			}
		})
	}
}

// BenchmarkCycleVsPing interleaves one PING round trip and one set-nx-px
// cycle per iteration, timing each, so the ratio is measured under the same
// load: x-ping is the cycle's cost in PING round trips (target: at most 2.2).
func BenchmarkCycleVsPing(b *testing.B) {
	srv := redistest.StartOne(b)
	ctx := context.Background()
	l, err := strategies.New("set-nx-px", locklab.Config{Pool: srv.Pool})
	if err != nil {
		b.Fatal(err)
	}
	cycle(b, ctx, l, "bench:ratio")
	benchutil.Pair(b, "ping", func() {
		c := srv.Pool.Get()
		if _, err := c.Do("PING"); err != nil {
			b.Fatal(err)
		}
		c.Close()
	}, "cycle", func() { cycle(b, ctx, l, "bench:ratio") }, "x-ping")
}

// pollHold is how long each holder keeps the lock in the polling benchmark.
const pollHold = time.Millisecond

// BenchmarkPollingCost measures what waiting costs Redis, the busy-wait
// section 1.5 of the notes "分布式锁 Distributed Lock" complains of: 2, 8
// and 32 clients contend for one set-nx-px key, each holding it for 1ms,
// and cmds/lock is the Redis commands sent per lock acquired (attempts,
// refused ones included, and the release) by Wait with its default policy,
// by a fixed 5ms loop (the PHP usleep(5000) loop), and by the Notifier.
// Each sub-benchmark runs one second per iteration: run it with
// -benchtime 1x.
func BenchmarkPollingCost(b *testing.B) {
	srv := redistest.StartOne(b)
	ctx := context.Background()
	for _, waiters := range []int{2, 8, 32} {
		for _, mode := range benchutil.PollModes {
			b.Run(fmt.Sprintf("%s/%d", strings.ReplaceAll(mode.Name, " ", "_"), waiters), func(b *testing.B) {
				newLocker := func(src locklab.ConnSource) (locklab.Locker, error) {
					return strategies.New("set-nx-px", locklab.Config{Pool: src, Notify: mode.Notifier})
				}
				var locks, cmds int64
				var elapsed time.Duration
				for i := range b.N {
					// A key of its own: an attempt cut short by the end of
					// the previous run may have left its lock behind.
					key := fmt.Sprintf("bench:poll:%s:%d:%d", mode.Name, waiters, i)
					r, err := benchutil.Poll(ctx, srv.Pool, newLocker, key, mode, waiters, pollHold, time.Second)
					if err != nil {
						b.Fatal(err)
					}
					locks += r.Locks
					cmds += r.Commands
					elapsed += r.Elapsed
				}
				if locks == 0 {
					b.Fatal("no lock acquired")
				}
				b.ReportMetric(float64(cmds)/float64(locks), "cmds/lock")
				b.ReportMetric(float64(locks)/elapsed.Seconds(), "locks/s")
			})
		}
	}
}
