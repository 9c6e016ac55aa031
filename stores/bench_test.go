package stores_test

import (
	"context"
	"testing"
	"time"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/internal/tooling/benchutil"
	"github.com/locklab/locklab/internal/tooling/redistest"
	"github.com/locklab/locklab/stores"
	"github.com/locklab/locklab/stores/etcd/etcdproc"
	"github.com/locklab/locklab/stores/etcd/etcdproc/etcdtest"
	"github.com/locklab/locklab/stores/postgres/pgproc"
	"github.com/locklab/locklab/stores/postgres/pgproc/pgtest"
	"github.com/locklab/locklab/strategies"
)

// BenchmarkStoreCycles measures one uncontended acquire+release of the
// rows of locklab bench --stores, in one run: set-nx-px and Redlock on 3
// and 5 masters (5 redis-server processes), etcd-lease on a three-member
// etcd cluster, and the PostgreSQL locks on a throwaway server. Beside
// ns/op each reports the median and 99th percentile of its cycles
// (p50-ns, p99-ns). Compare ratios within one run: the machine's load
// moves them all.
func BenchmarkStoreCycles(b *testing.B) {
	ctx := context.Background()
	srv := redistest.Start(b, 5)
	var nodes []locklab.ConnSource
	for _, s := range srv {
		nodes = append(nodes, s.Pool)
	}
	cli := etcdtest.Client(b, etcdtest.Start(b, etcdproc.Options{}))
	pool := pgtest.Pool(b, pgtest.Start(b, pgproc.Options{}), "pool_max_conns=8")
	rows := []struct {
		name, strategy string
		cfg            locklab.Config
	}{
		{"redis/set-nx-px", "set-nx-px", locklab.Config{Pool: nodes[0]}},
		{"redis/redlock-3-masters", "redlock", locklab.Config{Nodes: nodes[:3]}},
		{"redis/redlock-5-masters", "redlock", locklab.Config{Nodes: nodes}},
		{"etcd/etcd-lease", "etcd-lease", locklab.Config{Store: cli}},
		{"postgres/pg-lock-table", "pg-lock-table", locklab.Config{Store: pool}},
		{"postgres/pg-for-update", "pg-for-update", locklab.Config{Store: pool}},
		{"postgres/pg-advisory", "pg-advisory", locklab.Config{Store: pool}},
	}
	for _, r := range rows {
		b.Run(r.name, func(b *testing.B) {
			l, err := strategies.New(r.strategy, r.cfg)
			if err != nil {
				b.Fatal(err)
			}
			var samples []time.Duration
			one := func() {
				t0 := time.Now()
				lease, err := l.Acquire(ctx, "bench", time.Minute)
				if err != nil {
					b.Fatal(err)
				}
				if err := l.Release(ctx, lease); err != nil {
					b.Fatal(err)
				}
				samples = append(samples, time.Since(t0))
			}
			one() // the first cycle creates the table, loads the scripts
			samples = samples[:0]
			b.ReportAllocs()
			for b.Loop() {
				one()
			}
			s := benchutil.Summarize(samples)
			b.ReportMetric(float64(s.P50.Nanoseconds()), "p50-ns")
			b.ReportMetric(float64(s.P99.Nanoseconds()), "p99-ns")
		})
	}
}

// TestOfNamesTheStores: the rows of the benchmark above lock where it
// starts their servers.
func TestOfNamesTheStores(t *testing.T) {
	for name, want := range map[string]string{"set-nx-px": "", "redlock": "", "etcd-lease": "etcd",
		"pg-lock-table": "postgres", "pg-for-update": "postgres", "pg-advisory": "postgres", "nosuch": ""} {
		if got := stores.Of(name); got != want {
			t.Errorf("stores.Of(%q) = %q, want %q", name, got, want)
		}
	}
}
