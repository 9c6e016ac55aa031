// Package benchutil measures operations against real servers the way the
// comparison tables need: contenders measured in turn, round after round,
// so that a machine that drifts slower or faster during the run affects all
// of them alike, keeping the median round.
package benchutil

import (
	"fmt"
	"runtime"
	"sort"
	"testing"
	"time"
)

// Result is the cost of one call.
type Result struct {
	Ns     int64
	Allocs int64
}

// Entry is one contender.
type Entry struct {
	Name string
	F    func() error
}

// Measure runs f n times after a warm-up of n/10 calls and returns the mean
// time and allocations per call.
func Measure(f func() error, n int) (Result, error) {
	for i := 0; i < n/10; i++ {
		if err := f(); err != nil {
			return Result{}, err
		}
	}
	var m0, m1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m0)
	t0 := time.Now()
	for i := 0; i < n; i++ {
		if err := f(); err != nil {
			return Result{}, err
		}
	}
	el := time.Since(t0)
	runtime.ReadMemStats(&m1)
	return Result{Ns: el.Nanoseconds() / int64(n), Allocs: int64(m1.Mallocs-m0.Mallocs) / int64(n)}, nil
}

// Interleaved measures every entry n calls per round, for rounds rounds,
// in turn, starting each round one entry further along, and returns each
// entry's median round.
func Interleaved(entries []Entry, rounds, n int) ([]Result, error) {
	samples := make([][]Result, len(entries))
	for r := 0; r < rounds; r++ {
		// Each round starts with a different entry: where an entry stands
		// in the round (right after another, warm or cold) shows in its
		// time on a small machine.
		for k := range entries {
			i := (k + r) % len(entries)
			e := entries[i]
			res, err := Measure(e.F, n)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", e.Name, err)
			}
			samples[i] = append(samples[i], res)
		}
	}
	out := make([]Result, len(entries))
	for i, s := range samples {
		sort.Slice(s, func(a, b int) bool { return s[a].Ns < s[b].Ns })
		out[i] = s[len(s)/2]
	}
	return out, nil
}

// Pair times a and then b once per iteration of tb's loop, so that both run
// under the same load, and reports each one's mean time per call (metrics
// "<nameA>-ns/op" and "<nameB>-ns/op") and b's cost in units of a (metric
// ratio).
func Pair(tb *testing.B, nameA string, a func(), nameB string, b func(), ratio string) {
	var ta, tbb time.Duration
	for tb.Loop() {
		t0 := time.Now()
		a()
		t1 := time.Now()
		b()
		ta += t1.Sub(t0)
		tbb += time.Since(t1)
	}
	tb.ReportMetric(float64(ta.Nanoseconds())/float64(tb.N), nameA+"-ns/op")
	tb.ReportMetric(float64(tbb.Nanoseconds())/float64(tb.N), nameB+"-ns/op")
	tb.ReportMetric(float64(tbb)/float64(ta), ratio)
}
