package etcdlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/stores/etcd/etcdproc"
	"github.com/locklab/locklab/stores/etcd/etcdproc/etcdtest"
	"github.com/locklab/locklab/strategies"
)

// BenchmarkCycle: an acquire and a release of a free lock (grant, txn,
// txn, revoke: four round trips through raft), next to a linearizable get
// and to a refused acquire (grant, txn, delete, revoke), on a
// three-member cluster of its own.
func BenchmarkCycle(b *testing.B) {
	c := etcdtest.Start(b, etcdproc.Options{})
	cli := etcdtest.Client(b, c)
	ctx := context.Background()
	b.Run("get", func(b *testing.B) {
		for b.Loop() {
			if _, err := cli.Get(ctx, "bench"); err != nil {
				b.Fatal(err)
			}
		}
	})
	l, err := strategies.New("etcd-lease", locklab.Config{Store: cli})
	if err != nil {
		b.Fatal(err)
	}
	b.Run("acquire-release", func(b *testing.B) {
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
	b.Run("refused", func(b *testing.B) {
		held, err := l.Acquire(ctx, "bench", time.Minute)
		if err != nil {
			b.Fatal(err)
		}
		defer l.Release(ctx, held)
		for b.Loop() {
			if _, err := l.Acquire(ctx, "bench", time.Minute); !errors.Is(err, locklab.ErrNotAcquired) {
				b.Fatal(err)
			}
		}
	})
}
