// The scheduler of the matrix cells of the stores other than Redis: each
// store's cells run on its servers, beside the Redis cells, as many at
// once as their scenarios and faults allow.

package harness

import (
	"context"
	"slices"
	"sort"
	"sync"
	"time"
)

// runStoreCells explores the cells of the stores other than Redis, each
// store's on its own servers (o.Stores and o.FaultStores), bounded by
// o.StorePreemptions and o.StoreSchedules; wg counts what runs.
func runStoreCells(ctx context.Context, wg *sync.WaitGroup, o MatrixOptions, storeJobs []cellJob, r *cellResults) {
	byStore := map[string][]cellJob{}
	for _, j := range storeJobs {
		st := storeOf(j.cs.Strategy.Family)
		byStore[st] = append(byStore[st], j)
	}
	so := o
	if o.StorePreemptions != 0 {
		so.MaxPreemptions = o.StorePreemptions
	}
	if o.StoreSchedules > 0 {
		so.MaxSchedules = o.StoreSchedules
	}
	for st, js := range byStore {
		wg.Go(func() { runStore(ctx, wg, so, st, js, r) })
	}
}

// runStore explores one store's cells js on its servers.
func runStore(ctx context.Context, wg *sync.WaitGroup, o MatrixOptions, st string, js []cellJob, r *cellResults) {
	run := func(j cellJob, nodes []Node) bool {
		r.start(j, false)
		began := time.Now()
		c, err := exploreStoreCell(ctx, o, j.cs, nodes)
		c.Elapsed = time.Since(began)
		c.storeNodes = nodes
		return r.put(j, c, err)
	}
	// The cells that fault no server lock keys of their own (each
	// run empties its key only, and reads its own sessions), so
	// StoreLanes of them run at once; those that restart the
	// server run beside them on the store's other servers, one
	// at a time on each (FaultStores), or alone after them.
	// Two cells of one scenario lock the same key (and emptying it
	// empties it in every table): they never run at once on one
	// server. A lane takes the first cell left that some server
	// can run: one where no cell of its scenario runs, among the
	// store's servers and the other servers once they have run
	// their cells that restart them. The cells are taken strategy
	// by strategy, so that those running together are mostly of
	// different scenarios.
	var alone, shared []cellJob
	for _, j := range js {
		if len(j.cs.Scenario.Needs) > 0 {
			alone = append(alone, j)
		} else {
			shared = append(shared, j)
		}
	}
	sort.SliceStable(shared, func(a, b int) bool { return shared[a].cs.Strategy.Name < shared[b].cs.Strategy.Name })
	var (
		mu sync.Mutex
		// servers are the nodes the cells may run on; faulting
		// marks those running their cells that restart them;
		// locked the scenarios whose cells run on each.
		servers  = [][]Node{o.Stores[st]}
		faulting = []bool{false}
		locked   = []map[string]bool{{}}
	)
	free := sync.NewCond(&mu)
	fs := o.FaultStores[st]
	for _, n := range fs {
		servers = append(servers, []Node{n})
		faulting = append(faulting, true)
		locked = append(locked, map[string]bool{})
	}
	// Each other server takes the next cell that restarts the
	// server, then lends itself to the others.
	next := make(chan cellJob, len(alone))
	if len(fs) > 0 {
		for _, j := range alone {
			next <- j
		}
	}
	close(next)
	for i := 1; i < len(servers); i++ {
		nodes := servers[i]
		wg.Go(func() {
			defer func() {
				mu.Lock()
				faulting[i] = false
				free.Broadcast()
				mu.Unlock()
			}()
			for j := range next {
				if ctx.Err() != nil || !run(j, nodes) {
					return
				}
			}
		})
	}
	take := func() (cellJob, int, bool) {
		mu.Lock()
		defer mu.Unlock()
		for len(shared) > 0 && ctx.Err() == nil {
			for i, j := range shared {
				for k := range servers {
					if !faulting[k] && !locked[k][j.cs.Scenario.Name] {
						locked[k][j.cs.Scenario.Name] = true
						shared = slices.Delete(shared, i, i+1)
						return j, k, true
					}
				}
			}
			free.Wait()
		}
		return cellJob{}, 0, false
	}
	var lw sync.WaitGroup
	for range StoreLanes {
		lw.Go(func() {
			for {
				j, k, ok := take()
				if !ok {
					return
				}
				run(j, servers[k])
				mu.Lock()
				delete(locked[k], j.cs.Scenario.Name)
				free.Broadcast()
				mu.Unlock()
			}
		})
	}
	lw.Wait()
	if len(fs) == 0 {
		for _, j := range alone {
			if ctx.Err() != nil || !run(j, o.Stores[st]) {
				return
			}
		}
	}
}
