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

	mu      sync.Mutex
	free    *sync.Cond
	idle    []Node
	started []Node // those start started, which close stops
	count   int    // servers lent, idle, or starting
}

// newFaultPool makes the pool of store: given are servers started by the
// caller (MatrixOptions.FaultStores), lent first and never stopped here;
// more are started with start, up to max servers in all.
func newFaultPool(store string, given []Node, start func(context.Context, string) (Node, error), max int) *faultPool {
	p := &faultPool{store: store, start: start, max: max, idle: append([]Node(nil), given...), count: len(given)}
	if p.start == nil || p.max < p.count {
		p.max = p.count
	}
	p.free = sync.NewCond(&p.mu)
	return p
}

// empty reports whether the pool has no server and can start none: the
// cells that fault a server then run on the store's own, alone.
func (p *faultPool) empty() bool { return p.max == 0 }

// take lends a server: an idle one, else one started now while the pool
// has fewer than its most, else, when wait, the next one given back; ok
// is false when it lends none (wait unset and none free, or ctx ended).
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
		if k := len(p.idle); k > 0 {
			n = p.idle[k-1]
			p.idle = p.idle[:k-1]
			p.mu.Unlock()
			return n, true, nil
		}
		if p.count < p.max {
			p.count++
			p.mu.Unlock()
			n, err := p.start(ctx, p.store)
			p.mu.Lock()
			defer p.mu.Unlock()
			if err != nil {
				p.count--
				p.free.Broadcast()
				return nil, false, fmt.Errorf("starting another %s server for the cells that fault it: %w", p.store, err)
			}
			p.started = append(p.started, n)
			return n, true, nil
		}
		if !wait {
			p.mu.Unlock()
			return nil, false, nil
		}
		p.free.Wait()
	}
}

// put gives back a server take lent.
func (p *faultPool) put(n Node) {
	p.mu.Lock()
	p.idle = append(p.idle, n)
	p.free.Broadcast()
	p.mu.Unlock()
}

// close stops the servers the pool started, side by side.
func (p *faultPool) close() error {
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
