package postgres

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/locklab/locklab/harness"
	"github.com/locklab/locklab/harness/harnesstest"
	"github.com/locklab/locklab/internal/tooling/dockerbox"
	"github.com/locklab/locklab/stores/postgres/pgproc"
	"github.com/locklab/locklab/stores/postgres/pgproc/pgtest"
	_ "github.com/locklab/locklab/strategies/pglock" // registers the postgres family
)

// TestPostgresStore runs catalog scenarios on the postgres family's locks,
// on a real PostgreSQL server, each statement a step, and checks the
// verdicts that follow from how each lock is built: the lock table judges
// expiry by the clients' clocks and releases blindly; the session locks
// (advisory, FOR UPDATE) have no TTL, end with their session, and are not
// replicated. pg-lock-table-sync's cells run with a synchronous standby
// beside the server, which its node starts for them.
func TestPostgresStore(t *testing.T) {
	if testing.Short() {
		t.Skip("explores schedules on PostgreSQL")
	}
	srv := pgtest.Start(t, pgproc.Options{})
	nodes := []harness.Node{&Node{NodeName: "n1", Server: srv}}
	for _, tc := range []struct {
		scenario, strategy string
		want               harness.Outcome
	}{
		{"stale-recovery", "pg-lock-table", harness.Safe},
		{"clock-skew", "pg-lock-table", harness.Violated},
		{"release-after-expiry", "pg-lock-table", harness.Violated},
		{"pause-past-ttl", "pg-lock-table", harness.Violated},
		{"crash-before-expire", "pg-lock-table", harness.Safe},
		{"pause-past-ttl", "pg-advisory", harness.Safe},
		{"crash-before-expire", "pg-advisory", harness.Safe},
		{"release-after-expiry", "pg-advisory", harness.Safe},
		{"partitioned-holder", "pg-advisory", harness.Violated},
		{"restart-loses-lock", "pg-advisory", harness.Violated},
		{"restart-loses-lock", "pg-lock-table", harness.Safe},
		// The lock table on a synchronous standby breaks as the lock table
		// does (sync_test.go: what the standby changes).
		{"clock-skew", "pg-lock-table-sync", harness.Violated},
		{"release-after-expiry", "pg-lock-table-sync", harness.Violated},
		{"crash-before-expire", "pg-lock-table-sync", harness.Safe},
		{"pause-past-ttl", "pg-for-update", harness.Safe},
		{"partitioned-holder", "pg-for-update", harness.Violated},
		{"clock-skew", "pg-for-update", harness.Safe},
	} {
		t.Run(tc.scenario+"/"+tc.strategy, func(t *testing.T) {
			cs, err := harness.Resolve(tc.scenario, tc.strategy)
			if err != nil {
				t.Fatal(err)
			}
			// A violation found is enough; SAFE is within the bound.
			max := 150
			if tc.want != harness.Safe {
				max = 3000
			}
			res, err := harness.Explore(context.Background(), harness.ExploreOptions{Case: cs, Nodes: nodes, MaxSchedules: max,
				StopAtFirst: tc.want != harness.Safe})
			if err != nil {
				t.Fatal(err)
			}
			got := res.Outcome
			if got != tc.want {
				msg := ""
				if res.Counterexample != nil {
					for _, e := range res.Counterexample.Events {
						msg += fmt.Sprintf("%d %s %v -> %s %v %v\n", e.Step, e.Label, e.Command, e.Reply, e.Keys, e.Notes)
					}
				}
				t.Fatalf("%s on %s: %s after %d schedules, want %s\n%s", tc.scenario, tc.strategy, got, res.Schedules, tc.want, msg)
			}
			t.Logf("%s after %d schedules (complete %v)", got, res.Schedules, res.Complete)
		})
	}
}

// TestPostgresCaseOnRedis: a postgres strategy on Redis nodes is refused
// before anything runs, and a Redis strategy on a PostgreSQL node too.
func TestPostgresCaseOnRedis(t *testing.T) {
	cs, err := harness.Resolve("stale-recovery", "pg-advisory")
	if err != nil {
		t.Fatal(err)
	}
	_, err = harness.Run(context.Background(), harness.RunOptions{Case: cs, Nodes: []harness.Node{harness.AddrNode{NodeName: "n1", NodeAddr: "127.0.0.1:1", NodeStore: "redis"}}})
	if err == nil {
		t.Fatal("a postgres strategy ran on a Redis node")
	}
	t.Log(err)
}

// TestPostgresFailover runs failover-loses-lock's cells on a primary with
// an asynchronous streaming standby: the holder acquires on the primary,
// the primary is killed, the standby (cut off since the run began) is
// promoted and the clients move to it. The lock table's row and the
// advisory lock are lost in the scenario's own schedule; the FOR UPDATE
// lock takes three statements to acquire, and its violation lies past the
// cell's PGFailoverSchedules, so the cell finds it in the known schedule
// it runs first; the schedule the full exploration finds is run here on
// its own. It runs on
// both of pgproc's backends (docker where an engine answers), with the
// same verdicts and schedule counts: in containers, where every server
// numbers its processes from 1, the backends of the primary that failed
// over must not be taken for the promoted server's.
func TestPostgresFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("promotes PostgreSQL standbys")
	}
	for _, be := range []string{pgproc.BackendProcess, pgproc.BackendDocker} {
		t.Run(be, func(t *testing.T) {
			if be == pgproc.BackendDocker {
				if _, err := dockerbox.Connect(context.Background()); err != nil {
					t.Skipf("docker backend: %v", err)
				}
			}
			testPostgresFailover(t, pgproc.Options{Backend: be})
		})
	}
}

func testPostgresFailover(t *testing.T, opts pgproc.Options) {
	srv := pgtest.Start(t, opts)
	n := &Node{NodeName: "n1", Server: srv}
	t.Cleanup(func() { n.Close() })
	nodes := []harness.Node{n}
	m, err := harness.Matrix(context.Background(), harness.MatrixOptions{
		Strategies:       []string{"pg-lock-table", "pg-for-update", "pg-advisory"},
		Scenarios:        []string{"failover-loses-lock"},
		Stores:           map[string][]harness.Node{Name: nodes},
		StorePreemptions: harness.StorePreemptions, StoreSchedules: harness.StoreSchedules,
	})
	if err != nil {
		t.Fatal(err)
	}
	// pg-for-update's violation lies beyond the cell's search: the cell
	// finds it in the schedule docs/postgres.md replays (Scenario.Known),
	// which it runs first.
	known := known["failover-loses-lock"]["pg-for-update"][0]
	for _, c := range m.Cells {
		t.Logf("%s: %s in %d schedules, %v: %s", c.Strategy, c.Outcome, c.Schedules, c.Elapsed.Round(time.Millisecond), c.Schedule)
		if c.Outcome != harness.Violated {
			t.Errorf("%s on failover-loses-lock: %s %q, want VIOLATED", c.Strategy, c.Outcome, c.Message)
		}
		if c.Strategy == "pg-for-update" && c.Schedule != known {
			t.Errorf("pg-for-update: counterexample %q, want the known %q", c.Schedule, known)
		}
	}
	if n.Primary() == srv {
		t.Error("the node's primary is still the first server: no failover ran")
	}
	n.mu.Lock()
	sb := n.standby
	n.mu.Unlock()
	if sb != nil {
		t.Error("the cell left a standby running")
	}

	cs, err := harness.Resolve("failover-loses-lock", "pg-for-update")
	if err != nil {
		t.Fatal(err)
	}
	h, err := harness.Run(context.Background(), harness.RunOptions{Case: cs, Nodes: nodes, Schedule: "c2 c2 c2 failover(n1) c1 c1 c1"})
	if err != nil {
		t.Fatal(err)
	}
	if h.Verdict.Outcome != harness.Violated {
		t.Errorf("pg-for-update, the primary failing over while c2 holds the row lock: %s, want VIOLATED", h.Verdict.Outcome)
	}
	if err := n.DropStandby(); err != nil {
		t.Error(err)
	}
}

// TestPostgresStoreHousekeeping checks what the store does between a
// schedule's steps and between schedules, on a real server: a client's
// closed session has ended on the server when Close returns, without the
// store asking the server (its socket saw the backend exit), and empty
// deletes the key's rows from a table a client created after the store
// listed the tables, and lists them again when one it listed is gone.
func TestPostgresStoreHousekeeping(t *testing.T) {
	if testing.Short() {
		t.Skip("needs PostgreSQL")
	}
	ctx := context.Background()
	srv := pgtest.Start(t, pgproc.Options{})
	s, err := newStore(&Node{NodeName: "n1", Server: srv}, false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.admin.Close() })

	cfg, err := pgx.ParseConfig(srv.DSN())
	if err != nil {
		t.Fatal(err)
	}
	var sock *pgSocket
	dial := cfg.DialFunc
	cfg.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		sock = &pgSocket{Conn: c, s: s, server: s.node.Primary()}
		return sock, nil
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	pid := conn.PgConn().PID()
	sock.pid.Store(pid)
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock(42)"); err != nil {
		t.Fatal(err)
	}
	if err := conn.Close(ctx); err != nil {
		t.Fatal(err)
	}
	var left int
	if err := s.admin.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE pid = $1", int32(pid)).Scan(&left); err != nil {
		t.Fatal(err)
	}
	if left != 0 {
		t.Errorf("backend %d is still on the server after its connection closed", pid)
	}
	s.mu.Lock()
	seen := s.gone[pid]
	s.mu.Unlock()
	if !seen {
		t.Errorf("the socket did not see backend %d end", pid)
	}

	count := func(table string) int {
		t.Helper()
		var n int
		if err := s.admin.QueryRow(ctx, "SELECT count(*) FROM "+table+" WHERE key = 'k'").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	exec := func(sql string) {
		t.Helper()
		if _, err := s.admin.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	s.Key("k")
	exec("CREATE TABLE locklab_hk_a (key text)")
	exec("INSERT INTO locklab_hk_a VALUES ('k'), ('other')")
	if err := s.Empty(ctx); err != nil {
		t.Fatal(err)
	}
	if n := count("locklab_hk_a"); n != 0 {
		t.Errorf("locklab_hk_a keeps %d rows of the key after empty", n)
	}
	// A table a client creates after the listing: the tracer tells the
	// store of the statement, as it does for a strategy's.
	create := "CREATE TABLE IF NOT EXISTS locklab_hk_b (key text)"
	exec(create)
	s.created(create)
	exec("INSERT INTO locklab_hk_a VALUES ('k')")
	exec("INSERT INTO locklab_hk_b VALUES ('k')")
	if err := s.Empty(ctx); err != nil {
		t.Fatal(err)
	}
	if a, b := count("locklab_hk_a"), count("locklab_hk_b"); a != 0 || b != 0 {
		t.Errorf("after empty, the key has %d rows in locklab_hk_a and %d in locklab_hk_b, want none", a, b)
	}
	var other int
	if err := s.admin.QueryRow(ctx, "SELECT count(*) FROM locklab_hk_a WHERE key = 'other'").Scan(&other); err != nil {
		t.Fatal(err)
	}
	if other != 1 {
		t.Errorf("empty deleted another key's row: %d left, want 1", other)
	}
	// A table listed, then gone: empty lists them again.
	exec("DROP TABLE locklab_hk_a")
	exec("INSERT INTO locklab_hk_b VALUES ('k')")
	if err := s.Empty(ctx); err != nil {
		t.Fatalf("empty after a listed table was dropped: %v", err)
	}
	if n := count("locklab_hk_b"); n != 0 {
		t.Errorf("locklab_hk_b keeps %d rows of the key after empty", n)
	}
}

// TestVersionedRowRefusesStaleWrite: on the -guarded scenarios the
// PostgreSQL resource is a row with a version column on the lock's server. The
// holder cut off (or paused) past its lock reads the version when it
// takes the lock; its successor writes first; its own UPDATE ... AND
// version = v then updates no row: the write is refused, and the run is
// SAFE where the plain scenario's stale write is accepted.
func TestVersionedRowRefusesStaleWrite(t *testing.T) {
	srv := pgtest.Start(t, pgproc.Options{})
	nodes := []harness.Node{&Node{NodeName: "n1", Server: srv}}
	for _, tc := range []struct{ scenario, strategy string }{
		{"partitioned-holder-guarded", "pg-advisory"},
		{"partitioned-holder-guarded", "pg-for-update"},
		{"partitioned-holder-guarded", "pg-lock-table"},
		{"pause-past-ttl-guarded", "pg-lock-table"},
	} {
		cs := harnesstest.Case(t, tc.scenario, tc.strategy)
		sched := cs.Scenario.Known[tc.strategy][0]
		h, err := harness.Run(context.Background(), harness.RunOptions{Case: cs, Nodes: nodes, Schedule: sched})
		if err != nil {
			t.Fatalf("%s on %s: %v", tc.strategy, tc.scenario, err)
		}
		refused := false
		for _, w := range h.Writes {
			if w.Client == 1 && w.Stale && !w.Accepted {
				refused = true
			}
		}
		if h.Verdict.Outcome != harness.Safe || !refused {
			t.Errorf("%s on %s (%s): %v, c1's stale write refused: %v\n%+v", tc.strategy, tc.scenario, sched, h.Verdict, refused, h.Writes)
		}
	}
}

// TestTerminateEndsSessionLocks: terminate(c1) ends the holder's sessions
// from the server's side. A lock held in a session ends with it, and the
// paused holder's write after its successor's is accepted (no fence);
// the lock table's row outlives the session, and the successor is
// refused. The -guarded resource refuses the stale write.
func TestTerminateEndsSessionLocks(t *testing.T) {
	srv := pgtest.Start(t, pgproc.Options{})
	nodes := []harness.Node{&Node{NodeName: "n1", Server: srv}}
	for _, tc := range []struct {
		scenario, strategy string
		want               harness.Outcome
	}{
		{"pause-session-killed", "pg-advisory", harness.Violated},
		{"pause-session-killed", "pg-lock-table", harness.Safe},
		{"pause-session-killed-guarded", "pg-advisory", harness.Safe},
	} {
		cs := harnesstest.Case(t, tc.scenario, tc.strategy)
		sched := "c1 c1 terminate(c1) c2 c2 c1"
		h, err := harness.Run(context.Background(), harness.RunOptions{Case: cs, Nodes: nodes, Schedule: sched})
		if err != nil {
			t.Fatalf("%s on %s: %v", tc.strategy, tc.scenario, err)
		}
		if h.Verdict.Outcome != tc.want {
			t.Errorf("%s on %s (%s): %v, want %v", tc.strategy, tc.scenario, sched, h.Verdict, tc.want)
		}
		ended := false
		for _, e := range h.Events {
			ended = ended || slices.ContainsFunc(e.Notes, func(n string) bool { return strings.HasPrefix(n, "the server ended c1's") })
		}
		if !ended {
			t.Errorf("%s on %s: no event says the server ended c1's sessions", tc.strategy, tc.scenario)
		}
	}
	// The scenarios are for stores whose server ends sessions.
	for _, st := range []string{"set-nx-px", "etcd-lease", "zk-recipe"} {
		if cs, err := harness.Resolve("pause-session-killed", st); err == nil && cs.Scenario.AppliesTo(cs.Strategy) {
			t.Errorf("pause-session-killed applies to %s", st)
		}
	}
}

// TestSessionReplacedOnPostgres: session-replaced on pg-advisory. The
// holder is cut off, the server ends its session and the advisory lock
// with it, c2 takes the lock and writes; back, c1 writes (no fence tells
// the resource), and its release on the connection the server ended is
// the first word it gets: not held.
func TestSessionReplacedOnPostgres(t *testing.T) {
	srv := pgtest.Start(t, pgproc.Options{})
	nodes := []harness.Node{&Node{NodeName: "n1", Server: srv}}
	cs := harnesstest.Case(t, "session-replaced", "pg-advisory")
	h, err := harness.Run(context.Background(), harness.RunOptions{Case: cs, Nodes: nodes,
		Schedule: "c1 isolate(c1) time c2 c2 rejoin(c1) c1 c1 c2"})
	if err != nil {
		t.Fatal(err)
	}
	if h.Verdict.Outcome != harness.Violated || !harnesstest.Noted(h, "c2 acquired") || !harnesstest.Noted(h, "c1 release: not held") {
		t.Fatalf("%v, want VIOLATED with c2 acquired and c1's release not held\n%s", h.Verdict, h.Schedule)
	}
}

// TestLostReplyEndsTheSession: a statement carried out whose answer is
// lost (lose) drops its connection. The advisory lock it took ends with
// the session, and c1's retry acquires at once; the lock table's row
// stays, c1's retry meets it and is refused, as c2 is, and the probe a
// TTL later acquires.
func TestLostReplyEndsTheSession(t *testing.T) {
	srv := pgtest.Start(t, pgproc.Options{})
	nodes := []harness.Node{&Node{NodeName: "n1", Server: srv}}
	for _, tc := range []struct{ strategy, schedule, retry string }{
		{"pg-advisory", "lose(c1) c1 c1", "c1 acquired"},
		{"pg-lock-table", "lose(c1) c1 c1 c1 c2 c2", "c1 refused"},
	} {
		cs := harnesstest.Case(t, "lost-reply", tc.strategy)
		h, err := harness.Run(context.Background(), harness.RunOptions{Case: cs, Nodes: nodes, Schedule: tc.schedule})
		if err != nil {
			t.Fatalf("%s: %v", tc.strategy, err)
		}
		if h.Verdict.Outcome != harness.Safe || !harnesstest.Noted(h, "c1 acquire failed") || !harnesstest.Noted(h, tc.retry) {
			t.Errorf("%s (%s): %v, want SAFE with %q\n%s", tc.strategy, tc.schedule, h.Verdict, tc.retry, h.Schedule)
		}
		if e := h.Events[1]; !slices.Contains(e.Notes, "the reply is lost: c1's connection drops") || strings.Contains(e.Reply, "error") {
			t.Errorf("%s: the lost statement's event: reply %q, notes %q", tc.strategy, e.Reply, e.Notes)
		}
	}
}

// TestPostgresWorkersAgree: an exploration on PostgreSQL runs the same
// schedules to the same verdict and counterexample on one worker as on
// four, each worker locking a key of its own (its rows, its advisory
// number) on the one server.
func TestPostgresWorkersAgree(t *testing.T) {
	if testing.Short() {
		t.Skip("explores schedules on PostgreSQL")
	}
	srv := pgtest.Start(t, pgproc.Options{})
	nodes := []harness.Node{&Node{NodeName: "n1", Server: srv}}
	harnesstest.WorkersAgree(t, nodes, "pg-lock-table", 2, "clock-skew", "crash-before-expire")
	harnesstest.WorkersAgree(t, nodes, "pg-advisory", 2, "partitioned-holder")
}
