// The cells of the stores other than Redis: why a scenario has no meaning
// on a store, where it has none, or cannot run there.

package harness

import "slices"

// getsetNA is why stale-recovery-getset is n/a on a store other than
// Redis: without GETSET its clients, faults and bounds are
// stale-recovery's, and only the story's own schedule differs.
const getsetNA = "the story of GETSET's recovery: on this store its clients and faults are stale-recovery's, " +
	"whose cell explores the same schedules"

// StoreNA says why scenario sc has no meaning on the registered store
// named store, before any strategy's own reason (Scenario.AppliesTo): ""
// where it has one, and on a store no package registered. The Main store
// says so only through its NA (a scenario of a cluster's members).
func StoreNA(store string, sc *Scenario) string {
	d := driver(store)
	switch {
	case d == nil:
		return ""
	case d.Main:
		if d.NA != nil {
			return d.NA(sc)
		}
		return ""
	}
	return storeNA(d, sc)
}

// storeNA returns why scenario sc is n/a on store d, a store other than
// the Main one, or "".
func storeNA(d *Driver, sc *Scenario) string {
	if sc.MultiNode {
		return d.MultiNode
	}
	if sc.Name == "stale-recovery-getset" {
		return getsetNA
	}
	if d.NA != nil {
		return d.NA(sc)
	}
	return ""
}

// The bounds of the other stores' cells in the documented matrix
// (MatrixOptions.StorePreemptions, StoreSchedules; exploreStoreCell): a
// cell runs at most StoreSchedules schedules, StoreRestartSchedules when
// its scenario restarts the server, or fewer where the store's Limits say
// so (an election to wait for, a standby to promote). They are safety
// nets above the cells' own counts, as MatrixSchedules is for Redis: with
// the reduction (docs/reduction.md) every cell of the documented matrix
// is explored to the end of its bound (the largest, pg-for-update on
// partitioned-holder-guarded, in about 7,200 schedules). A statement
// or a request costs a round trip to a database or a quorum of a cluster
// (about 1 ms, a Redis command some microseconds), and a schedule that
// restarts the server waits for it.
const (
	StorePreemptions      = 2
	StoreSchedules        = 50000
	StoreRestartSchedules = 2000
)

// CellSchedules is the most schedules a cell of scenario sc on store runs,
// for a store's budget of budget schedules (StoreSchedules by default).
func CellSchedules(store string, sc *Scenario, budget int) int {
	if len(sc.Needs) == 0 {
		return budget
	}
	restart := min(budget, StoreRestartSchedules)
	if d := driver(store); d != nil {
		for _, l := range d.Limits {
			if l.Applies == nil || l.Applies(sc) {
				restart = min(restart, l.Schedules)
			}
		}
	}
	return restart
}

// StoreLimits are the Limits of the registered stores named (every one
// when none is), the largest first.
func StoreLimits(stores ...string) []Limit {
	var out []Limit
	for _, d := range Stores() {
		if len(stores) == 0 || slices.Contains(stores, d.Name) {
			out = append(out, d.Limits...)
		}
	}
	slices.SortStableFunc(out, func(a, b Limit) int { return b.Schedules - a.Schedules })
	return out
}

// StoreTitles are the titles of the registered stores named (every one
// when none is), in their order.
func StoreTitles(stores ...string) []string {
	var out []string
	for _, d := range Stores() {
		if len(stores) == 0 || slices.Contains(stores, d.Name) {
			out = append(out, d.Title)
		}
	}
	return out
}

// StoreLanes is how many cells of one other store that fault no server
// explore at once (beside them, the cells that restart a server run on
// servers of their own: MatrixOptions.StartFaultServer): each runs its
// schedules one at a time, on a key of its own on its server, so that the
// cells' results do not depend on how many run beside them.
const StoreLanes = 3

// Only returns the part of m whose strategies keep says to keep: its
// cells, and the scenarios where at least one of them applies (a row of
// cells that are n/a because the scenario is not meant for their kind of
// strategy, or is one of Redlock's on another store, is left out).
func (m *MatrixResult) Only(keep func(strategy string) bool) *MatrixResult {
	out := &MatrixResult{Elapsed: m.Elapsed}
	for _, s := range m.Strategies {
		if keep(s) {
			out.Strategies = append(out.Strategies, s)
		}
	}
	for i, sc := range m.Scenarios {
		applies := false
		for _, c := range m.Cells {
			if c.Scenario == sc && keep(c.Strategy) && !storeNAOnly(c) && !(c.Outcome == NA && c.Message == notForKind) {
				applies = true
			}
		}
		if !applies {
			continue
		}
		out.Scenarios = append(out.Scenarios, sc)
		if i < len(m.About) {
			out.About = append(out.About, m.About[i])
		}
	}
	for _, c := range m.Cells {
		if keep(c.Strategy) {
			out.Cells = append(out.Cells, c)
		}
	}
	return out
}

// storeNAOnly reports a cell that is n/a because its scenario is one of
// Redlock's independent masters on another store: a row of such cells
// says nothing but a Driver's MultiNode.
func storeNAOnly(c Cell) bool {
	if c.Outcome != NA {
		return false
	}
	for _, d := range Stores() {
		if !d.Main && c.Message == d.MultiNode {
			return true
		}
	}
	return false
}
