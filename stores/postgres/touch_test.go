package postgres

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/locklab/locklab/harness"
	"github.com/locklab/locklab/harness/harnesstest"
	"github.com/locklab/locklab/stores/postgres/pgproc"
	"github.com/locklab/locklab/stores/postgres/pgproc/pgtest"
	"github.com/locklab/locklab/strategies/pglock"
)

// TestPostgresTouches: every statement of the three locks, and the
// versioned row's, is declared with what it reads and writes, on a real
// server: in the scenarios that take, refuse, recover and release them,
// and in the guarded ones, whose known schedules cut the holder off;
// and a schedule run again declares the same names.
func TestPostgresTouches(t *testing.T) {
	srv := pgtest.Start(t, pgproc.Options{})
	nodes := []harness.Node{&Node{NodeName: "n1", Server: srv}}
	seen := map[string]bool{}
	for _, strategy := range []string{"pg-lock-table", "pg-for-update", "pg-advisory"} {
		for _, scenario := range []string{"stale-recovery", "partitioned-holder-guarded"} {
			cs := harnesstest.Case(t, scenario, strategy)
			schedule := ""
			if known := cs.Scenario.Known[strategy]; len(known) > 0 {
				schedule = known[0]
			}
			// Twice: the same schedule declares the same names in every run.
			var first []*harness.Touch
			for range 2 {
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
				h, err := harness.Run(ctx, harness.RunOptions{Case: cs, Nodes: nodes, Schedule: schedule})
				cancel()
				if err != nil {
					t.Fatal(err)
				}
				var touched []*harness.Touch
				for _, e := range h.Events {
					if e.Client == 0 || e.Node == 0 {
						continue // a time step or fault, a local step
					}
					touched = append(touched, e.Touch)
					if len(e.Command) > 0 {
						seen[e.Command[0]] = true
					}
					if e.Touch == nil {
						t.Errorf("%s on %s: step %d (%s %v) declares nothing\n%s", strategy, scenario, e.Step, e.Label, e.Command, timeline(h))
					}
				}
				if first == nil {
					first = touched
				} else if !reflect.DeepEqual(first, touched) {
					t.Errorf("%s on %s: the same schedule declares other names in another run", strategy, scenario)
				}
			}
		}
	}
	for _, s := range []string{"INSERT lock_table", "DELETE lock_table expired", "DELETE lock_table", "INSERT lock_rows or nothing",
		"BEGIN", "SELECT lock_rows FOR UPDATE NOWAIT", "COMMIT", "ROLLBACK", "pg_try_advisory_lock", "pg_advisory_unlock",
		"SELECT resource", "UPDATE resource"} {
		if !seen[s] {
			t.Errorf("no %s among the statements: %v", s, seen)
		}
	}
}

// timeline is a history's events, one a line, for a failure's message.
func timeline(h *harness.History) string {
	out := ""
	for _, e := range h.Events {
		out += fmt.Sprintf("%d %s %v -> %s %v\n", e.Step, e.Label, e.Command, e.Reply, e.Notes)
	}
	return out
}

// The statements the locks send, as pglock and guarded.go write them.
var (
	sqlInsertLock = "INSERT INTO " + pglock.LockTableName + " (key, token, expires_at) VALUES ($1, $2, $3)"
	sqlExpired    = "DELETE FROM " + pglock.LockTableName + " WHERE key = $1 AND expires_at < $2"
	sqlDeleteLock = "DELETE FROM " + pglock.LockTableName + " WHERE key = $1"
	sqlInsertRow  = "INSERT INTO " + pglock.RowTableName + " (key) VALUES ($1) ON CONFLICT DO NOTHING"
	sqlForUpdate  = "SELECT key FROM " + pglock.RowTableName + " WHERE key = $1 FOR UPDATE NOWAIT"
	sqlTry        = "SELECT pg_try_advisory_lock($1)"
	sqlUnlock     = "SELECT pg_advisory_unlock($1)"
	sqlRead       = "SELECT version FROM " + ResourceTableName + " WHERE key = $1"
	sqlWrite      = "UPDATE " + ResourceTableName + " SET version = version + 1 WHERE key = $1 AND version = $2"
)

// on declares sql with args on session h, whose transaction is open when
// inTx, and notes its answer (err, and the boolean it returned).
func on(h *pgSession, inTx bool, sql string, value string, err error, args ...any) *harness.Touch {
	s := classify(sql, args)
	t := h.declare(s, inTx)
	h.answered(s, err, value)
	return t
}

// The declarations say what commutes: statements on two keys' rows, two
// advisory locks, two reads of a row; a transaction's end conflicts with
// what it locked, and a session's statements with the advisory lock it
// holds, for a failed one ends the session.
func TestPostgresTouchesConflict(t *testing.T) {
	a, b := advisoryID("lock:a"), advisoryID("lock:b")
	insA := on(newSession(), false, sqlInsertLock, "", nil, "lock:a", "t", time.Now())
	insB := on(newSession(), false, sqlInsertLock, "", nil, "lock:b", "t", time.Now())
	expA := on(newSession(), false, sqlExpired, "", nil, "lock:a", time.Now())
	delB := on(newSession(), false, sqlDeleteLock, "", nil, "lock:b")
	readA, writeA := on(newSession(), false, sqlRead, "", nil, "lock:a"), on(newSession(), false, sqlWrite, "", nil, "lock:a", int64(0))
	readB := on(newSession(), false, sqlRead, "", nil, "lock:b")
	whole := on(newSession(), false, "DELETE FROM "+pglock.LockTableName, "", nil)
	rowA := on(newSession(), false, sqlInsertRow, "", nil, "lock:a")

	// c1 locks a's row in a transaction and commits; c2 locks b's.
	c1 := newSession()
	begin := on(c1, false, "begin", "", nil)
	forA1 := on(c1, true, sqlForUpdate, "", nil, "lock:a")
	commit := on(c1, true, "commit", "", nil)
	after := on(c1, false, sqlRead, "", nil, "lock:b")
	forA2 := on(newSession(), true, sqlForUpdate, "", nil, "lock:a")
	forB := on(newSession(), true, sqlForUpdate, "", nil, "lock:b")
	rollbackB := func() *harness.Touch {
		h := newSession()
		on(h, false, "BEGIN", "", nil)
		on(h, true, sqlForUpdate, "", errors.New("55P03 lock not available"), "lock:b")
		return on(h, true, "ROLLBACK", "", nil)
	}()

	// c3 holds a's advisory lock: its next statement, whatever it is,
	// may end its session and release it; after its unlock, it holds none.
	c3 := newSession()
	tryA := on(c3, false, sqlTry, "true", nil, a)
	heldRead := on(c3, false, sqlRead, "", nil, "lock:b")
	unlockA := on(c3, false, sqlUnlock, "true", nil, a)
	freedRead := on(c3, false, sqlRead, "", nil, "lock:b")
	tryB := on(newSession(), false, sqlTry, "true", nil, b)
	refused := newSession()
	on(refused, false, sqlTry, "false", nil, a)
	refusedRead := on(refused, false, sqlRead, "", nil, "lock:b")

	for _, tc := range []struct {
		name string
		t, u *harness.Touch
		want bool
	}{
		{"insert a, insert b", insA, insB, false},
		{"insert a, insert a", insA, insA, true},
		{"insert a, delete expired a", insA, expA, true},
		{"delete b, insert a", delB, insA, false},
		{"delete b, insert b", delB, insB, true},
		{"the whole table, insert a", whole, insA, true},
		{"the whole table, read a's version", whole, readA, false},
		{"read a's version, read a's version", readA, readA, false},
		{"read a's version, read b's version", readA, readB, false},
		{"read a's version, write it", readA, writeA, true},
		{"write a's version, read b's", writeA, readB, false},
		{"insert a's row, for update a", rowA, forA2, true},
		{"insert a's row, for update b", rowA, forB, false},
		{"begin, for update a", begin, forA2, false},
		{"for update a, for update a", forA1, forA2, true},
		{"for update a, for update b", forA1, forB, false},
		{"commit of a's lock, for update a", commit, forA2, true},
		{"commit of a's lock, for update b", commit, forB, false},
		{"commit of a's lock, insert a's row", commit, insA, false},
		{"a statement after the commit, for update a", after, forA2, false},
		{"rollback of b's attempt, for update b", rollbackB, forB, true},
		{"rollback of b's attempt, commit of a's lock", rollbackB, commit, false},
		{"try a, try b", tryA, tryB, false},
		{"try a, try a", tryA, tryA, true},
		{"unlock a, try a", unlockA, tryA, true},
		{"unlock a, try b", unlockA, tryB, false},
		{"a statement of a's holder, try a", heldRead, tryA, true},
		{"a statement of a's holder, try b", heldRead, tryB, false},
		{"a statement after the unlock, try a", freedRead, tryA, false},
		{"a statement after a refused try, try a", refusedRead, tryA, false},
		{"a row lock, an advisory lock", forA1, tryA, false},
	} {
		harnesstest.Conflict(t, tc.name, tc.t, tc.u, tc.want)
	}
}

// A statement the store does not recognise is declared by no Touch, and
// conflicts with everything, even a step that touches nothing; so do the
// later statements of its session, and of its transaction.
func TestPostgresUndeclared(t *testing.T) {
	for _, tc := range []struct {
		sql  string
		args []any
	}{
		{"SELECT 1", nil},
		{"SELECT count(*) FROM " + pglock.LockTableName, nil},
		{"SELECT token FROM locklab_other WHERE key = $1", []any{"k"}},
		{"DELETE FROM " + pglock.LockTableName + " WHERE key = $1 OR key = $2", []any{"a", "b"}},
		{"UPDATE " + pglock.LockTableName + " SET key = $2 WHERE key = $1", []any{"a", "b"}},
		{"INSERT INTO " + pglock.LockTableName + " (key, token) VALUES ('a', $1)", []any{"t"}},
		{sqlTry, []any{"not a number"}},
		{sqlDeleteLock, []any{42}},
		{"BEGIN ISOLATION LEVEL SERIALIZABLE", nil},
		{"SELECT pg_try_advisory_lock($1); SELECT 1", []any{int64(1)}},
	} {
		h := newSession()
		u := on(h, false, tc.sql, "", nil, tc.args...)
		harnesstest.Undeclared(t, fmt.Sprintf("%q", tc.sql), u)
		if later := on(h, false, "BEGIN", "", nil); later != nil {
			t.Errorf("%q: the session's next statement declared %+v", tc.sql, *later)
		}
	}
	// The statements that are recognised, in any case and spacing.
	for _, sql := range []string{"begin", "START TRANSACTION ISOLATION LEVEL REPEATABLE READ", "end", "rollback",
		"select   pg_advisory_lock(42)", "SELECT pg_advisory_xact_lock($1::bigint, 7)", "SELECT pg_advisory_unlock_all()",
		"delete from " + strings.ToUpper(pglock.LockTableName) + " where key = $2;"} {
		if on(newSession(), false, sql, "", nil, int64(3), "k") == nil {
			t.Errorf("%q: undeclared", sql)
		}
	}
}

// TestTimeStepsCommute: a time step on PostgreSQL touches what the
// sessions of the clients cut off hold, their reach, the clock and the
// holders (TimeTouch), and commutes with the steps that touch none of
// it. On cells of the locks whose scenarios take time steps, the holder
// cut off in some, the reduced walk reaches the plain walk's verdict with
// a counterexample as short, and its runs fall into as many traces as the
// plain walk's (up to the violation, where a run stops at one): it
// reaches every one. In all it runs fewer schedules. With the cut-off
// sessions left out of the footprint (a time step that ends nothing), or
// only the names they hold, the reduced walk misses traces of
// pg-for-update × partitioned-holder; with the clock left out, traces of
// pg-lock-table's cells (docs/reduction.md, "Time").
func TestTimeStepsCommute(t *testing.T) {
	if testing.Short() {
		t.Skip("explores schedules on PostgreSQL twice")
	}
	srv := pgtest.Start(t, pgproc.Options{})
	harnesstest.ReductionKeepsTraces(t, []harness.Node{&Node{NodeName: "n1", Server: srv}},
		harnesstest.Cell{Strategy: "pg-advisory", Scenario: "partitioned-holder-guarded"},
		harnesstest.Cell{Strategy: "pg-advisory", Scenario: "stale-recovery"},
		harnesstest.Cell{Strategy: "pg-advisory", Scenario: "pause-in-release"},
		harnesstest.Cell{Strategy: "pg-lock-table", Scenario: "stale-recovery"},
		harnesstest.Cell{Strategy: "pg-lock-table", Scenario: "partitioned-holder"},
		harnesstest.Cell{Strategy: "pg-lock-table", Scenario: "release-after-expiry"},
		harnesstest.Cell{Strategy: "pg-lock-table", Scenario: "session-replaced"},
		harnesstest.Cell{Strategy: "pg-for-update", Scenario: "release-after-expiry"},
		harnesstest.Cell{Strategy: "pg-for-update", Scenario: "partitioned-holder"})
}
