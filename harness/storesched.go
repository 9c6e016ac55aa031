// The scheduler of the matrix cells of the stores other than Redis: the
// stores take turns, and each store's cells run on its servers, beside the
// Redis cells, as many at once as their scenarios and faults allow.

package harness

import (
	"cmp"
	"context"
	"maps"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// runStoreCells explores the cells of the stores other than Redis, each
// store's on its own servers (o.Stores and o.FaultStores), bounded by
// o.StorePreemptions and o.StoreSchedules; wg counts what runs.
//
// The stores' cells that fault no server take turns (storeTurns): the
// next store's start once every such cell of the one before has started,
// so that at most two stores' lanes run at once, the last long cells of
// one beside the first of the next. All of them at once had every
// store's lanes and fault servers (a dozen JVMs, etcd clusters,
// PostgreSQL backends) share the cores, and waits sized for a quiet
// machine (an election, a session's heartbeat, a JVM's start) stretch
// under load: on two cores the whole matrix took a fifth more CPU and
// wall time than with the turns. The cells that kill, restart or fail
// over a server do not wait for the turns: every store's first starts
// at once, its others one after another (runFaultCells), on fault
// servers of their own. They wait on restarts and elections for most of
// their time, and when they waited for their store's turn, the last
// store's ended the run with the cores part idle (docs/matrix.md, "Where
// the time goes": 9m10s, then 7m52s).
func runStoreCells(ctx context.Context, wg *sync.WaitGroup, o MatrixOptions, storeJobs []cellJob, r *cellResults) {
	byStore := map[string][]cellJob{}
	for _, j := range storeJobs {
		st, _ := storeOf(j.cs.Strategy.Family) // its cell applied: its store is registered
		byStore[st.Name] = append(byStore[st.Name], j)
	}
	so := o
	if o.StorePreemptions != 0 {
		so.MaxPreemptions = o.StorePreemptions
	}
	if o.StoreSchedules > 0 {
		so.MaxSchedules = o.StoreSchedules
	}
	turn := make(chan struct{})
	close(turn)
	for _, st := range storeTurns(byStore) {
		prev, started := turn, make(chan struct{})
		wg.Go(func() { runStore(ctx, so, st, byStore[st], r, prev, started) })
		turn = started
	}
}

// storeTurns orders the stores of byStore for their turns: the one with
// the most cells that fault a server first (those wait on restarts and
// elections, and so run longest), then the one with the most cells, then
// by name.
func storeTurns(byStore map[string][]cellJob) []string {
	faults := func(js []cellJob) int {
		n := 0
		for _, j := range js {
			if len(j.cs.Scenario.Needs) > 0 {
				n++
			}
		}
		return n
	}
	sts := slices.Sorted(maps.Keys(byStore))
	slices.SortStableFunc(sts, func(a, b string) int {
		return cmp.Or(cmp.Compare(faults(byStore[b]), faults(byStore[a])), cmp.Compare(len(byStore[b]), len(byStore[a])))
	})
	return sts
}

// runStore explores one store's cells js: those that fault no server on
// the store's own (o.Stores), StoreLanes at a time, and beside them those
// that kill, restart or fail over the server, each on a fault server of
// its own (faultpool.go): one cell after another, from the start, its
// workers spread over the store's fault servers. Without fault servers,
// those run on the store's own server, alone, once the others are done:
// a fault ends the sessions and leases of every cell beside it. The
// cells that fault no server start once turn is closed. started is
// closed once every cell that waits for the turn has started, or
// runStore returns; runStore returns when every cell is done.
func runStore(ctx context.Context, o MatrixOptions, st string, js []cellJob, r *cellResults, turn <-chan struct{}, started chan<- struct{}) {
	var once sync.Once
	allStarted := func() { once.Do(func() { close(started) }) }
	defer allStarted()
	fp := newFaultPool(ctx, st, o.FaultStores[st], o.StartFaultServer, o.faultServers(st))
	var left atomic.Int64
	for _, j := range js {
		if len(j.cs.Scenario.Needs) == 0 || fp.empty() {
			left.Add(1)
		}
	}
	if left.Load() == 0 {
		allStarted()
	}
	// runAt explores j on nodes, its workers on the keys of workers db
	// on (storeKeySuffix); run on the keys of workers 0 on.
	runAt := func(j cellJob, nodes []Node, more *faultPool, db int) bool {
		if (len(j.cs.Scenario.Needs) == 0 || more == nil && fp.empty()) && left.Add(-1) == 0 {
			allStarted()
		}
		r.start(j, false)
		began := time.Now()
		c, err := exploreStoreCell(ctx, o, j.cs, nodes, more, db)
		c.Elapsed = time.Since(began)
		c.storeNodes = nodes
		return r.put(j, c, err)
	}
	run := func(j cellJob, nodes []Node, more *faultPool) bool { return runAt(j, nodes, more, 0) }
	var alone, shared []cellJob
	for _, j := range js {
		if len(j.cs.Scenario.Needs) > 0 {
			alone = append(alone, j)
		} else {
			shared = append(shared, j)
		}
	}
	var fw sync.WaitGroup
	defer fw.Wait()
	if !fp.empty() && len(alone) > 0 {
		fw.Go(func() { runFaultCells(ctx, fp, alone, run, r) })
	}
	select {
	case <-turn:
	case <-ctx.Done():
		return
	}
	// The cells that fault no server lock keys of their own (each run
	// empties its key only, and reads its own sessions), so StoreLanes
	// of them run at once: the cell in lane l runs its workers on the
	// keys of workers l*MaxWorkers on (storeKeySuffix), so that two cells
	// of one scenario, which lock the same key, run at once too. A lane
	// takes the first cell left; the cells are taken strategy by
	// strategy.
	sort.SliceStable(shared, func(a, b int) bool { return shared[a].cs.Strategy.Name < shared[b].cs.Strategy.Name })
	queue := make(chan cellJob, len(shared))
	for _, j := range shared {
		queue <- j
	}
	close(queue)
	var lw sync.WaitGroup
	for l := range StoreLanes {
		lw.Go(func() {
			for j := range queue {
				if ctx.Err() != nil {
					return
				}
				runAt(j, o.Stores[st], nil, l*MaxWorkers)
			}
		})
	}
	lw.Wait()
	if fp.empty() {
		for _, j := range alone {
			if ctx.Err() != nil || !run(j, o.Stores[st], nil) {
				return
			}
		}
	}
}

// runFaultCells explores the cells that fault the server one after
// another, each starting on a server fp lends it, its other workers
// taking more while fp has room (exploreStoreCell), so that a cell's
// schedules spread over every server of the store. With a cell on each
// server instead, each cell kept the one server it started on (the
// servers its workers gave back went to the next cell's start), and the
// longest, one schedule after another on its one cluster, took four
// tenths of the whole matrix (docs/matrix.md, "Where the time goes").
// The servers fp started are stopped once the last cell is done.
func runFaultCells(ctx context.Context, fp *faultPool, js []cellJob, run func(cellJob, []Node, *faultPool) bool, r *cellResults) {
	defer func() {
		if err := fp.close(); err != nil {
			r.put(js[0], Cell{}, err)
		}
	}()
	for _, j := range js {
		n, ok, err := fp.take(ctx, true)
		if !ok {
			r.put(j, Cell{}, cmp.Or(err, ctx.Err()))
			return
		}
		ok = ctx.Err() == nil && run(j, []Node{n}, fp)
		fp.put(n)
		if !ok {
			return
		}
	}
}
