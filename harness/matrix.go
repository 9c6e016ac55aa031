// The verdict matrix: every strategy against every scenario it applies to,
// each cell the scenario's own schedule then a bounded exploration
// (matrixresult.go holds what it gives).

package harness

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/locklab/locklab/lockkit"
	"github.com/locklab/locklab/strategies"
)

// MatrixSchedules is the default most schedules a matrix cell may run: a
// safety net above every catalog cell's whole bound (the largest,
// stale-recovery on Redlock's three nodes, runs 3705), so that the matrix
// states no verdict it did not establish; a cell that reached it would be
// marked safe*.
const MatrixSchedules = 5000

// MatrixWorkers is the most workers of one cell the documented matrix and
// locklab matrix run by default (MatrixOptions.Workers): the long cells
// that end a store's turn, or the run, run mostly alone, and a run on
// etcd or ZooKeeper waits on its server for most of its time, so a cell
// with eight workers keeps cores busy that one with four leaves idle,
// where the pool (DefaultPool) has room for them. Back to back, the whole
// matrix on 2 cores took 8m03s with four workers and a pool of 8, 8m11s
// with eight and a pool of 8, 8m01s with four and a pool of 16, and
// 7m17s with eight and a pool of 16: the same cells, verdicts, counts and
// counterexamples (docs/matrix.md, "Where the time goes").
const MatrixWorkers = 8

// MatrixParallel is how many Redis cells the documented matrix and locklab
// matrix explore at once by default (MatrixOptions.Parallel), beside the
// other stores' cells (storesched.go).
const MatrixParallel = 4

// MatrixOptions bound the verdict matrix.
type MatrixOptions struct {
	// Nodes: at least 3 for the multi-node scenarios (they are n/a with
	// fewer).
	Nodes []Node
	// Strategies and Scenarios restrict the matrix (default: every
	// scenario, and every strategy of Redis and of the Stores given).
	Strategies []string
	Scenarios  []string
	// Extra are scenarios of the caller's own, beside the catalog's
	// (CheckScenario says what one needs): they run as the catalog's do,
	// after them when Scenarios is empty, else where Scenarios names
	// them. A name the catalog has is refused.
	Extra []*Scenario
	// MaxPreemptions and MaxSchedules bound each cell's exploration
	// (defaults 2 and MatrixSchedules).
	MaxPreemptions int
	MaxSchedules   int
	// Workers is the most schedules of one cell that run at once, each on
	// a database of its own (default 1).
	Workers int
	// Pool is the most schedules that run at once across the cells
	// (0: DefaultPool, eight per core). Each cell starts with one worker
	// and takes more, up to Workers, while the pool has room and the cell
	// has schedules waiting (pool.go): the last long cells use the cores
	// the finished ones left.
	Pool int
	// NoReduction explores every schedule within the bounds, branching
	// inside transactions too (ExploreOptions.NoReduction).
	NoReduction bool
	// NoSymmetry explores clients that run the same program as if they
	// differed (ExploreOptions.NoSymmetry).
	NoSymmetry bool
	// Naive counts the schedules of the plain enumeration in every cell:
	// where the reduction skipped some, by running it.
	Naive bool
	// Parallel is how many cells explore at once (default 1), each on
	// Workers databases of its own; a cell that faults a node has the node
	// to itself (place.go).
	Parallel int
	// Progress, when set, is called after every cell, from one cell at a
	// time.
	Progress func(Cell)
	// Planned, when set, is called once, before any cell runs, with how
	// many cells Progress will be called for (those of Shard, n/a ones
	// included); Started when a cell's exploration begins, with its
	// strategy and scenario, from one cell at a time, as Progress.
	Planned func(cells int)
	Started func(strategy, scenario string)
	// pool is the pool of runs the Redis cells share (Pool).
	pool *workerPool
	// Stores are the nodes of the stores other than Redis, by store
	// ("postgres": a stores/postgres Node): the cells of the strategies
	// that lock there run on them, the stores taking turns
	// (storesched.go), StoreLanes cells at a time (one when it restarts
	// the server), beside the Redis cells. A strategy whose store has no
	// nodes here is n/a.
	Stores map[string][]Node
	// FaultStores are more servers of each store other than Redis, a node
	// each ("postgres": stores/postgres Nodes), started by the caller, on
	// which the cells that fault the server (restart-loses-lock) run,
	// each cell (or worker of one) on one server at a time, while the
	// store's other cells run on Stores' nodes. A store with neither
	// these nor StartFaultServer runs the cells that fault the server on
	// Stores' nodes, alone, once its other cells are done: a restart
	// would end the sessions and leases of every cell beside it.
	FaultStores map[string][]Node
	// StartFaultServer, when set, starts one more server of store (a
	// Node, as its Driver's Start gives) for the cells that fault it: the
	// matrix starts one when such a cell, or another worker of one, finds
	// none free, up to FaultServers of the store, and stops those it
	// started once the store's cells that fault a server are done. Each
	// runs one cell, or one worker of one, at a time.
	StartFaultServer func(ctx context.Context, store string) (Node, error)
	// FaultServers bounds the servers of each store that the cells that
	// fault a server run on at once, FaultStores' included (0: each
	// store's own, FaultServersOf).
	FaultServers int
	// StorePreemptions and StoreSchedules bound the cells of the stores
	// other than Redis instead of MaxPreemptions and MaxSchedules when
	// set: a statement or a request costs a round trip to a real database
	// or a quorum of a cluster, where a Redis command costs microseconds.
	// Their cells are explored by exploreStoreCell.
	StorePreemptions int
	StoreSchedules   int
	// Shard, when set, runs the cells of one shard of the matrix alone
	// (shard.go); MergeShards puts the shards' results together.
	Shard *Shard
}

// Cell is one strategy on one scenario.
type Cell struct {
	Strategy string   `json:"strategy"`
	Scenario string   `json:"scenario"`
	Outcome  Outcome  `json:"outcome"`
	Property Property `json:"property,omitempty"`
	// Schedule is the shortest counterexample found, in the text form.
	Schedule string `json:"schedule,omitempty"`
	Message  string `json:"message,omitempty"`
	// Schedules is how many schedules were run; Complete whether that was
	// every one within the bound.
	Schedules int  `json:"schedules"`
	Complete  bool `json:"complete"`
	// Limit is the most schedules the cell's search could run: on a SAFE
	// cell that is not Complete, the limit that stopped it.
	Limit int `json:"limit,omitempty"`
	// Naive is how many schedules a plain enumeration would have run
	// within the same bounds (the scenario's own schedule included): the
	// reduction ran Schedules of them. 0 when not counted (the reduction
	// skipped some and MatrixOptions.Naive was off).
	Naive int64 `json:"naive,omitempty"`
	// Elapsed is the time the cell took.
	Elapsed time.Duration `json:"elapsed_ns,omitempty"`
	// Counterexample is the failing run.
	Counterexample *History `json:"-"`
	// cs is the case the cell ran, which Record replays; storeNodes the
	// nodes of its store when that is not Redis.
	cs         *Case
	storeNodes []Node
	// traces is how many traces the explored schedules fall into
	// (ExploreResult.Traces).
	traces int
}

// check refuses options that make no sense before any cell runs, as
// ExploreOptions.check does for one cell: the zero value of each bound is
// its default, -1 means none for the preemption bounds, and every other
// negative value is refused (lockkit.ErrInvalid), as are more than
// MaxWorkers workers.
func (o MatrixOptions) check() error {
	if err := checkBounds("matrix",
		bound{"MaxPreemptions", o.MaxPreemptions, -1, 0, "-1 (none), 0 (the default) or more"},
		bound{"MaxSchedules", o.MaxSchedules, 0, 0, "0 (the default) or more"},
		bound{"StorePreemptions", o.StorePreemptions, -1, 0, "-1 (none), 0 (the default) or more"},
		bound{"StoreSchedules", o.StoreSchedules, 0, 0, "0 (the default) or more"},
		bound{"Workers", o.Workers, 0, MaxWorkers, fmt.Sprintf("0 (the default) to %d", MaxWorkers)},
		bound{"Parallel", o.Parallel, 0, 0, "0 (the default) or more"},
		bound{"Pool", o.Pool, 0, 0, "0 (the default) or more"},
		bound{"FaultServers", o.FaultServers, 0, 0, "0 (the default) or more"},
	); err != nil {
		return err
	}
	return o.Shard.check()
}

// faultServers is FaultServers, or store's own.
func (o MatrixOptions) faultServers(store string) int {
	if o.FaultServers > 0 {
		return o.FaultServers
	}
	return FaultServersOf(store)
}

// FaultServersOf is how many servers of store the cells that fault a
// server run on at once by default: its Driver's FaultServers where set,
// else DefaultFaultServers.
func FaultServersOf(store string) int {
	if d, err := LookupStore(store); err == nil && d.FaultServers > 0 {
		return d.FaultServers
	}
	return DefaultFaultServers
}

// Matrix runs every strategy against every scenario it applies to: the
// scenario's own schedule first, then a bounded exhaustive exploration. A
// cell is SAFE within the bound, VIOLATED (with the shortest
// counterexample found), DEADLOCK, STARVATION, or n/a. Parallel cells
// explore at once: the Redis cells placed on the nodes' databases
// (place.go), each other store's cells on its servers (storesched.go).
func Matrix(ctx context.Context, o MatrixOptions) (*MatrixResult, error) {
	if err := o.check(); err != nil {
		return nil, err
	}
	start := time.Now()
	m, na, jobs, storeJobs, err := layCells(o)
	if err != nil {
		return nil, err
	}
	if o.Planned != nil {
		o.Planned(o.Shard.share(len(m.Cells)))
	}
	if o.Progress != nil {
		for _, c := range na {
			o.Progress(c)
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	p := newPlacer(len(o.Nodes), o.Workers, o.Parallel)
	o.pool = newWorkerPool(o.Pool)
	r := &cellResults{m: m, p: p, cancel: cancel, progress: o.Progress, started: o.Started}
	var wg sync.WaitGroup
	runStoreCells(ctx, &wg, o, storeJobs, r)
	runRedisCells(ctx, &wg, o, jobs, r)
	wg.Wait()
	if r.err != nil {
		return nil, r.err
	}
	m.Elapsed = time.Since(start)
	if o.Shard != nil {
		mine := m.Cells[:0]
		for i, c := range m.Cells {
			if o.Shard.holds(i) {
				mine = append(mine, c)
			}
		}
		m.Cells = mine
	}
	return m, nil
}

// layCells lays out the matrix: its strategies and scenarios (o's, or
// every Redis strategy and those of the stores given, and every
// scenario), a cell for each pair in the matrix's order, n/a where the
// scenario does not apply, and of o's shard the n/a cells and the cells
// left to explore: the Redis cells' jobs in the order they are taken, and
// the other stores'.
func layCells(o MatrixOptions) (m *MatrixResult, na []Cell, jobs, storeJobs []cellJob, err error) {
	m = &MatrixResult{Strategies: o.Strategies, Scenarios: o.Scenarios, Shard: o.Shard}
	if len(m.Strategies) == 0 {
		// Every strategy of the Main store, and those of the other
		// stores given.
		for _, d := range strategies.All() {
			if st, err := storeOf(d.Family); err == nil && (st.Main || len(o.Stores[st.Name]) > 0) {
				m.Strategies = append(m.Strategies, d.Name)
			}
		}
	}
	for i, sc := range o.Extra {
		if err := CheckScenario(sc); err != nil {
			return nil, nil, nil, nil, err
		}
		if j := slices.IndexFunc(o.Extra, func(x *Scenario) bool { return x.Name == sc.Name }); j != i {
			return nil, nil, nil, nil, lockkit.Invalid("two scenarios of one's own are named %q", sc.Name)
		}
	}
	if len(m.Scenarios) == 0 {
		for _, s := range Scenarios() {
			m.Scenarios = append(m.Scenarios, s.Name)
		}
		for _, s := range o.Extra {
			m.Scenarios = append(m.Scenarios, s.Name)
		}
	}
	for _, name := range m.Scenarios {
		sc, err := LookupWith(name, o.Extra...)
		if err != nil {
			return nil, nil, nil, nil, err
		}
		m.About = append(m.About, ScenarioAbout{Name: sc.Name, Title: sc.Title, Story: sc.Story, Source: sc.Source, Property: sc.Property,
			Stores: sc.Stores})
		for _, st := range m.Strategies {
			cs, err := sc.Resolve(st)
			if err != nil {
				return nil, nil, nil, nil, fmt.Errorf("%s on %s: %w", st, name, err)
			}
			i := len(m.Cells)
			c, ok := applicable(o, cs)
			m.Cells = append(m.Cells, c)
			if !o.Shard.holds(i) {
				continue
			}
			if !ok {
				na = append(na, c)
				continue
			}
			if st, _ := storeOf(cs.Strategy.Family); !st.Main {
				storeJobs = append(storeJobs, cellJob{index: i, cs: cs})
				continue
			}
			jobs = append(jobs, jobFor(i, cs, o.Nodes))
		}
	}
	order(jobs)
	return m, na, jobs, storeJobs, nil
}

// cellResults collects the explored cells into m, one at a time under the
// placer's lock (Progress is called there too), and the first error,
// which cancels the cells still running.
type cellResults struct {
	m        *MatrixResult
	p        *placer
	cancel   context.CancelFunc
	progress func(Cell)
	started  func(strategy, scenario string)
	err      error // the first error; guarded by p.mu
}

// start says that the cell j begins, where Started is set. The caller
// holds p.mu when locked is set.
func (r *cellResults) start(j cellJob, locked bool) {
	if r.started == nil {
		return
	}
	if !locked {
		r.p.mu.Lock()
		defer r.p.mu.Unlock()
	}
	r.started(j.cs.Strategy.Name, j.cs.Scenario.Name)
}

// put records the cell j explored, or its error, and says whether the
// matrix goes on: an error ends it. The caller does not hold p.mu.
func (r *cellResults) put(j cellJob, c Cell, err error) bool {
	r.p.mu.Lock()
	defer r.p.mu.Unlock()
	if err != nil {
		if r.err == nil {
			r.err = fmt.Errorf("%s on %s: %w", j.cs.Strategy.Name, j.cs.Scenario.Name, err)
			r.cancel()
		}
		r.p.cond.Broadcast()
		return false
	}
	r.m.Cells[j.index] = c
	if r.progress != nil {
		r.progress(c)
	}
	return true
}

// runRedisCells explores the Redis cells' jobs, Parallel at once, each
// where the placer puts it (place.go), until every one has run or a cell
// failed; wg counts the cells running.
func runRedisCells(ctx context.Context, wg *sync.WaitGroup, o MatrixOptions, jobs []cellJob, r *cellResults) {
	p := r.p
	p.mu.Lock()
	defer p.mu.Unlock()
	for len(jobs) > 0 && r.err == nil {
		j, pl, ok := p.take(&jobs)
		if !ok && p.running == 0 {
			r.err = fmt.Errorf("%s on %s: no nodes to run it on", jobs[0].cs.Strategy.Name, jobs[0].cs.Scenario.Name)
			r.cancel()
			return
		}
		if !ok {
			p.cond.Wait()
			continue
		}
		r.start(j, true)
		wg.Go(func() {
			began := time.Now()
			nodes := make([]Node, len(pl.nodes))
			for i, n := range pl.nodes {
				nodes[i] = o.Nodes[n]
			}
			c, err := exploreCell(ctx, o, j.cs, nodes, pl.db)
			c.Elapsed = time.Since(began)
			p.release(j, pl)
			r.put(j, c, err)
		})
	}
}

// applicable returns cs's cell with ok=false when the scenario does not
// apply to the strategy or the nodes cannot run it.
func applicable(o MatrixOptions, cs Case) (Cell, bool) {
	sc := cs.Scenario
	c := Cell{Strategy: cs.Strategy.Name, Scenario: sc.Name, Property: sc.Property, cs: &cs}
	nodes := o.Nodes
	st, err := storeOf(cs.Strategy.Family)
	if err != nil {
		c.Outcome, c.Message = NA, err.Error()
		return c, false
	}
	if !st.Main {
		nodes = o.Stores[st.Name]
		if len(nodes) == 0 {
			c.Outcome, c.Message = NA, "needs a "+st.Title+" server"
			return c, false
		}
		if why := storeNA(st, sc); why != "" {
			c.Outcome, c.Message = NA, why
			return c, false
		}
	}
	if st.Main {
		// The Main store says so of the scenarios that need what its
		// servers are not (a cluster of members).
		if why := StoreNA(st.Name, sc); why != "" {
			c.Outcome, c.Message = NA, why
			return c, false
		}
	}
	switch {
	case sc.Guarded && guardNA(cs.Strategy) != "" && (sc.Applies == nil || sc.Applies(cs.Strategy)):
		// A scenario that would apply but for the guard says why.
		c.Outcome, c.Message = NA, guardNA(cs.Strategy)
		return c, false
	case !sc.AppliesTo(cs.Strategy):
		c.Outcome, c.Message = NA, notForKind
		return c, false
	case len(nodes) < sc.nodes():
		c.Outcome, c.Message = NA, fmt.Sprintf("needs %d nodes", sc.nodes())
		return c, false
	}
	if why, err := sc.unsupported(nodes); err != nil || why != "" {
		if err != nil {
			why = err.Error()
		}
		c.Outcome, c.Message = NA, why
		return c, false
	}
	if cs.Strategy.Replica {
		if _, ok := nodes[0].(replicaLink); !ok {
			c.Outcome, c.Message = NA, "needs a replica to acknowledge (WAIT)"
			return c, false
		}
	}
	return c, true
}

// notForKind is the message of a cell whose scenario is not meant for its
// strategy (Scenario.Applies, MultiNode).
const notForKind = "not for this kind of strategy"
