package pglock_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/locklab/locklab"
)

// race runs n acquires of k at once, one per Locker, and counts the
// winners; any error but ErrNotAcquired fails the test.
func race(t *testing.T, lockers []locklab.Locker, k string) int {
	t.Helper()
	var (
		wg      sync.WaitGroup
		start   = make(chan struct{})
		winners atomic.Int32
		mu      sync.Mutex
		other   []error
	)
	for _, l := range lockers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			_, err := l.Acquire(context.Background(), k, time.Minute)
			switch {
			case err == nil:
				winners.Add(1)
			case !errors.Is(err, locklab.ErrNotAcquired):
				mu.Lock()
				other = append(other, err)
				mu.Unlock()
			}
		}()
	}
	close(start)
	wg.Wait()
	require.Empty(t, other, "only ErrNotAcquired is expected from the losers")
	return int(winners.Load())
}

// TestRace20: 20 clients race for a free key; exactly one wins. The lock
// table's recovery is raced too: 20 clients find the same expired row,
// and exactly one takes the lock.
func TestRace20(t *testing.T) {
	pool := sharedPool(t)
	forEach(t, names, func(t *testing.T, name string) {
		clk := newClock()
		lockers := make([]locklab.Locker, 20)
		for i := range lockers {
			lockers[i] = newLocker(t, name, locklab.Config{Store: pool, Clock: clk})
		}
		require.Equal(t, 1, race(t, lockers, key(t)), "exactly one of 20 wins a free key")
		if name == "pg-lock-table" {
			clk.Advance(2 * time.Minute)
			require.Equal(t, 1, race(t, lockers, key(t)), "exactly one of 20 recovers an expired row")
		}
	})
}
