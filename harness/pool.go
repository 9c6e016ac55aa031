// One pool of runs for the whole matrix: every cell starts with one
// worker and takes more, up to its own most (its lane's databases), while
// the pool has room and the cell has schedules waiting, so that the last
// long cells use the cores the finished ones left. A cell that faults a
// server takes its more outside the pool, one on each fault server lent
// to it (grow).

package harness

import (
	"context"
	"runtime"
)

// workerPool bounds the runs under way across the cells of a matrix.
type workerPool struct{ sem chan struct{} }

// newWorkerPool makes a pool of n runs at once (0: DefaultPool).
func newWorkerPool(n int) *workerPool {
	if n <= 0 {
		n = DefaultPool()
	}
	return &workerPool{sem: make(chan struct{}, n)}
}

// DefaultPool is the runs a matrix has under way at once by default: eight
// per core. A Redis run's client and server take turns on the CPU, but a
// run on ZooKeeper or etcd waits on its servers for most of its time: at
// two per core, ZooKeeper's cells alone kept the cores half busy
// (zk-recipe's cells that fault no server, back to back: 208 s at two per
// core, 172 s and 11% less CPU at four, the same schedules), and at four
// the last long cells of a turn, with eight workers each (MatrixWorkers),
// left them part idle again (the whole matrix 8m11s, then 7m17s at
// eight).
func DefaultPool() int { return 8 * runtime.NumCPU() }

// acquire waits for room in the pool.
func (p *workerPool) acquire(ctx context.Context) error {
	select {
	case p.sem <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// tryAcquire takes room in the pool if there is some now.
func (p *workerPool) tryAcquire() bool {
	select {
	case p.sem <- struct{}{}:
		return true
	default:
		return false
	}
}

func (p *workerPool) release() { <-p.sem }

// grow starts another worker of the exploration when it may have one:
// fewer than its most are running, schedules wait on its stack beyond one
// for each worker running, and the pool has room, or the worker will run
// on a server lent to it alone. The caller holds e.mu.
//
// A cell that faults a server lends each of its workers one of the
// store's fault servers (moreNodes), and those are few (MatrixOptions.
// FaultServers): they bound its workers, not the pool. Its runs wait on
// elections and restarts for most of their time, a few a second, while
// the other cells' workers hold the pool's room for as long as their
// schedules wait and take any room given back within milliseconds: in the
// pool, a fault cell ran its schedules one at a time on one server, its
// stack twenty deep, while the store's other fault servers sat idle.
func (e *explorer) growLocked() {
	if e.pool == nil || e.running >= e.workers || len(e.stack) <= e.running || e.stopped {
		return
	}
	lent := e.lendsServers()
	if !lent && !e.pool.tryAcquire() {
		return
	}
	w := 0
	for e.inUse[w] {
		w++
	}
	e.inUse[w], e.pooled[w], e.lent[w] = true, !lent, lent
	e.running++
	e.wg.Add(1)
	go e.worker(w)
}

// lendsServers reports whether the workers after the first run on
// servers lent to them alone (moreNodes), those of a scenario that faults
// its servers.
func (e *explorer) lendsServers() bool {
	return e.opts.moreNodes != nil && len(e.sc.Needs) > 0
}
