package strategytest

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/locklab/locklab"
)

// race50 races 50 clients for a free key. On one node each makes one
// attempt and exactly one must win; an attempt that fails as unavailable
// (set-nx-px-wait's replica did not acknowledge in time: the attempt took
// back its key) is made again, as a caller would. A multi-node strategy can
// split the votes so that nobody wins a round (the Redlock spec says so:
// callers retry after a random delay), so there every client waits with
// retries until the first winner, and exactly one must win.
func (s *suite) race50(t *testing.T) {
	const n = 50
	k := key(t)
	ttl := s.raceTTL()
	// Bounded, so that a race that cannot finish fails instead of hanging.
	limit, cancel := context.WithTimeout(context.Background(), 30*ttl)
	defer cancel()
	ctx, won := context.WithCancel(limit)
	defer won()
	attempt := func(l locklab.Locker) error {
		for {
			_, err := l.Acquire(ctx, k, ttl)
			if !errors.Is(err, locklab.ErrUnavailable) || ctx.Err() != nil {
				return err
			}
			time.Sleep(time.Millisecond)
		}
	}
	if s.props.MultiNode {
		attempt = func(l locklab.Locker) error {
			for {
				_, err := locklab.Wait(ctx, l, k, ttl, locklab.RetryPolicy{Initial: time.Millisecond, Max: 20 * time.Millisecond})
				switch {
				case err == nil:
					won()
					return nil
				case ctx.Err() != nil:
					return locklab.ErrNotAcquired // another client won
				case errors.Is(err, locklab.ErrUnavailable):
					// 250 commands at once on a small machine: a node may
					// miss its timeout. The spec's answer is to retry.
					time.Sleep(time.Millisecond)
				default:
					return err
				}
			}
		}
	}
	lockers := make([]locklab.Locker, n)
	for i := range lockers {
		lockers[i], _ = s.locker(t)
	}
	var (
		wg      sync.WaitGroup
		start   = make(chan struct{})
		mu      sync.Mutex
		winners int
		other   []error
	)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(l locklab.Locker) {
			defer wg.Done()
			<-start
			err := attempt(l)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				winners++
			case !errors.Is(err, locklab.ErrNotAcquired):
				other = append(other, err)
			}
		}(lockers[i])
	}
	close(start)
	wg.Wait()
	require.NoError(t, limit.Err(), "the race did not finish within %v", 30*ttl)
	require.Empty(t, other, "only ErrNotAcquired is expected from the losers")
	if s.props.AtomicAcquire {
		require.Equal(t, 1, winners, "exactly one of %d racing clients must win a free key", n)
	} else {
		require.GreaterOrEqual(t, winners, 1)
		t.Logf("%s: %d winners of %d (acquire is not atomic)", s.name, winners, n)
	}
}
