package redisnode

import (
	"context"
	"fmt"
	"testing"

	"github.com/locklab/locklab/internal/tooling/backends"
)

// BenchmarkStart measures how long 1 and 5 nodes take to come up on each
// backend (a speed target is a benchmark here, not a timed test).
func BenchmarkStart(b *testing.B) {
	for _, be := range []string{backends.Process, backends.Docker} {
		for _, n := range []int{1, 5} {
			b.Run(fmt.Sprintf("%s/%d", be, n), func(b *testing.B) {
				if be == backends.Docker {
					requireDocker(b)
				}
				for i := 0; i < b.N; i++ {
					c, err := Start(context.Background(), Options{Backend: be, N: n})
					if err != nil {
						b.Fatal(err)
					}
					b.StopTimer()
					c.Close()
					b.StartTimer()
				}
			})
		}
	}
}

// BenchmarkRestart measures a kill and a restart (with and without the
// node's files) of a running node on each backend: what a schedule with a
// node restart pays.
func BenchmarkRestart(b *testing.B) {
	for _, be := range []string{backends.Process, backends.Docker} {
		for _, keep := range []bool{false, true} {
			b.Run(fmt.Sprintf("%s/keep=%v", be, keep), func(b *testing.B) {
				if be == backends.Docker {
					requireDocker(b)
				}
				c, err := Start(context.Background(), Options{Backend: be, N: 1, Label: b.Name()})
				if err != nil {
					b.Fatal(err)
				}
				defer c.Close()
				n := c.Nodes()[0]
				ctx := context.Background()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					if err := n.Kill(ctx); err != nil {
						b.Fatal(err)
					}
					if err := n.Restart(ctx, keep); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
