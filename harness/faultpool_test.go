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
	p := newFaultPool("etcd", []Node{given}, start, 2)
	require.False(t, p.empty())

	a, ok, err := p.take(ctx, false)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Same(t, given, a, "the given server first")
	b, ok, err := p.take(ctx, false)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Len(t, started, 1, "one started when none was free")

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
	failing := newFaultPool("zookeeper", nil, func(context.Context, string) (Node, error) { return nil, boom }, 1)
	_, ok, err = failing.take(ctx, true)
	assert.False(t, ok)
	assert.ErrorIs(t, err, boom)
	assert.ErrorContains(t, err, "starting another zookeeper server")
	assert.Zero(t, failing.count, "a failed start is not counted")

	assert.True(t, newFaultPool("postgres", nil, nil, 3).empty(), "nothing given and nothing to start with")
}
