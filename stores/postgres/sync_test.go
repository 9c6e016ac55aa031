package postgres

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/locklab/locklab/harness"
	"github.com/locklab/locklab/stores/postgres/pgproc"
	"github.com/locklab/locklab/stores/postgres/pgproc/pgtest"
	"github.com/locklab/locklab/strategies/pglock"
)

// TestPostgresSyncStandby runs the lock table's two columns through a
// failover and restarts on one node, a schedule each. pg-lock-table's
// asynchronous standby, cut off since the run began, has lost the row when
// it is promoted, and C2 acquires too: VIOLATED, the check that passes the
// synchronous column is one that fails. pg-lock-table-sync's standby is
// synchronous: the promoted server has C1's row and C2 is refused by it,
// not by the strategy's check of its settings (the promoted server has a
// synchronous standby of its own). Through a restart of the primary the
// row stays, and a commit after it (C2's INSERT, once C1 has released)
// waits until the standby has connected again and then succeeds.
func TestPostgresSyncStandby(t *testing.T) {
	if testing.Short() {
		t.Skip("promotes PostgreSQL standbys")
	}
	srv := pgtest.Start(t, pgproc.Options{})
	n := &Node{NodeName: "n1", Server: srv}
	t.Cleanup(func() { n.Close() })
	nodes := []harness.Node{n}
	// A store of the synchronous column kept open across the runs, as a
	// worker of another cell of it would be: the node keeps its
	// synchronous standby until the last such store closes.
	keep, err := newStore(n, true)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		scenario, strategy, schedule string
		want                         harness.Outcome
		notes                        []string
	}{
		{"failover-loses-lock", "pg-lock-table", "c1 failover(n1) c2", harness.Violated, []string{"c1 acquired", "c2 acquired"}},
		{"failover-loses-lock", pglock.LockTableSyncName, "c1 failover(n1) c2 c2", harness.Safe, []string{"c1 acquired", "c2 refused"}},
		{"restart-loses-lock", pglock.LockTableSyncName, "c1 c1 restart(n1) c2 c2", harness.Safe, []string{"c1 acquired", "c2 refused"}},
		{"restart-loses-lock", pglock.LockTableSyncName, "c1 c1 c1 restart(n1) c2", harness.Safe, []string{"c1 acquired", "c1 released", "c2 acquired"}},
	} {
		cs, err := harness.Resolve(tc.scenario, tc.strategy)
		if err != nil {
			t.Fatal(err)
		}
		h, err := harness.Run(context.Background(), harness.RunOptions{Case: cs, Nodes: nodes, Schedule: tc.schedule})
		if err != nil {
			t.Fatalf("%s on %s, %s: %v", tc.scenario, tc.strategy, tc.schedule, err)
		}
		var notes []string
		for _, e := range h.Events {
			notes = append(notes, e.Notes...)
		}
		t.Logf("%s on %s, %s: %s; %s", tc.scenario, tc.strategy, tc.schedule, h.Verdict.Outcome, strings.Join(notes, "; "))
		if h.Verdict.Outcome != tc.want {
			t.Errorf("%s on %s, %s: %s, want %s", tc.scenario, tc.strategy, tc.schedule, h.Verdict.Outcome, tc.want)
		}
		for _, want := range tc.notes {
			if !slices.Contains(notes, want) {
				t.Errorf("%s on %s, %s: no %q among %q", tc.scenario, tc.strategy, tc.schedule, want, notes)
			}
		}
	}
	primary := n.Primary()
	n.mu.Lock()
	synced := n.synced == primary && n.standby != nil
	n.mu.Unlock()
	if primary == srv || !synced {
		t.Errorf("after the failovers, the node's primary is the first server (%v) or has no synchronous standby of its own (%v)", primary == srv, !synced)
	}
	// The last store of the column closed, the node is as the other
	// columns find it: no standby, and commits that wait for none.
	if err := keep.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	n.mu.Lock()
	kept := n.standby != nil || n.synced != nil
	n.mu.Unlock()
	if kept {
		t.Error("after the synchronous column's last store closed, the node keeps its standby or its synchronous primary")
	}
	conn, err := pgx.Connect(context.Background(), primary.DSN())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var names string
	if err := conn.QueryRow(context.Background(), "SHOW synchronous_standby_names").Scan(&names); err != nil {
		t.Fatal(err)
	}
	if names != "" {
		t.Errorf("after the synchronous column's last store closed, synchronous_standby_names is %q", names)
	}
}
