// Package postgres is the PostgreSQL store of the harness: the servers the
// postgres family's locks (strategies/pglock) run on, in the matrix and
// in play, and how each SQL statement becomes a step. Importing it
// registers it with the harness (harness.RegisterStore).
//
//	driver.go    the store's Driver: its servers, bounds, n/a cells, tellings
//	node.go      the node: a server, its standby and its faults
//	store.go     a slot's store: each client's pool, its statements as steps
//	label.go     how a statement and its answer show in a timeline
//	touch.go     what each statement reads and writes, per session
//	tellings.go  the scenarios as told for PostgreSQL
package postgres

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/harness"
	"github.com/locklab/locklab/harness/fault"
	"github.com/locklab/locklab/stores/postgres/pgproc"
	"github.com/locklab/locklab/strategies/pglock"
)

// FailoverSchedules bounds a cell whose scenario promotes a standby: each
// failover promotes one, and the next run starts a new standby with
// pg_basebackup (about half a second together). A safety net: every
// failover cell of the documented matrix ends at a violation long before.
const FailoverSchedules = 2000

// syncColumns are the strategies whose column is their lock on a primary
// with a synchronous standby (Node.Synchronous), as its users run it: the
// setting is the server's and the session's, not the lock's code.
var syncColumns = []string{pglock.LockTableSyncName}

func init() {
	harness.RegisterStore(&harness.Driver{
		Stress: stressDriver,
		Name:   Name,
		Title:  "PostgreSQL",
		Rank:   1,
		Installed: func() error {
			_, err := pgproc.BinDir()
			return err
		},
		Start:    start,
		Describe: describe,
		Open: func(nodes []harness.Node, o harness.OpenOptions) (harness.Store, error) {
			return newStore(nodes[0].(*Node), slices.Contains(syncColumns, o.Strategy))
		},
		Audit:     startAudit,
		MultiNode: "a story of Redlock's independent masters: a PostgreSQL lock lives on one server",
		NA: func(sc *harness.Scenario) string {
			if slices.Contains(sc.Needs, fault.MemberLoss) {
				return "a story of a consensus cluster's members: a PostgreSQL lock lives on one server, whose standby " +
					"(asynchronous, or synchronous with pg-lock-table-sync) is promoted by hand, with no quorum to lose a member of: " +
					"restart-loses-lock and failover-loses-lock tell how it loses a lock"
			}
			return ""
		},
		Tellings:   tellings,
		Known:      known,
		PlayLevels: playLevels,
		PlayServers: func(_ int, replica bool) string {
			if replica {
				return "a PostgreSQL server and its asynchronous standby"
			}
			return "a PostgreSQL server"
		},
		Columns: []string{"pg-lock-table", pglock.LockTableSyncName, "pg-for-update", "pg-advisory"},
		Limits: []harness.Limit{{Schedules: FailoverSchedules, Where: "on a PostgreSQL failover",
			Applies: func(sc *harness.Scenario) bool { return slices.Contains(sc.Needs, fault.Failover) }}},
		Guards: map[string]string{"pg-lock-table": guardWhat, pglock.LockTableSyncName: guardWhat,
			"pg-for-update": guardWhat, "pg-advisory": guardWhat},
		Terminates: true,
		Bench:      bench,
		Abbreviations: func(common string) string {
			return common + " @30.001s: a time on the run's clock, from its start (a row's expiry, say). " +
				"A statement is shown by its verb and table; an advisory lock's number is shown as K."
		},
	})
}

// start starts count servers on backend: one initdb serves them all
// (pgproc.StartMany copies the first's data directory).
func start(ctx context.Context, backend string, count int) ([]harness.StoreNode, error) {
	pgs, err := pgproc.StartMany(ctx, count, pgproc.Options{Backend: backend})
	if err != nil {
		return nil, err
	}
	out := make([]harness.StoreNode, len(pgs))
	for i, pg := range pgs {
		out[i] = &Node{NodeName: "n1", Server: pg}
	}
	return out, nil
}

// describe names the first server, and the others' addresses.
func describe(first harness.StoreNode, more []harness.StoreNode) string {
	line := first.(*Node).Server.Describe()
	var addrs []string
	for _, n := range more {
		pg := n.(*Node).Server
		addrs = append(addrs, fmt.Sprintf("%s:%d", pg.Host, pg.Port))
	}
	if len(addrs) > 0 {
		line += ", and " + strings.Join(addrs, ", ") + " for the cells that restart it or fail it over"
	}
	return line
}

// bench is PostgreSQL's part of locklab bench --stores: its three locks on
// one pool.
var bench = &harness.Bench{
	Row:        2,
	Strategies: []string{"pg-lock-table", "pg-for-update", "pg-advisory"},
	Open: func(ctx context.Context, n harness.StoreNode, contenders int) (locklab.Config, string, func(), error) {
		pg := n.(*Node).Server
		// Enough connections that no contender waits for one: a
		// pg-for-update holder keeps its own for the lease.
		pool, err := pgxpool.New(ctx, fmt.Sprintf("%s&pool_max_conns=%d", pg.DSN(), 2*contenders+4))
		if err != nil {
			return locklab.Config{}, "", nil, err
		}
		// Refused at once, rather than a contender at a time by the
		// server's "too many clients already".
		var maxConns int
		if err := pool.QueryRow(ctx, "SELECT current_setting('max_connections')::int").Scan(&maxConns); err != nil {
			pool.Close()
			return locklab.Config{}, "", nil, fmt.Errorf("PostgreSQL: reading max_connections: %w", err)
		}
		if need := 2*contenders + 4; need > maxConns {
			pool.Close()
			return locklab.Config{}, "", nil, &harness.BenchLimit{Msg: fmt.Sprintf(
				"the PostgreSQL server takes %d connections (max_connections), and --stores postgres opens up to 2 a contender and 4 more: give at most %d",
				maxConns, (maxConns-4)/2)}
		}
		return locklab.Config{Store: pool}, fmt.Sprintf("process 127.0.0.1:%d (%s)", pg.Port, pgproc.Version(pg.BinDir)), pool.Close, nil
	},
}
