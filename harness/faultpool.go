// The servers of one store on which the matrix's cells that kill, restart
// or fail over a server run: started when a cell first needs one, lent to
// a cell (or to a worker of one) at a time, and stopped once the store's
// cells that need them are done.

package harness

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// DefaultFaultServers is how many servers of a store at most the cells
// that fault a server run on at once (MatrixOptions.FaultServers), where
// its Driver does not say (Driver.FaultServers).
const DefaultFaultServers = 3

// faultPool lends the servers of one store to the cells that fault them,
// each to one cell or one worker of a cell at a time: a fault ends the
// sessions and leases of every run on the server.
type faultPool struct {
	store string
	// start starts one more server (MatrixOptions.StartFaultServer); nil
	// when the pool has only given ones.
	start func(ctx context.Context, store string) (Node, error)
	max   int
	// ctx is the matrix's: a server started for a taker that does not
	// wait starts under it, whatever becomes of the cell that asked;
	// close cancels it.
	ctx    context.Context
	cancel context.CancelFunc

	mu      sync.Mutex
	free    *sync.Cond
	idle    []Node
	started []Node // those start started, which close stops
	count   int    // servers lent, idle, or starting
	// err is the first failed start of a server no taker waited for:
	// the next take returns it.
	err error
	// starting counts the starts no taker waits for, which close waits
	// for.
	starting sync.WaitGroup
}

// newFaultPool makes the pool of store: given are servers started by the
// caller (MatrixOptions.FaultStores), lent first and never stopped here;
// more are started with start under ctx, up to max servers in all.
func newFaultPool(ctx context.Context, store string, given []Node, start func(context.Context, string) (Node, error), max int) *faultPool {
	p := &faultPool{store: store, start: start, max: max, idle: append([]Node(nil), given...), count: len(given)}
	p.ctx, p.cancel = context.WithCancel(ctx)
	if p.start == nil || p.max < p.count {
		p.max = p.count
	}
	p.free = sync.NewCond(&p.mu)
	return p
}

// empty reports whether the pool has no server and can start none: the
// cells that fault a server then run on the store's own, alone.
func (p *faultPool) empty() bool { return p.max == 0 }

// take lends a server: an idle one, else, when wait, one started now
// while the pool has fewer than its most, or the next one given back; ok
// is false when it lends none (ctx ended, or wait unset and none idle).
// A taker that does not wait (a cell's worker beyond its first) starts
// one in the background while the pool has fewer than its most, for the
// next take: a cell whose schedules run out before the server is up ends
// without waiting for it (a ZooKeeper ensemble's JVM takes seconds, a
// Redis cell's schedules milliseconds), and the server serves the cells
// after it.
func (p *faultPool) take(ctx context.Context, wait bool) (n Node, ok bool, err error) {
	stop := context.AfterFunc(ctx, func() {
		p.mu.Lock()
		p.free.Broadcast()
		p.mu.Unlock()
	})
	defer stop()
	p.mu.Lock()
	for {
		if ctx.Err() != nil {
			p.mu.Unlock()
			return nil, false, ctx.Err()
		}
		if p.err != nil {
			err := p.err
			p.mu.Unlock()
			return nil, false, err
		}
		if k := len(p.idle); k > 0 {
			n = p.idle[k-1]
			p.idle = p.idle[:k-1]
			p.mu.Unlock()
			return n, true, nil
		}
		if p.count < p.max && !wait {
			p.count++
			p.starting.Go(p.startIdle)
			p.mu.Unlock()
			return nil, false, nil
		}
		if p.count < p.max {
			p.count++
			p.mu.Unlock()
			n, err := p.start(ctx, p.store)
			p.mu.Lock()
			defer p.mu.Unlock()
			if err = p.endStart(n, err); err != nil {
				return nil, false, err
			}
			return n, true, nil
		}
		if !wait {
			p.mu.Unlock()
			return nil, false, nil
		}
		p.free.Wait()
	}
}

// startIdle starts a server no taker waits for (take) and makes it idle,
// or keeps its error for the next take, where the matrix goes on.
func (p *faultPool) startIdle() {
	n, err := p.start(p.ctx, p.store)
	p.mu.Lock()
	defer p.mu.Unlock()
	defer p.free.Broadcast()
	if err = p.endStart(n, err); err != nil {
		if p.err == nil && p.ctx.Err() == nil {
			p.err = err
		}
		return
	}
	p.idle = append(p.idle, n)
}

// endStart books the end of one start, under p.mu: n, the server start
// gave, joins those close stops; a failed start gives its place back to
// the next taker and returns err, wrapped.
func (p *faultPool) endStart(n Node, err error) error {
	if err != nil {
		p.count--
		p.free.Broadcast()
		return fmt.Errorf("starting another %s server for the cells that fault it: %w", p.store, err)
	}
	p.started = append(p.started, n)
	return nil
}

// put gives back a server take lent.
func (p *faultPool) put(n Node) {
	p.mu.Lock()
	p.idle = append(p.idle, n)
	p.free.Broadcast()
	p.mu.Unlock()
}

// close stops the servers the pool started, side by side, once the starts
// no taker waits for have ended (cancelled: no cell is left to take
// them).
func (p *faultPool) close() error {
	p.cancel()
	p.starting.Wait()
	p.mu.Lock()
	started := p.started
	p.started, p.idle = nil, nil
	p.mu.Unlock()
	errs := make([]error, len(started))
	var wg sync.WaitGroup
	for i, n := range started {
		if c, ok := n.(interface{ Close() error }); ok {
			wg.Go(func() { errs[i] = c.Close() })
		}
	}
	wg.Wait()
	return errors.Join(errs...)
}

// dropStandbys leaves the nodes of a cell that failed a server over as
// the cells that follow want them, a lone primary (a PostgreSQL node
// removes the standby it made).
func dropStandbys(nodes []Node) error {
	for _, n := range nodes {
		if d, ok := n.(interface{ DropStandby() error }); ok {
			if err := d.DropStandby(); err != nil {
				return fmt.Errorf("removing the standby of %s: %w", n.Name(), err)
			}
		}
	}
	return nil
}
