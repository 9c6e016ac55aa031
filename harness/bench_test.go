package harness

import (
	"context"
	"testing"
	"time"

	"github.com/locklab/locklab/internal/tooling/redistest"
)

// BenchmarkExplore explores stale-recovery on set-nx-px (3 clients, one
// fault) and reports schedules/s next to the round-trip bound measured in
// the same run: 1 / (commands per schedule x PING round trip).
func BenchmarkExplore(b *testing.B) {
	srv := redistest.StartOne(b)
	nodes := nodesOf([]*redistest.Server{srv})
	c := srv.Pool.Get()
	const pings = 2000
	start := time.Now()
	for i := 0; i < pings; i++ {
		if _, err := c.Do("PING"); err != nil {
			b.Fatal(err)
		}
	}
	rtt := time.Since(start) / pings
	c.Close()
	b.ResetTimer()
	var sched, cmds int
	var el time.Duration
	for i := 0; i < b.N; i++ {
		r, err := Explore(context.Background(), ExploreOptions{Case: mustCase(b, "release-after-expiry", "set-nx-px"), Nodes: nodes, Workers: 2})
		if err != nil {
			b.Fatal(err)
		}
		sched += r.Schedules
		cmds += r.Commands
		el += r.Elapsed
	}
	perSched := float64(cmds) / float64(sched)
	bound := 1 / (perSched * rtt.Seconds())
	got := float64(sched) / el.Seconds()
	b.ReportMetric(got, "schedules/s")
	b.ReportMetric(bound, "bound/s")
	b.ReportMetric(perSched, "cmds/schedule")
	b.ReportMetric(float64(rtt.Microseconds()), "rtt-us")
}
