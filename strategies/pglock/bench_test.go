package pglock_test

import (
	"context"
	"testing"
	"time"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/stores/postgres/pgproc"
	"github.com/locklab/locklab/stores/postgres/pgproc/pgtest"
	"github.com/locklab/locklab/strategies"
)

// BenchmarkCycle measures one uncontended acquire+release per strategy,
// next to a SELECT 1 round trip through the same pool: the floor. Compare
// ratios within one run: pg-advisory's and pg-lock-table's cycles are two
// round trips (target: at most 3x the floor), pg-for-update's four
// (INSERT, BEGIN, SELECT ... FOR UPDATE, COMMIT; target: at most 5x).
func BenchmarkCycle(b *testing.B) {
	s := pgtest.Start(b, pgproc.Options{})
	pool := pgtest.Pool(b, s, poolParams)
	ctx := context.Background()
	b.Run("select-1", func(b *testing.B) {
		for b.Loop() {
			var one int
			if err := pool.QueryRow(ctx, "SELECT 1").Scan(&one); err != nil {
				b.Fatal(err)
			}
		}
	})
	for _, n := range names {
		b.Run(n, func(b *testing.B) {
			l, err := strategies.New(n, locklab.Config{Store: pool})
			if err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				lease, err := l.Acquire(ctx, "bench", time.Minute)
				if err != nil {
					b.Fatal(err)
				}
				if err := l.Release(ctx, lease); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
