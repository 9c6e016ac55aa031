// One cell of the matrix: a case explored to its verdict, on Redis
// (exploreCell) or on another store (exploreStoreCell), the schedules the
// pages pin run first.

package harness

import (
	"context"
	"fmt"
	"slices"

	"github.com/locklab/locklab/harness/fault"
)

// exploreCell runs cs's cell on nodes, in database db.
func exploreCell(ctx context.Context, o MatrixOptions, cs Case, nodes []Node, db int) (_ Cell, err error) {
	sc := cs.Scenario
	c := Cell{Strategy: cs.Strategy.Name, Scenario: sc.Name, Property: sc.Property, cs: &cs}
	if slices.Contains(sc.Needs, fault.Failover) {
		// Leave the replica in sync for the cells that share the node next
		// (jobFor): the last run may have failed over, or cut it off.
		defer func() {
			for _, n := range nodes {
				if rl, ok := n.(replicaLink); ok && ctx.Err() == nil {
					if cerr := rl.CatchUp(ctx); cerr != nil && err == nil {
						err = fmt.Errorf("catching the replica of %s up: %w", n.Name(), cerr)
					}
				}
			}
		}()
	}
	record := func(h *History) {
		c.Outcome, c.Message = h.Verdict.Outcome, h.Verdict.Message
		c.Schedule = cut(h)
		c.Counterexample = h
	}
	own, known, runs, err := replayTold(ctx, cs, nodes, db)
	if err != nil {
		return c, err
	}
	c.Schedules = runs
	if own != nil {
		c.Naive = int64(runs) // the plain enumeration stops there too
		record(own)
		return c, nil
	}
	maxSched := o.MaxSchedules
	if maxSched <= 0 {
		maxSched = MatrixSchedules
	}
	eo := ExploreOptions{Case: cs, Nodes: nodes, MaxPreemptions: o.MaxPreemptions, MaxSchedules: maxSched,
		Workers: o.Workers, DB: db, NoReduction: o.NoReduction, NoSymmetry: o.NoSymmetry, pool: o.pool}
	ex, err := Explore(ctx, eo)
	if err != nil {
		return c, err
	}
	c.Schedules += ex.Schedules
	c.Complete, c.traces = ex.Complete, ex.Traces
	naive := ex.Naive
	if naive == 0 && ex.Complete && o.Naive {
		eo.MaxSchedules, eo.NoReduction = 1<<30, true
		plain, err := Explore(ctx, eo)
		if err != nil {
			return c, err
		}
		naive = int64(plain.Schedules)
	}
	if naive > 0 {
		c.Naive = int64(c.Schedules-ex.Schedules) + naive
	}
	if ex.Counterexample != nil {
		record(ex.Counterexample)
		return c, nil
	}
	if known != nil {
		// A known schedule outside the bound: the cell fails all the same.
		record(known)
		return c, nil
	}
	c.Outcome = Safe
	c.Limit = maxSched
	if !ex.Complete {
		c.Message = fmt.Sprintf("no violation in %d schedules (bound not exhausted)", ex.Schedules)
	}
	return c, nil
}

// replayTold runs, before a cell's search, the schedules told for its
// case: the scenario's own, then those the documentation replays for the
// strategy (Scenario.Known), each once. own is the scenario's own run when
// it failed: the search starts from it, so the cell ends there. known is
// the first failing known schedule's run, which the cell reports when its
// search finds nothing shorter. runs counts the schedules run.
func replayTold(ctx context.Context, cs Case, nodes []Node, db int) (own, known *History, runs int, err error) {
	sc := cs.Scenario
	if sc.Schedule != "" {
		h, err := Run(ctx, RunOptions{Case: cs, Nodes: nodes, NoRecord: true, DB: db})
		if err != nil {
			return nil, nil, runs, err
		}
		runs++
		if h.Verdict.Failed() {
			return h, nil, runs, nil
		}
	}
	for _, text := range sc.Known[cs.Strategy.Name] {
		if text == sc.Schedule {
			continue
		}
		h, err := Run(ctx, RunOptions{Case: cs, Nodes: nodes, NoRecord: true, DB: db, Schedule: text})
		if err != nil {
			return nil, nil, runs, fmt.Errorf("replaying the known schedule %q: %w", text, err)
		}
		runs++
		if h.Verdict.Failed() && known == nil {
			known = h
		}
	}
	return nil, known, runs, nil
}

// exploreStoreCell runs cs's cell on the nodes of another store: the
// scenario's own schedule first, then the schedules within 1, 2, ... up
// to o.MaxPreemptions preemptions in turn, each level stopping at its
// first violation in its walk's order (the same on one worker and on
// o.Workers: ExploreOptions.StopAtFirst), all of them together at most o.MaxSchedules schedules
// (StoreRestartSchedules for a scenario that restarts the server, whose
// every schedule waits for the server, EtcdRestartSchedules when it waits
// for etcd's election too, PGFailoverSchedules when it promotes a
// PostgreSQL standby). The
// counterexample is the first found with the fewest preemptions: on these
// stores a step costs a round trip, and a violation that needs an early
// fault lies deep in the depth-first order of the full bound. (The level
// of no preemption is left out: the level of one runs its schedules too,
// and first.) Its runs lock the keys of workers db on (storeKeySuffix):
// a cell beside it on the same server locks others.
func exploreStoreCell(ctx context.Context, o MatrixOptions, cs Case, nodes []Node, more *faultPool, db int) (_ Cell, err error) {
	sc := cs.Scenario
	c := Cell{Strategy: cs.Strategy.Name, Scenario: sc.Name, Property: sc.Property, cs: &cs}
	failover := slices.Contains(sc.Needs, fault.Failover)
	if failover {
		// The cells that follow run on a lone primary, as before.
		defer func() {
			if derr := dropStandbys(nodes); derr != nil && err == nil {
				err = derr
			}
		}()
	}
	moreNodes := faultLanes(more, sc, failover)
	record := func(h *History) {
		c.Outcome, c.Message = h.Verdict.Outcome, h.Verdict.Message
		c.Schedule = cut(h)
		c.Counterexample = h
	}
	own, known, runs, err := replayTold(ctx, cs, nodes, db)
	if err != nil {
		return c, err
	}
	c.Schedules = runs
	if own == nil {
		own = known
	}
	if own != nil {
		record(own)
		return c, nil
	}
	budget := o.MaxSchedules
	if budget <= 0 {
		budget = StoreSchedules
	}
	budget = CellSchedules(nodeStore(nodes), sc, budget)
	limit := budget
	top := o.MaxPreemptions
	if top == 0 {
		top = 2
	}
	top = max(top, 0)
	explore := func(p int) (*ExploreResult, error) {
		mp := p
		if p == 0 {
			mp = -1
		}
		// Its first worker runs on the cell's lane, more take room in the
		// matrix's pool; each locks a key of its own (storeKeySuffix).
		ex, err := Explore(ctx, ExploreOptions{Case: cs, Nodes: nodes, MaxPreemptions: mp, MaxSchedules: budget,
			StopAtFirst: true, Workers: o.Workers, DB: db, NoSymmetry: o.NoSymmetry, pool: o.pool, poolFree: true, moreNodes: moreNodes})
		if err != nil {
			return nil, err
		}
		c.Schedules += ex.Schedules
		budget -= ex.Schedules
		return ex, nil
	}
	// The top level first: a cell it finds safe, to the end of the
	// bound, is safe at every level below it, whose schedules it runs
	// (their traces are among its own), and is done. Where it finds a
	// violation, or stops at the budget, the levels below run in order,
	// as they would have before it: the counterexample is the first found
	// with the fewest preemptions, the lowest level's, and the top
	// level's own where none below has one.
	var topEx *ExploreResult
	if top >= 2 {
		ex, err := explore(top)
		if err != nil {
			return c, err
		}
		if ex.Counterexample == nil && ex.Complete {
			c.Outcome, c.Limit, c.Complete = Safe, limit, true
			return c, nil
		}
		topEx = ex
	}
	last := top
	if topEx != nil {
		last = top - 1
	}
	for p := min(1, top); p <= last && budget > 0; p++ {
		ex, err := explore(p)
		if err != nil {
			return c, err
		}
		if ex.Counterexample != nil {
			record(ex.Counterexample)
			return c, nil
		}
		c.Complete = ex.Complete
	}
	if topEx != nil {
		if topEx.Counterexample != nil {
			record(topEx.Counterexample)
			return c, nil
		}
		c.Complete = false // the budget stopped the top level
	}
	c.Outcome = Safe
	c.Limit = limit
	if !c.Complete {
		c.Message = fmt.Sprintf("no violation in %d schedules (bound not exhausted)", c.Schedules)
	}
	return c, nil
}

// cut returns the schedule of h up to its violation.
func cut(h *History) string {
	s, err := ParseSchedule(h.Schedule)
	if err != nil || h.Verdict.Step <= 0 || h.Verdict.Step > len(s) {
		return h.Schedule
	}
	return s[:h.Verdict.Step].String()
}

// faultLanes lends a cell that faults its server the servers its other
// workers run on, if the pool has room for them, each a server of its own
// from the store's fault servers; nil for a cell that faults none, or
// without a pool. A failover cell's server goes back without standbys.
func faultLanes(more *faultPool, sc *Scenario, failover bool) func(context.Context) ([]Node, func() error, bool, error) {
	if more == nil || len(sc.Needs) == 0 {
		return nil
	}
	return func(ctx context.Context) ([]Node, func() error, bool, error) {
		n, ok, err := more.take(ctx, false)
		if !ok {
			return nil, nil, false, err
		}
		return []Node{n}, func() error {
			defer more.put(n)
			if failover {
				return dropStandbys([]Node{n})
			}
			return nil
		}, true, nil
	}
}
