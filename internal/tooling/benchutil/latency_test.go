package benchutil

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/internal/tooling/redistest"
	"github.com/locklab/locklab/strategies"
)

func ms(n ...int) []time.Duration {
	out := make([]time.Duration, len(n))
	for i, x := range n {
		out[i] = time.Duration(x) * time.Millisecond
	}
	return out
}

// TestSummarize: percentiles by the nearest rank, on samples in any order.
func TestSummarize(t *testing.T) {
	var hundred []int
	for i := 100; i >= 1; i-- {
		hundred = append(hundred, i)
	}
	s := Summarize(ms(hundred...))
	assert.Equal(t, Latency{N: 100, Mean: 50500 * time.Microsecond, P50: 50 * time.Millisecond, P99: 99 * time.Millisecond}, s)

	s = Summarize(ms(3, 1, 2, 40))
	assert.Equal(t, Latency{N: 4, Mean: 11500 * time.Microsecond, P50: 2 * time.Millisecond, P99: 40 * time.Millisecond}, s,
		"with fewer than 100 samples p99 is the largest")
	assert.Equal(t, Latency{}, Summarize(nil))
	assert.Equal(t, 7*time.Millisecond, Percentile(ms(7), 50))
}

// TestInterleavedLatency: every call of every entry is timed, warm-ups
// aside, and an entry's error names it.
func TestInterleavedLatency(t *testing.T) {
	calls := map[string]int{}
	entries := []TimedEntry{
		{Name: "fast", F: func() error { calls["fast"]++; return nil }},
		{Name: "slow", F: func() error { calls["slow"]++; time.Sleep(time.Millisecond); return nil }},
	}
	res, err := InterleavedLatency(entries, 3, 10)
	require.NoError(t, err)
	assert.Equal(t, map[string]int{"fast": 33, "slow": 33}, calls, "3 rounds of 10 calls and 1 warm-up")
	assert.Equal(t, 30, res[0].N)
	assert.GreaterOrEqual(t, res[1].P50, time.Millisecond)
	assert.Less(t, res[0].P50, res[1].P50)

	boom := errors.New("boom")
	_, err = InterleavedLatency([]TimedEntry{{Name: "bad", F: func() error { return boom }}}, 1, 1)
	assert.ErrorIs(t, err, boom)
	assert.ErrorContains(t, err, "bad: boom")
}

// TestContend: contenders on one key of a real Redis take the lock in
// turn; every lock taken has its wait, and none is left held.
func TestContend(t *testing.T) {
	srv := redistest.StartOne(t)
	newLocker := func() (locklab.Locker, error) { return strategies.New("set-nx-px", locklab.Config{Pool: srv.Pool}) }
	l, err := newLocker()
	require.NoError(t, err)
	// Loaded scripts and dialed connections, as after bench's uncontended
	// rounds: on a loaded machine the first acquire may take a second.
	lease, err := l.Acquire(context.Background(), "warm", time.Minute)
	require.NoError(t, err)
	require.NoError(t, l.Release(context.Background(), lease))

	r, err := Contend(context.Background(), newLocker, "contend", 4, time.Minute, time.Second)
	require.NoError(t, err)
	assert.Equal(t, 4, r.Contenders)
	assert.Positive(t, r.Locks)
	assert.Len(t, r.Waits, int(r.Locks))
	assert.Positive(t, r.PerSecond())
	// d, or on a machine loaded enough that no lock came within it, the
	// time to the first lock, then the only one counted.
	if r.Elapsed != time.Second {
		assert.Greater(t, r.Elapsed, time.Second)
		assert.EqualValues(t, 1, r.Locks, "a late first lock is counted alone")
	}

	lease, err = l.Acquire(context.Background(), "contend", time.Minute)
	require.NoError(t, err, "the last holder released")
	require.NoError(t, l.Release(context.Background(), lease))

	// A run whose time is up before any lock goes on until its first, and
	// counts that one only.
	r, err = Contend(context.Background(), newLocker, "contend-late", 3, time.Minute, time.Nanosecond)
	require.NoError(t, err)
	assert.EqualValues(t, 1, r.Locks)
	assert.Len(t, r.Waits, 1)
	assert.Greater(t, r.Elapsed, time.Nanosecond, "the time to the first lock")
	assert.Positive(t, r.PerSecond())

	var sum ContendResult
	sum.Add(r)
	sum.Add(r)
	assert.Equal(t, 2*r.Locks, sum.Locks)
	assert.Len(t, sum.Waits, 2*len(r.Waits))
}
