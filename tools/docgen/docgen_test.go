package docgen_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/locklab/locklab/harness"
	"github.com/locklab/locklab/stores"
	"github.com/locklab/locklab/tools/docgen"
)

// TestDocsUpToDate regenerates every generated region of docs/*.md and
// README.md on real redis-server processes and fails when the checked-in
// files differ from what the current code produces. The verdict matrix it
// runs for the docs is then checked against the design's expectations: the
// matrix runs once for both.
//
// What it replays depends on the run. -short (make test): every region
// but the matrix. The full run (CI, make test-long): the matrix of the
// Redis strategies too, every cell to the end of its bound (seconds). With
// LOCKLAB_DOCS_MATRIX=all (make test-matrix): the whole matrix, the other
// stores' rows included, whose cells fault servers and wait for their
// elections, one cell at a time on each store's servers: 25 to 50 minutes
// on 2 cores, more than a CI run can give one test.
func TestDocsUpToDate(t *testing.T) {
	whole := os.Getenv(matrixEnv) == "all"
	if v := os.Getenv(matrixEnv); v != "" && !whole {
		t.Fatalf("%s=%q: the one value it takes is all", matrixEnv, v)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Minute) // the whole matrix: about an hour on 2 cores
	defer cancel()
	nodes, stop, err := docgen.StartNodes(ctx)
	require.NoError(t, err)
	defer stop()
	others, stopOthers, err := docgen.StartStores(ctx)
	require.NoError(t, err)
	defer stopOthers()

	g := &docgen.Generator{Nodes: nodes, Stores: others, Root: "../.."}
	switch {
	case testing.Short():
		g.Keep = func(d docgen.Directive) bool { return d.Kind == "matrix" }
	case !whole:
		g.RedisMatrix = true
		g.Keep = func(d docgen.Directive) bool { return d.Kind == "matrix" && slices.Contains(d.Args, "stores") }
	}
	files, err := docgen.Files(g.Root)
	require.NoError(t, err)
	regions := 0
	for _, f := range files {
		src, err := readFile(f)
		require.NoError(t, err)
		rs, err := docgen.Regions(src)
		require.NoError(t, err, f)
		regions += len(rs)
	}
	require.NotZero(t, regions, "no generated regions found in %v", files)

	changes, err := g.Update(ctx, false)
	require.NoError(t, err)
	for _, c := range changes {
		assert.Failf(t, "docs out of date", "%s is out of date: run `make docs` and commit the result\n%s", c.Path, docgen.FirstDifference(c.Old, c.New))
	}
	t.Logf("%d generated regions in %d files", regions, len(files))

	if testing.Short() {
		t.Log("-short: the matrix regions and the matrix's match with the design are left to the full run")
		return
	}
	if !whole {
		t.Logf("the other stores' matrix regions and rows are left to %s=all (make test-matrix)", matrixEnv)
	}
	m, err := g.Matrix(ctx) // the run the docs were generated from
	require.NoError(t, err)
	matchesDesign(t, m, whole)
	pagesAgreeWithMatrix(t, g.Runs, m)
}

// matrixEnv set to "all" makes TestDocsUpToDate replay the whole matrix.
const matrixEnv = "LOCKLAB_DOCS_MATRIX"

// pagesAgreeWithMatrix fails when a page shows a run whose verdict its
// matrix cell contradicts: a failure the cell calls SAFE, or another kind
// of failure than the cell's.
func pagesAgreeWithMatrix(t *testing.T, runs []docgen.PageRun, m *harness.MatrixResult) {
	t.Helper()
	require.NotEmpty(t, runs, "the pages show no run")
	for _, r := range runs {
		if !r.Verdict.Failed() {
			continue
		}
		c, ok := m.Cell(r.Strategy, r.Scenario)
		if !ok {
			continue // a scenario the matrix leaves out
		}
		assert.Equal(t, r.Verdict.Outcome, c.Outcome,
			"%s on %s: a page shows %v (schedule %q), and its matrix cell says %s after %d schedules",
			r.Strategy, r.Scenario, r.Verdict, r.Schedule, c.Outcome, c.Schedules)
	}
}

// TestPinnedSchedulesAreKnown: every schedule a page pins for a run is the
// scenario's own or one of the Known schedules of that strategy's store
// for the scenario (harness.Driver.Known), so that the strategy's matrix
// cell runs it before its search.
func TestPinnedSchedulesAreKnown(t *testing.T) {
	files, err := docgen.Files("../..")
	require.NoError(t, err)
	pinned := 0
	for _, f := range files {
		src, err := readFile(f)
		require.NoError(t, err)
		rs, err := docgen.Regions(src)
		require.NoError(t, err, f)
		for _, r := range rs {
			d := r.Directive
			text, ok := d.Options["schedule"]
			if !ok || (d.Kind != "run" && d.Kind != "timeline" && d.Kind != "mermaid") {
				continue
			}
			pinned++
			cs, err := harness.Resolve(d.Args[0], d.Args[1])
			require.NoError(t, err, "%s:%d", f, r.Line)
			sc := cs.Scenario
			assert.True(t, text == sc.Schedule || slices.Contains(sc.Known[d.Args[1]], text),
				"%s:%d pins %q for %s on %s: add it to the Known schedules of the strategy's store (its Driver's Known: stores/<store>/)",
				f, r.Line, text, d.Args[1], d.Args[0])
		}
	}
	require.NotZero(t, pinned, "no page pins a schedule")
}

// expected is the verdict matrix the design's strategy tables predict (or,
// where the runs refute a prediction, what docs/postgres.md explains), one
// letter per scenario in this order: S safe, V violated, D deadlock,
// T starvation, - n/a. lost-reply (the fourth): a two-command acquire
// whose first reply is lost never sends its EXPIRE, and setnx-forever's
// release gives up on a lost GET, leaving a key without a TTL; on
// ZooKeeper a retried create meets the client's own node (zk-ephemeral)
// and zk.Lock's wait leaves its node behind (go-zookeeper#229); the
// others lose a TTL at most. pause-in-release (the seventh) reads as
// release-after-expiry on every row: where time alone expires the lock
// the pause adds nothing, and where a session's expiry frees it (etcd,
// ZooKeeper) the releases delete their own key or node by name, and
// zk-ephemeral's delete at the version it read fails with the connection
// its session's end closed. session-replaced (the twenty-second): the
// holder is cut off past its session and comes back, against a resource
// that checks fences, so the verdict is the fence's: C1's stale write is
// refused where the lock's fence grows (etcd's revisions, ZooKeeper's
// czxids) and taken where the lock has none (zk.Lock's, PostgreSQL's);
// the scenario has no meaning for a Redis key with a TTL. The -guarded
// scenarios (the sixth, tenth and thirteenth) write with one request the
// lock's own store refuses once the writer lost the lock: refused where
// what the lock hands the user tells one hold from the next (a random
// token, a stamp, etcd's create revision, zk-recipe's own node), let
// through where it does not (incr-expire's 1, zk-ephemeral's fixed path
// at version 0); setnx-forever's LOCK_FOREVER tells no holder apart
// either, but no TTL frees its lock to a second holder. Redlock's majority
// and zk.Lock's hidden node give the guard nothing: n/a.
var (
	expectedScenarios = "clock-skew crash-before-expire failover-loses-lock lost-reply partitioned-holder partitioned-holder-guarded " +
		"pause-in-release pause-past-ttl pause-past-ttl-fenced pause-past-ttl-guarded pause-session-killed pause-session-killed-fenced " +
		"pause-session-killed-guarded redlock-clock-jump redlock-minority-down redlock-pause redlock-restart " +
		"redlock-restart-delayed redlock-restart-fsync release-after-expiry restart-loses-lock " +
		"session-replaced stale-recovery stale-recovery-getset ttl-pushed-by-waiters waiter-lease-expires member-loses-data"
	// The last column, member-loses-data, is a consensus cluster's
	// story: n/a where the lock lives on one server (Redis, PostgreSQL);
	// on etcd and ZooKeeper the emptied member and the lagging one lose
	// the acknowledged lock.
	expected = map[string]string{
		// Every single-node lock dies with its server's memory
		// (restart-loses-lock). C1/C2 and clock skew; blind DEL after
		// expiry.
		"setnx-del": "V S V S V S V V V S - - - - - - - - - V V - V V S - -",
		// GETSET closes C1/C2 but not clock skew or the release after expiry.
		"setnx-getset": "V S V S V S V V V S - - - - - - - - - V V - S S S - -",
		// The SETNX page's remedy for the release (check the own stamp,
		// then GET-compare-DEL in one script) makes the late release
		// safe; the client clocks still decide expiry.
		"setnx-getset-lua": "V S V S V S S V V S - - - - - - - - - S V - S S S - -",
		// LOCK_FOREVER: a crashed holder locks everyone out for good. With
		// no expiry there is no TTL to run past: the paused, the cut-off
		// and the late-releasing holder all still hold the lock.
		"setnx-forever": "S D V D S S S S S S - - - - - - - - - S V - S S D - -",
		// A crash between INCR and EXPIRE: deadlock.
		"incr-expire":     "S D V D V V V V V V - - - - - - - - - V V - S S S - -",
		"incr-expire-lua": "S S V S V V V V V V - - - - - - - - - V V - S S S - -",
		// Failed tries push the TTL: starvation.
		"incr-expire-multi": "S S V S V V V V V V - - - - - - - - - V V - S S T - -",
		"setnx-expire":      "S D V D V S V V V S - - - - - - - - - V V - S S S - -",
		// EXPIRE after every SETNX, a failed one too: the waiters push the
		// TTL (starvation). A crash between the two is no deadlock: the
		// next refused try's EXPIRE gives the orphaned key its TTL.
		"setnx-expire-always": "S S V S V S V V V S - - - - - - - - - V V - S S T - -",
		"set-nx-px-del":       "S S V S V S V V V S - - - - - - - - - V V - S S S - -",
		"set-nx-px-getdel":    "S S V S V S V V V S - - - - - - - - - V V - S S S - -",
		// Safe on one node without pauses; a pause past the TTL is caught
		// only by a resource that checks the fence; failover loses it.
		"set-nx-px": "S S V S V S S V S S - - - - - - - - - S V - S S S - -",
		// WAIT for the replica: the failover to the replica that
		// acknowledged keeps the lock; a restart without persistence
		// loses it all the same.
		"set-nx-px-wait": "S S S S V S S V S S - - - - - - - - - S V - S S S - -",
		// Re-entry and a watchdog change nothing of set-nx-px's failures,
		// and without a fence number the fenced pause is lost too.
		"hash-reentrant": "S S V S V S S V V S - - - - - - - - - S V - S S S - -",
		// Every story told for one node has its verdict on three: a node
		// that forgets a key it granted (restart without persistence,
		// failover to a replica that missed it), a clock jump on one node
		// and a client pause past the validity break Redlock; a restart
		// delayed past the TTL or replayed from an fsynced append-only
		// file, a node cut off during the race, a crash mid-acquire, a
		// late release (compare-and-delete) and racing recoverers do not.
		"redlock": "S S V S V - S V V - - - - V S V V S S S V - S S S - -",
		// The lock table: expiry by the clients' clocks and a blind
		// release; its recovery's DELETE re-checks the expiry on the row,
		// so the C1/C2 race is closed; no fence. Its row reaches the
		// standby asynchronously: the promoted standby, cut off during
		// the run, never saw it. A row with a version column refuses the
		// stale write of the paused or cut-off holder (the -guarded
		// scenarios), but not that of a holder whose lock expired before
		// it read the version (docs/postgres.md).
		"pg-lock-table": "V S V S V V V V V S S S S - - - - - - V S V S - S - -",
		// Session locks: no TTL, so a pause is waited out; a partition
		// the server detects, a restart or a failover ends the session
		// and the lock; the version column refuses the stale writes of
		// both -guarded scenarios. A server that ends a paused holder's
		// session (pause-session-killed) ends its lock too, and no fence
		// tells the stale write; the lock table's row outlives the session.
		// pg-for-update's partitioned holder needs isolate
		// and time after its three-statement acquire, and its failover a
		// promotion after it: deeper than the cell's search goes, so the
		// cell finds both in the schedules docs/postgres.md replays.
		"pg-for-update": "S S V S V S S S S S V V S - - - - - - S V V S - S - -",
		"pg-advisory":   "S S V S V S S S S S V V S - - - - - - S V V S - S - -",
		// Jepsen's etcd 3.4.3: a holder paused or cut off past its lease
		// works beside its successor; the revision fences it; the lock
		// survives the leader's restart, and its death (the failover to
		// the new leader the others elect).
		"etcd-lease": "S S S S V S S V S S - - - - - - - - - S S S S - S - V",
		// Mutex.Lock on a kept-alive session: etcd-lease's verdicts; a
		// waiter whose lease runs out while it waits reads its own key
		// back after the wait and is refused (ErrSessionExpired).
		"etcd-mutex": "S S S S V S S V S S - - - - - - - - - S S S S - S S V",
		// ZooKeeper's locks as etcd's: a session that expires while its
		// holder is paused or cut off frees the lock beside it, the czxid
		// fences it, a leader's death or restart loses nothing; but
		// go-zookeeper's zk.Lock gives its caller no fence.
		"zk-recipe":    "S S S S V S S V S S - - - - - - - - - S S S S - S - V",
		"zk-ephemeral": "S S S D V V S V S V - - - - - - - - - S S S S - S - V",
		"zk-golib":     "S S S D V - S V V - - - - - - - - - - S S V S - S - V",
	}
	letter = map[harness.Outcome]string{harness.Safe: "S", harness.Violated: "V", harness.Deadlock: "D",
		harness.Starvation: "T", harness.NA: "-"}
)

// matchesDesign compares the verdict matrix with the design's
// expectations.
// With whole false the matrix holds the Redis rows alone, and those are
// compared.
func matchesDesign(t *testing.T, m *harness.MatrixResult, whole bool) {
	t.Helper()
	scs := strings.Fields(expectedScenarios)
	require.ElementsMatch(t, scs, m.Scenarios, "the catalog changed: update the expectations")
	rows := map[string]string{}
	for strat, row := range expected {
		if whole || stores.Of(strat) == "" {
			rows[strat] = row
		}
	}
	require.Len(t, m.Strategies, len(rows), "the registry changed: update the expectations")
	for strat, row := range rows {
		want := strings.Fields(row)
		for i, sc := range scs {
			cell, ok := m.Cell(strat, sc)
			require.True(t, ok, "%s × %s missing", strat, sc)
			assert.Equal(t, want[i], letter[cell.Outcome], "%s × %s: %s %s", strat, sc, cell.Outcome, cell.Message)
			if cell.Outcome == harness.Violated || cell.Outcome == harness.Deadlock || cell.Outcome == harness.Starvation {
				assert.NotEmpty(t, cell.Schedule, "%s × %s: a failure comes with its counterexample", strat, sc)
			}
		}
	}
	t.Logf("matrix: %d cells in %v", len(m.Cells), m.Elapsed)
}

func TestParseDirective(t *testing.T) {
	d, err := docgen.ParseDirective(` run release-after-expiry set-nx-px-del schedule="c1 c1 time c2 c1" `)
	require.NoError(t, err)
	assert.Equal(t, "run", d.Kind)
	assert.Equal(t, []string{"release-after-expiry", "set-nx-px-del"}, d.Args)
	assert.Equal(t, "c1 c1 time c2 c1", d.Options["schedule"])

	_, err = docgen.ParseDirective(`run x y schedule="c1`)
	assert.Error(t, err)
	_, err = docgen.ParseDirective(`  `)
	assert.Error(t, err)
}

func TestRewriteReplacesOnlyRegions(t *testing.T) {
	src := "# T\n\nbefore\n<!-- generated:file tools/docgen/testdata/hello.lua -->\nstale\ncontent\n<!-- end -->\nafter\n"
	g := &docgen.Generator{Root: "../.."}
	out, err := g.Rewrite(context.Background(), []byte(src))
	require.NoError(t, err)
	want := "# T\n\nbefore\n<!-- generated:file tools/docgen/testdata/hello.lua -->\n\n```lua\nreturn 1\n```\n" +
		"<sub>tools/docgen/testdata/hello.lua</sub>\n\n<!-- end -->\nafter\n"
	assert.Equal(t, want, string(out))
	again, err := g.Rewrite(context.Background(), out)
	require.NoError(t, err)
	assert.Equal(t, string(out), string(again), "rewriting is idempotent")

	g.Keep = func(d docgen.Directive) bool { return d.Kind == "file" }
	kept, err := g.Rewrite(context.Background(), []byte(src))
	require.NoError(t, err)
	assert.Equal(t, src, string(kept), "a kept region is left as it is")
}

// TestRewriteKeepsZxids: a region whose new rendering differs from the
// page only in ZooKeeper transaction ids (a czxid, a fence) keeps the
// page's text; any other difference, a short number's among them, is
// written.
func TestRewriteKeepsZxids(t *testing.T) {
	root := t.TempDir()
	g := &docgen.Generator{Root: root}
	page := func(body string) string {
		return "<!-- generated:file z.txt -->\n\n```txt\n" + body + "\n```\n<sub>z.txt</sub>\n\n<!-- end -->\n"
	}
	const acquired, refused = "-> @4294967369 acquired (fence 4294967369)", "write refused (fence 4294967366<42949673~"
	for _, c := range []struct {
		was, now string
		kept     bool
	}{
		{acquired, "-> @4294967370 acquired (fence 4294967370)", true},
		{acquired, "-> @4294967369 acquired (fence 4294967369)", true},
		{acquired, "-> @4294967370 acquired (fence 4294967369) released", false},
		{acquired, "-> @2 acquired (fence 2)", false},
		// After an election: another epoch, in a column cut short too.
		{refused, "write refused (fence 8589934635<85899346~", true},
		{refused, "write refused (fence 4294967366<42~", false},
	} {
		require.NoError(t, os.WriteFile(filepath.Join(root, "z.txt"), []byte(c.now), 0o644))
		src := page(c.was)
		out, err := g.Rewrite(context.Background(), []byte(src))
		require.NoError(t, err)
		if c.kept {
			assert.Equal(t, src, string(out), "%q differs only in zxids", c.now)
		} else {
			assert.Equal(t, page(c.now), string(out), "%q differs in more than zxids", c.now)
		}
	}
}

func TestRegionErrors(t *testing.T) {
	for _, src := range []string{
		"<!-- generated:matrix -->\nno end\n",
		"<!-- generated:matrix -->\n<!-- generated:matrix -->\n<!-- end -->\n",
		"<!-- generated:matrix\n-->\n<!-- end -->\n",
	} {
		_, err := docgen.Regions([]byte(src))
		assert.Error(t, err, strings.ReplaceAll(src, "\n", `\n`))
	}
	g := &docgen.Generator{Root: "../.."}
	_, err := g.Rewrite(context.Background(), []byte("<!-- generated:nonsense -->\n<!-- end -->\n"))
	assert.ErrorContains(t, err, "unknown directive")
}

func readFile(path string) ([]byte, error) { return os.ReadFile(path) }

func TestMarkersInCodeBlocksAreIgnored(t *testing.T) {
	src := "```\n<!-- generated:matrix -->\n```\n<!-- generated:file tools/docgen/testdata/hello.lua -->\n<!-- end -->\n"
	rs, err := docgen.Regions([]byte(src))
	require.NoError(t, err)
	require.Len(t, rs, 1)
	assert.Equal(t, "file", rs[0].Directive.Kind)
}

func TestExampleDirective(t *testing.T) {
	g := &docgen.Generator{Root: "../.."}
	d, err := docgen.ParseDirective("example Example")
	require.NoError(t, err)
	out, err := g.Block(context.Background(), d)
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(out, "```go\npool := locklab.NewPool(addr)\n"), out)
	assert.Contains(t, out, "\nif err != nil {\n\tpanic(err)\n}\n", "one tab of the function's indentation less")
	assert.True(t, strings.HasSuffix(out, "// second release: true\n```"), out)

	d, _ = docgen.ParseDirective("example NoSuchExample")
	_, err = g.Block(context.Background(), d)
	assert.Error(t, err)
}
