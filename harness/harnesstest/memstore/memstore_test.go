package memstore_test

import (
	"bytes"
	"context"
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/locklab/locklab/harness"
	_ "github.com/locklab/locklab/harness/harnesstest/memstore" // the one import: registers the store and its family, mem-cas and mem-del
	"github.com/locklab/locklab/harness/play"
	"github.com/locklab/locklab/harness/render"
	_ "github.com/locklab/locklab/stores/redis" // Redis's store, whose strategies and levels the lists also hold
)

// The names the store registers, as a test that knows it only by its
// import reads them.
const (
	storeName = "memstore"
	strategy  = "mem-cas"
	broken    = "mem-del" // mem-cas with a release that deletes the key whoever holds it
)

// TestMatrixRunsTheFifthStore: with the store's package imported and
// nothing else done, the matrix runs its strategies on a server its Driver
// starts, each request a step the explorer schedules, and finds what a
// lock with a TTL and fences must get: mutual exclusion and release
// safety hold, a holder paused or cut off past its TTL writes after its
// successor unless the resource checks fences, and the scenarios it has
// no meaning for are n/a with the reasons its Driver and its node give.
// mem-del, whose release deletes the key whoever holds it, loses release
// safety where mem-cas keeps it: a holder whose TTL ran out releases its
// successor's lock. The Redis cells are n/a (no Redis node is given): the
// matrix's own strategies, by default every registered one, include the
// store's, in the Driver's column order.
func TestMatrixRunsTheFifthStore(t *testing.T) {
	d, err := harness.LookupStore(storeName)
	if err != nil {
		t.Fatal(err)
	}
	if err := harness.StoreInstalled(storeName); err != nil {
		t.Fatal(err)
	}
	nodes, err := d.Start(t.Context(), "process", 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nodes[0].Close() })
	want := map[string]harness.Outcome{
		"stale-recovery":        harness.Safe,
		"release-after-expiry":  harness.Safe,
		"clock-skew":            harness.Safe,
		"crash-before-expire":   harness.Safe,
		"ttl-pushed-by-waiters": harness.Safe,
		"lost-reply":            harness.Safe,
		"pause-past-ttl":        harness.Violated,
		"pause-past-ttl-fenced": harness.Safe,
		"partitioned-holder":    harness.Violated,
		"restart-loses-lock":    harness.NA, // the node cannot restart
		"pause-session-killed":  harness.NA, // the Driver's NA
		"redlock-restart":       harness.NA, // the Driver's MultiNode
	}
	wantBroken := maps.Clone(want)
	wantBroken["release-after-expiry"] = harness.Violated
	scenarios := slices.Sorted(maps.Keys(want))
	m, err := harness.Matrix(context.Background(), harness.MatrixOptions{
		Scenarios:        scenarios,
		Stores:           map[string][]harness.Node{storeName: {nodes[0]}},
		StorePreemptions: harness.StorePreemptions, StoreSchedules: harness.StoreSchedules,
	})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(m.Strategies, strategy) || !slices.Contains(m.Strategies, broken) || !slices.Contains(m.Strategies, "set-nx-px") {
		t.Fatalf("the matrix's strategies are %v: want every registered one, %s and %s among them", m.Strategies, strategy, broken)
	}
	checkColumn(t, m, strategy, want)
	checkColumn(t, m, broken, wantBroken)
	if c, _ := m.Cell(broken, "release-after-expiry"); !strings.Contains(c.Message, "releas") {
		t.Errorf("%s on release-after-expiry: %q, want the wrongful release", broken, c.Message)
	}
	for sc, msg := range map[string]string{"restart-loses-lock": "n1 cannot", "pause-session-killed": "not a session's",
		"redlock-restart": "run on one server"} {
		if c, _ := m.Cell(strategy, sc); !strings.Contains(c.Message, msg) {
			t.Errorf("%s: n/a %q, want its reason (%q)", sc, c.Message, msg)
		}
	}
	// A counterexample is a schedule of steps, the store's requests among
	// them, each shown as the store sent it with the footprint it
	// declared: pause-past-ttl's is the schedule the Driver knows,
	// partitioned-holder's one the explorer found.
	for sc, schedule := range map[string]string{"pause-past-ttl": "c1 c1 c2 c2 c1", "partitioned-holder": "c1 isolate(c1) time c2 c2 c2 c1"} {
		c, _ := m.Cell(strategy, sc)
		if c.Schedule != schedule || c.Counterexample == nil {
			t.Errorf("%s's counterexample: %q, want %q", sc, c.Schedule, schedule)
			continue
		}
		acq := slices.IndexFunc(c.Counterexample.Events, func(e harness.Event) bool { return len(e.Command) > 0 && e.Command[0] == "ACQ" })
		if acq < 0 {
			t.Errorf("%s's counterexample has no ACQ step", sc)
		} else if e := c.Counterexample.Events[acq]; e.Touch == nil || !slices.Equal(e.Touch.Writes, []string{"key:lock:" + sc}) {
			t.Errorf("%s's ACQ step: %v, touching %+v", sc, e.Command, e.Touch)
		}
	}
	// The scenario as the Driver tells it.
	if a, _ := m.Scenario("pause-past-ttl"); !strings.Contains(a.For(strategy).Title, "memstore") {
		t.Errorf("pause-past-ttl for %s is told %q: want the Driver's telling", strategy, a.For(strategy).Title)
	}
	// The matrix's table puts the store's columns after Redis's, in the
	// Driver's order (Driver.Columns).
	header, _, _ := strings.Cut(render.MatrixMarkdown(m, harness.StorePreemptions, harness.StoreSchedules), "\n")
	if i, j, k := strings.Index(header, strategy), strings.Index(header, broken), strings.Index(header, "redlock"); k < 0 || i < k || j < i {
		t.Errorf("the table's header %q: want redlock's column, then %s's, then %s's", header, strategy, broken)
	}
}

// checkColumn checks strategy's cells in m against want, by scenario: a
// safe cell explored to the end of its bound, in more than one schedule.
// The Redis strategies' cells are n/a, with no Redis node given.
func checkColumn(t *testing.T, m *harness.MatrixResult, strategy string, want map[string]harness.Outcome) {
	t.Helper()
	for _, sc := range slices.Sorted(maps.Keys(want)) {
		c, ok := m.Cell(strategy, sc)
		switch {
		case !ok:
			t.Errorf("%s on %s: no cell", strategy, sc)
		case c.Outcome != want[sc]:
			t.Errorf("%s on %s: %s (%s) after %d schedules, want %s", strategy, sc, c.Outcome, c.Message, c.Schedules, want[sc])
		case c.Outcome == harness.Safe && !c.Complete:
			t.Errorf("%s on %s: safe after %d schedules, the bound not explored to its end", strategy, sc, c.Schedules)
		case c.Outcome == harness.Safe && c.Schedules < 2:
			t.Errorf("%s on %s: safe after %d schedules: the explorer scheduled nothing", strategy, sc, c.Schedules)
		}
		t.Logf("%s on %s: %s after %d schedules %q %s", strategy, sc, c.Outcome, c.Schedules, c.Schedule, c.Message)
		if r, ok := m.Cell("set-nx-px", sc); !ok || r.Outcome != harness.NA {
			t.Errorf("set-nx-px on %s: %s, want n/a without a Redis node", sc, r.Outcome)
		}
	}
}

// TestCoreListsTheFifthStore: the harness's lists name the store and its
// strategies (its stores, the strategies' store, play's levels), though the
// core neither imports its package nor names it: the store needed no
// change to the harness.
func TestCoreListsTheFifthStore(t *testing.T) {
	if !slices.ContainsFunc(harness.Stores(), func(d *harness.Driver) bool { return d.Name == storeName }) {
		t.Errorf("harness.Stores() lacks %s", storeName)
	}
	for _, name := range []string{strategy, broken} {
		if got := harness.StoreOfStrategy(name); got != storeName {
			t.Errorf("StoreOfStrategy(%s) = %q", name, got)
		}
	}
	if got := harness.StoreTitles(storeName); !slices.Equal(got, []string{"memstore"}) {
		t.Errorf("StoreTitles = %v", got)
	}
	i := slices.IndexFunc(play.Levels(), func(l play.Level) bool { return l.ID == "memstore-pause" })
	if i < 0 {
		t.Fatal("play's levels lack the Driver's")
	}
	if l := play.Levels()[i]; l.Store != storeName || !strings.Contains(l.Story, "ACQ") {
		t.Errorf("the level %+v: want it on %s, told as the Driver tells its scenario", l, storeName)
	}
	if got := render.Abbreviations(strategy); !strings.Contains(got, "answers its fence") {
		t.Errorf("Abbreviations(%s) = %q: want the Driver's", strategy, got)
	}

	core := []string{"../..", "../../render", "../../stress", "../../play", "../../fault"}
	out, err := exec.Command("go", append([]string{"list", "-deps"}, core...)...).Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	for _, p := range strings.Fields(string(out)) {
		if strings.HasSuffix(p, "/"+storeName) {
			t.Errorf("the core depends on %s", p)
		}
	}
	fset := token.NewFileSet()
	for _, dir := range core {
		files, _ := filepath.Glob(filepath.Join(dir, "*.go"))
		for _, f := range files {
			af, err := parser.ParseFile(fset, f, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			ast.Inspect(af, func(n ast.Node) bool {
				if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING {
					if s, _ := strconv.Unquote(lit.Value); strings.Contains(s, storeName) || strings.Contains(s, strategy) || strings.Contains(s, broken) {
						t.Errorf("%s names %q", fset.Position(lit.Pos()), s)
					}
				}
				return true
			})
		}
	}
}

// TestPlayPlaysTheFifthStore: locklab play offers the Driver's level,
// starts its server through the Driver, and a participant's clicks (the
// schedule the Driver knows) solve it.
func TestPlayPlaysTheFifthStore(t *testing.T) {
	srv, err := play.New(play.Options{Start: play.ClusterServers("process", "")})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(func() {
		hs.Close()
		srv.Close()
	})
	type answer struct {
		Session string `json:"session"`
		Seq     int    `json:"seq"`
		Solved  bool   `json:"solved"`
		Error   string `json:"error"`
	}
	post := func(path string, body any) answer {
		t.Helper()
		b, _ := json.Marshal(body)
		resp, err := http.Post(hs.URL+path, "application/json", bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var a answer
		if err := json.NewDecoder(resp.Body).Decode(&a); err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("%s %s: %d %v %q", path, b, resp.StatusCode, err, a.Error)
		}
		return a
	}
	a := post("/api/sessions", map[string]any{"level": "memstore-pause"})
	for _, st := range strings.Fields("c1 c1 c2 c2") {
		if a = post("/api/step", map[string]any{"session": a.Session, "seq": a.Seq, "step": st}); a.Solved {
			t.Fatalf("solved before C1's stale write, at %s", st)
		}
	}
	if a = post("/api/step", map[string]any{"session": a.Session, "seq": a.Seq, "step": "c1"}); !a.Solved {
		t.Error("C1's write after C2's does not solve the level")
	}
	post("/api/end", map[string]any{"session": a.Session})
}
