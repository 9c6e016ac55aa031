package etcdlock_test

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/strategies/etcdlock"
)

// TestRace20: twenty clients acquiring a free key at once: exactly one
// wins, and the others are refused, not failed.
func TestRace20(t *testing.T) {
	t.Parallel()
	ctx, cli := testCtx(t), sharedClient(t)
	for round := range 3 {
		k := key(t) + ":" + string(rune('a'+round))
		var wg sync.WaitGroup
		var won atomic.Int32
		var refused atomic.Int32
		winner := make(chan locklab.Lease, 20)
		errs := make(chan error, 20)
		start := make(chan struct{})
		for range 20 {
			l := newLock(t, cli, etcdlock.Options{})
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				lease, err := l.Acquire(ctx, k, time.Minute)
				switch {
				case err == nil:
					won.Add(1)
					winner <- lease
				case errors.Is(err, locklab.ErrNotAcquired):
					refused.Add(1)
				default:
					errs <- err
				}
			}()
		}
		close(start)
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Errorf("round %d: %v", round, err)
		}
		assert.EqualValues(t, 1, won.Load(), "round %d: exactly one winner", round)
		assert.EqualValues(t, 19, refused.Load(), "round %d", round)
		assert.Len(t, holders(t, cli, k), 1, "round %d: the losers' keys are gone", round)
		close(winner)
		for lease := range winner {
			require.NoError(t, newLock(t, cli, etcdlock.Options{}).Release(ctx, lease))
		}
	}
}
