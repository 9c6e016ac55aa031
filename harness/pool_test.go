package harness

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/locklab/locklab/harness/fault"
)

// TestFaultCellGrowsOutsideAFullPool: a cell that faults its servers
// starts more workers while schedules wait, each asking for a server of
// its own, even when the matrix's pool has no room (the other cells' workers
// held it all, and fault cells ran one schedule at a time on one of
// their three servers); a cell of another scenario, on the same full
// pool, starts none; and a worker that got no server leaves the pool as
// it found it.
func TestFaultCellGrowsOutsideAFullPool(t *testing.T) {
	pool := newWorkerPool(2)
	require.True(t, pool.tryAcquire())
	require.True(t, pool.tryAcquire())
	require.False(t, pool.tryAcquire(), "the pool is full")

	asked := make(chan struct{}, 8)
	grow := func(needs []fault.Fault) *explorer {
		e := &explorer{sc: &Scenario{Name: "s", Needs: needs}, ctx: context.Background(), workers: 3, pool: pool}
		e.opts.moreNodes = func(context.Context) ([]Node, func() error, bool, error) {
			asked <- struct{}{}
			return nil, nil, false, nil // none free: the worker does not start
		}
		e.cond = sync.NewCond(&e.mu)
		e.inUse, e.pooled, e.lent = make([]bool, 3), make([]bool, 3), make([]bool, 3)
		e.inUse[0], e.running = true, 1 // the first worker, on the cell's own server
		e.stack = make([]prefix, 5)     // schedules waiting
		e.mu.Lock()
		e.growLocked()
		e.mu.Unlock()
		e.wg.Wait()
		return e
	}

	e := grow([]fault.Fault{fault.Failover})
	require.Len(t, asked, 1, "the fault cell's second worker asked for a server")
	<-asked
	assert.Equal(t, 1, e.running, "without a server it left")
	assert.False(t, e.inUse[1] || e.lent[1], "and gave its slot back")
	assert.Len(t, pool.sem, 2, "the pool as it was: the worker took no room and gave none back")

	e = grow(nil)
	assert.Empty(t, asked, "a cell that faults no server waits for room in the pool")
	assert.Equal(t, 1, e.running)
	assert.Len(t, pool.sem, 2)
}
