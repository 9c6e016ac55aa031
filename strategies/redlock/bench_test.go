package redlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/internal/tooling/benchutil"
	"github.com/locklab/locklab/internal/tooling/redistest"
	"github.com/locklab/locklab/strategies/redlock"
	"github.com/locklab/locklab/strategies/setnxex"
)

// benchLocks starts 5 servers and returns Redlock on all of them and the
// single-node set-nx-px lock on the first.
func benchLocks(b *testing.B) (*redlock.Redlock, *setnxex.SetNXPX) {
	srv := redistest.Start(b, 5)
	var nodes []locklab.ConnSource
	for _, s := range srv {
		nodes = append(nodes, s.Pool)
	}
	rl, err := redlock.New(locklab.Config{Nodes: nodes})
	if err != nil {
		b.Fatal(err)
	}
	single, err := setnxex.NewSetNXPX(locklab.Config{Pool: srv[0].Pool})
	if err != nil {
		b.Fatal(err)
	}
	return rl, single
}

// cycle is one acquire and release. A Redlock round that fails without
// being refused (its nodes answered after the node timeout, as they may on
// a loaded machine) is tried again, up to three times, as locklab.Wait
// would: its time counts, as a caller's would.
func cycle(b *testing.B, ctx context.Context, l locklab.Locker, key string) {
	lease, err := l.Acquire(ctx, key, 10*time.Second)
	for try := 1; err != nil && try <= 3 && locklab.IsRetryable(err) && !errors.Is(err, locklab.ErrNotAcquired); try++ {
		lease, err = l.Acquire(ctx, key, 10*time.Second)
	}
	if err != nil {
		b.Fatal(err)
	}
	if err := l.Release(ctx, lease); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkCycle measures one uncontended acquire+release: Redlock on 5
// nodes, and the single-node set-nx-px lock, in the same run.
func BenchmarkCycle(b *testing.B) {
	rl, single := benchLocks(b)
	for _, bc := range []struct {
		name string
		l    locklab.Locker
	}{
		{"redlock-5-nodes", rl},
		{"set-nx-px-1-node", single},
	} {
		b.Run(bc.name, func(b *testing.B) {
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				cycle(b, ctx, bc.l, "bench")
			}
		})
	}
}

// BenchmarkCycleRatio interleaves one Redlock cycle on 5 nodes and one
// set-nx-px cycle per iteration, timing each, so that both are measured
// under the same load: x-single is the Redlock cycle's cost in single-node
// cycles (target: at most 2.5; the fan-out is parallel).
func BenchmarkCycleRatio(b *testing.B) {
	rl, single := benchLocks(b)
	ctx := context.Background()
	cycle(b, ctx, rl, "bench:ratio")
	cycle(b, ctx, single, "bench:ratio")
	benchutil.Pair(b, "single", func() { cycle(b, ctx, single, "bench:ratio") },
		"redlock", func() { cycle(b, ctx, rl, "bench:ratio") }, "x-single")
}
