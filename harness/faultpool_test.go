package harness

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// closer is a Node that counts its Close calls.
type closer struct {
	AddrNode
	closed atomic.Int32
}

func (c *closer) Close() error { c.closed.Add(1); return nil }

// TestFaultPool: the pool lends what it was given first, starts more only
// while it has fewer than its most, lends a server to one taker at a
// time, makes a waiting taker wait for one given back, and stops only
// those it started.
func TestFaultPool(t *testing.T) {
	ctx := context.Background()
	given := &closer{AddrNode: AddrNode{NodeName: "given"}}
	var started []*closer
	start := func(_ context.Context, store string) (Node, error) {
		c := &closer{AddrNode: AddrNode{NodeName: fmt.Sprintf("%s-%d", store, len(started))}}
		started = append(started, c)
		return c, nil
	}
	p := newFaultPool(ctx, "etcd", []Node{given}, start, 2)
	require.False(t, p.empty())

	a, ok, err := p.take(ctx, false)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Same(t, given, a, "the given server first")
	_, ok, err = p.take(ctx, false)
	require.NoError(t, err)
	assert.False(t, ok, "none idle: a taker that does not wait gets none now")
	p.starting.Wait()
	assert.Len(t, started, 1, "one started for the next taker when none was free")
	b, ok, err := p.take(ctx, false)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Same(t, started[0], b, "the one started meanwhile")

	_, ok, err = p.take(ctx, false)
	require.NoError(t, err)
	assert.False(t, ok, "at its most, a taker that does not wait gets none")

	got := make(chan Node)
	go func() {
		n, _, _ := p.take(ctx, true)
		got <- n
	}()
	select {
	case n := <-got:
		t.Fatalf("a waiting taker got %s while both were lent", n.Name())
	case <-time.After(50 * time.Millisecond):
	}
	p.put(b)
	assert.Same(t, b, <-got, "the one given back")
	assert.Len(t, started, 1, "no start beyond the most")

	short, cancel := context.WithCancel(ctx)
	go func() { time.Sleep(20 * time.Millisecond); cancel() }()
	_, ok, err = p.take(short, true)
	assert.False(t, ok)
	assert.ErrorIs(t, err, context.Canceled, "a wait ends with its context")

	p.put(a)
	p.put(b)
	require.NoError(t, p.close())
	assert.EqualValues(t, 1, started[0].closed.Load(), "the started one is stopped")
	assert.EqualValues(t, 0, given.closed.Load(), "the given one is the caller's")

	boom := errors.New("no java")
	failing := newFaultPool(ctx, "zookeeper", nil, func(context.Context, string) (Node, error) { return nil, boom }, 1)
	_, ok, err = failing.take(ctx, true)
	assert.False(t, ok)
	assert.ErrorIs(t, err, boom)
	assert.ErrorContains(t, err, "starting another zookeeper server")
	assert.Zero(t, failing.count, "a failed start is not counted")

	// A start no taker waited for fails the take after it.
	_, ok, err = failing.take(ctx, false)
	require.NoError(t, err)
	assert.False(t, ok)
	failing.starting.Wait()
	assert.Zero(t, failing.count, "a failed start is not counted")
	_, ok, err = failing.take(ctx, false)
	assert.False(t, ok)
	assert.ErrorIs(t, err, boom, "the next take says why")

	assert.True(t, newFaultPool(ctx, "postgres", nil, nil, 3).empty(), "nothing given and nothing to start with")
}

// TestFaultPoolCloseEndsStarts: close cancels the starts no taker waits
// for, waits for them to end, and stops a server that came up all the
// same, rather than leaving it running; a start that gave up on the
// cancel is no error.
func TestFaultPoolCloseEndsStarts(t *testing.T) {
	ctx := context.Background()
	c := &closer{AddrNode: AddrNode{NodeName: "slow"}}
	var calls atomic.Int32
	p := newFaultPool(ctx, "redis", nil, func(ctx context.Context, _ string) (Node, error) {
		<-ctx.Done() // up only once close cancels
		if calls.Add(1) == 1 {
			return c, nil
		}
		return nil, ctx.Err()
	}, 2)
	for range 2 {
		_, ok, err := p.take(ctx, false)
		require.NoError(t, err)
		require.False(t, ok, "still starting")
	}
	require.NoError(t, p.close())
	assert.EqualValues(t, 2, calls.Load(), "both starts ended before close returned")
	assert.EqualValues(t, 1, c.closed.Load(), "the server that came up is stopped")
}

// TestFaultCellsOneAfterAnother: a store's cells that fault a server run
// one after another, each starting on a server of the pool, so that the
// servers its workers ask for are free for them (a cell on each server
// kept each to the one it started on); every server is given back, and
// those started are stopped once the last cell is done.
func TestFaultCellsOneAfterAnother(t *testing.T) {
	var started []*closer
	start := func(_ context.Context, store string) (Node, error) {
		c := &closer{AddrNode: AddrNode{NodeName: fmt.Sprintf("%s-%d", store, len(started))}}
		started = append(started, c)
		return c, nil
	}
	p := newFaultPool(context.Background(), "zookeeper", nil, start, 3)
	js := []cellJob{{index: 0}, {index: 1}, {index: 2}}
	var running, most atomic.Int32
	var ran []int
	var lent []int // servers the running cell's other workers got
	run := func(j cellJob, nodes []Node, more *faultPool) bool {
		now := running.Add(1)
		defer running.Add(-1)
		if now > most.Load() {
			most.Store(now)
		}
		require.Len(t, nodes, 1)
		assert.Same(t, p, more, "the cell's workers take more from the same pool")
		// Were another cell to start beside this one, it would within
		// this wait.
		time.Sleep(50 * time.Millisecond)
		var got []Node
		for {
			n, ok, err := more.take(context.Background(), false)
			require.NoError(t, err)
			if !ok {
				// None idle: one may be starting for the next take.
				more.starting.Wait()
				if n, ok, err = more.take(context.Background(), false); err != nil || !ok {
					break
				}
			}
			got = append(got, n)
		}
		for _, n := range got {
			more.put(n)
		}
		ran = append(ran, j.index)
		lent = append(lent, len(got))
		return true
	}
	runFaultCells(context.Background(), p, js, run, &cellResults{m: &MatrixResult{}})
	assert.Equal(t, []int{0, 1, 2}, ran, "every cell, in order")
	assert.EqualValues(t, 1, most.Load(), "one cell at a time")
	assert.Equal(t, []int{2, 2, 2}, lent, "each cell's other workers get every other server")
	require.Len(t, started, 3)
	for _, c := range started {
		assert.EqualValues(t, 1, c.closed.Load(), "%s stopped once the cells are done", c.Name())
	}
}
