// The cells of the stores other than Redis: why a scenario has no meaning
// on a store, where it has none, or cannot run there.

package harness

import "github.com/locklab/locklab/strategies"

// notOnStore says, by store and scenario, why the scenario is n/a for
// every strategy of that store. The scenarios told for several
// independent nodes (Redlock's) are n/a on both for the reason of
// multiNodeNA.
var notOnStore = map[string]map[string]string{}

// getsetNA is why stale-recovery-getset is n/a on a store other than
// Redis: without GETSET its clients, faults and bounds are
// stale-recovery's, and only the story's own schedule differs.
const getsetNA = "the story of GETSET's recovery: on this store its clients and faults are stale-recovery's, " +
	"whose cell explores the same schedules"

// multiNodeNA is why a scenario of Redlock's independent masters is n/a on
// a store other than Redis.
var multiNodeNA = map[string]string{
	StoreEtcd: "a story of Redlock's independent masters: etcd-lease runs on one Raft cluster, whose members " +
		"agree on every write before it is acknowledged",
	StorePostgres: "a story of Redlock's independent masters: a PostgreSQL lock lives on one server",
}

// storeNA returns why scenario sc is n/a on store st, or "".
func storeNA(st string, sc *Scenario) string {
	if sc.MultiNode {
		return multiNodeNA[st]
	}
	if sc.Name == "stale-recovery-getset" {
		return getsetNA
	}
	return notOnStore[st][sc.Name]
}

// The bounds of the other stores' cells in the documented matrix
// (MatrixOptions.StorePreemptions, StoreSchedules; exploreStoreCell): a
// statement or a request costs a round trip to a database or a quorum of
// a cluster (about 1 ms, a Redis command some microseconds), and a
// schedule that restarts the server waits for it and for etcd's election,
// so a cell runs at most StoreSchedules schedules, StoreRestartSchedules
// when its scenario restarts the server, EtcdRestartSchedules when that
// server is etcd's leader (each restart waits for an election: about half
// a second), PGFailoverSchedules when it promotes a PostgreSQL standby
// (each failover promotes one, and the next run starts a new standby with
// pg_basebackup: about half a second together).
const (
	StorePreemptions      = 2
	StoreSchedules        = 300
	StoreRestartSchedules = 60
	EtcdRestartSchedules  = 20
	PGFailoverSchedules   = 6
)

// StoreLanes is how many cells of one other store that fault no server
// explore at once (beside them, the cells that restart a server run on
// servers of their own: MatrixOptions.FaultStores): each runs its
// schedules one at a time, on a key of its own on its server, so that the
// cells' results do not depend on how many run beside them.
const StoreLanes = 3

// StoreOfStrategy names the store the registered strategy name locks on
// when it is not Redis (StorePostgres, StoreEtcd), else "".
func StoreOfStrategy(name string) string {
	d, err := strategies.Info(name)
	if err != nil {
		return ""
	}
	return storeOf(d.Family)
}

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
// says nothing but multiNodeNA.
func storeNAOnly(c Cell) bool {
	if c.Outcome != NA {
		return false
	}
	for _, why := range multiNodeNA {
		if c.Message == why {
			return true
		}
	}
	return false
}
