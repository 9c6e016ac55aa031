package benchutil

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/locklab/locklab"
)

// Latency sums up a set of timed calls: their count, mean, median and
// 99th percentile.
type Latency struct {
	N    int
	Mean time.Duration
	P50  time.Duration
	P99  time.Duration
}

// Summarize sums up samples (sorting them in place).
func Summarize(samples []time.Duration) Latency {
	if len(samples) == 0 {
		return Latency{}
	}
	slices.Sort(samples)
	var sum time.Duration
	for _, s := range samples {
		sum += s
	}
	return Latency{N: len(samples), Mean: sum / time.Duration(len(samples)),
		P50: Percentile(samples, 50), P99: Percentile(samples, 99)}
}

// Percentile is the p-th percentile of sorted, by the nearest rank: the
// smallest sample that at least p percent of them do not exceed.
func Percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(p/100*float64(len(sorted))+0.999999999) - 1
	return sorted[min(max(rank, 0), len(sorted)-1)]
}

// TimedEntry is one contender whose every call is timed.
type TimedEntry struct {
	Name string
	F    func() error
}

// InterleavedLatency times every call of every entry, in strict
// alternation: rounds rounds of n sweeps, each sweep one call of every
// entry in turn, starting one entry further along each time, after a
// warm-up of n/10 sweeps per round. It sums up each entry's calls of all
// rounds together. The entries' calls are at most one sweep apart, so
// the load of a machine that is shared and changes by the second weighs
// on all of them alike: their ratios hold where rounds of one entry
// after another would each catch a different load.
func InterleavedLatency(entries []TimedEntry, rounds, n int) ([]Latency, error) {
	samples := make([][]time.Duration, len(entries))
	for r := 0; r < rounds; r++ {
		for j := -(n / 10); j < n; j++ {
			for k := range entries {
				i := (k + j + n/10) % len(entries)
				e := entries[i]
				t0 := time.Now()
				if err := e.F(); err != nil {
					return nil, fmt.Errorf("%s: %w", e.Name, err)
				}
				if j >= 0 {
					samples[i] = append(samples[i], time.Since(t0))
				}
			}
		}
	}
	out := make([]Latency, len(entries))
	for i, s := range samples {
		out[i] = Summarize(s)
	}
	return out, nil
}

// ContendResult is what one contended run measured.
type ContendResult struct {
	Contenders int
	Locks      int64
	Elapsed    time.Duration
	// Waits are the times the acquires that succeeded waited, each from
	// the call of locklab.Wait to its return with the lease.
	Waits []time.Duration
}

// PerSecond is the locks acquired per second.
func (r ContendResult) PerSecond() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Locks) / r.Elapsed.Seconds()
}

// Add adds the locks, time and waits of o to r.
func (r *ContendResult) Add(o ContendResult) {
	r.Contenders = o.Contenders
	r.Locks += o.Locks
	r.Elapsed += o.Elapsed
	r.Waits = append(r.Waits, o.Waits...)
}

// Contend runs contenders clients that each, for d, acquire key with a
// Locker of its own built by newLocker, waiting with locklab.Wait's
// default policy, and release it at once (an empty critical section). It
// returns how many locks were acquired within d and how long each of
// those acquires waited. No acquire is cut short at d, which could leave
// the lock held on the server while its client gave up: each client ends
// the acquire it is waiting for, and releases, before it stops (those
// late locks are not counted). A run that has no lock at d goes on until
// its first one, and that lock is counted: on a loaded machine a first
// acquire can take longer than a short d (Redlock's contenders can split
// the masters between them and all back off), and a run with no lock
// measures nothing. Elapsed is then the time to that first lock.
func Contend(ctx context.Context, newLocker func() (locklab.Locker, error), key string, contenders int, ttl, d time.Duration) (ContendResult, error) {
	lockers := make([]locklab.Locker, contenders)
	for i := range lockers {
		l, err := newLocker()
		if err != nil {
			return ContendResult{}, err
		}
		lockers[i] = l
	}
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		waits    []time.Duration
		firstErr error
		failed   int
	)
	start := time.Now()
	end := start.Add(d)
	// got: a lock has been counted; late: when the first lock came after
	// end, its time since start.
	var got atomic.Bool
	var late atomic.Int64
	open := func() bool { return time.Now().Before(end) || !got.Load() }
	// count reports whether a lock acquired now is counted: within d, or
	// past it as the run's first.
	count := func() bool {
		now := time.Now()
		if now.Before(end) {
			got.Store(true)
			return true
		}
		if got.CompareAndSwap(false, true) {
			late.Store(int64(now.Sub(start)))
			return true
		}
		return false
	}
	for _, l := range lockers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []time.Duration
			defer func() {
				mu.Lock()
				waits = append(waits, mine...)
				mu.Unlock()
			}()
			for ctx.Err() == nil && open() {
				t0 := time.Now()
				lease, err := locklab.Wait(ctx, l, key, ttl, locklab.RetryPolicy{})
				if err == nil && count() {
					mine = append(mine, time.Since(t0))
				}
				if err == nil {
					err = release(context.WithoutCancel(ctx), l, lease)
				}
				if err != nil {
					mu.Lock()
					if failed++; firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					return
				}
			}
		}()
	}
	wg.Wait()
	if failed > 1 {
		// One line, not the same error once per contender.
		firstErr = fmt.Errorf("%d of %d contenders failed, the first: %w", failed, contenders, firstErr)
	}
	elapsed := d
	if l := time.Duration(late.Load()); l > 0 {
		elapsed = l
	}
	return ContendResult{Contenders: contenders, Locks: int64(len(waits)), Elapsed: elapsed, Waits: waits}, firstErr
}

// release releases lease, tried again with a growing pause for up to a
// minute while it fails unavailable: on a loaded machine a Redlock
// release may find most nodes too slow, and a lock left held would keep
// the other contenders out for its TTL. A try again that finds the lock
// gone (ErrNotHeld) is a release: the nodes that failed to answer the
// try before had deleted it.
func release(ctx context.Context, l locklab.Locker, lease locklab.Lease) error {
	end := time.Now().Add(time.Minute)
	pause := 10 * time.Millisecond
	for tried := false; ; tried = true {
		err := l.Release(ctx, lease)
		if tried && errors.Is(err, locklab.ErrNotHeld) {
			return nil // gone: the try before deleted it where it failed to say so
		}
		if !errors.Is(err, locklab.ErrUnavailable) || time.Now().Add(pause).After(end) {
			return err
		}
		time.Sleep(pause)
		pause = min(2*pause, time.Second)
	}
}
