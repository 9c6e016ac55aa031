package strategies_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/internal/benchutil"
	"github.com/locklab/locklab/internal/counting"
	"github.com/locklab/locklab/internal/redistest"
	"github.com/locklab/locklab/strategies"
)

// commandsPerCycle is how many commands one uncontended acquire+release
// sends, by strategy: the algorithms' own step counts.
var commandsPerCycle = map[string]int64{
	"setnx-del":         2, // SETNX, DEL
	"setnx-getset":      3, // SETNX, GET, DEL
	"incr-expire":       3, // INCR, PEXPIRE, DEL
	"incr-expire-lua":   2, // EVALSHA, DEL
	"incr-expire-multi": 5, // MULTI, INCR, PEXPIRE, EXEC, DEL
	"setnx-expire":      3, // SETNX, PEXPIRE, DEL
	"set-nx-px-del":     2, // SET, DEL
	"set-nx-px-getdel":  3, // SET, GET, DEL
	"set-nx-px":         2, // EVALSHA, EVALSHA
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
			l, err := strategies.New(name, locklab.Config{Pool: srv.Pool})
			if err != nil {
				b.Fatal(err)
			}
			key := "bench:" + name
			cycle(b, ctx, l, key)
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				cycle(b, ctx, l, key)
			}
			b.ReportMetric(float64(commandsPerCycle[name]), "cmds/op")
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
