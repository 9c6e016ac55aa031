package memstore_test

import (
	"bytes"
	"context"
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/locklab/locklab/harness"
	_ "github.com/locklab/locklab/harness/harnesstest/memstore" // the one import: registers the store and mem-cas
	"github.com/locklab/locklab/harness/play"
	"github.com/locklab/locklab/harness/render"
	_ "github.com/locklab/locklab/stores/redis" // Redis's store, whose strategies and levels the lists also hold
)

// The names the store registers, as a test that knows it only by its
// import reads them.
const (
	storeName = "memstore"
	strategy  = "mem-cas"
)

// TestMatrixRunsTheFifthStore: with the store's package imported and
// nothing else done, the matrix runs its strategy on a server its Driver
// starts, each request a step the explorer schedules, and finds what a
// lock with a TTL and fences must get: mutual exclusion and release
// safety hold, a holder paused or cut off past its TTL writes after its
// successor unless the resource checks fences, and the scenarios it has
// no meaning for are n/a with the reasons its Driver and its node give.
// The Redis cells are n/a (no Redis node is given): the matrix's own
// strategies, by default every registered one, include mem-cas.
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
	var scenarios []string
	for sc := range want {
		scenarios = append(scenarios, sc)
	}
	slices.Sort(scenarios)
	m, err := harness.Matrix(context.Background(), harness.MatrixOptions{
		Scenarios:        scenarios,
		Stores:           map[string][]harness.Node{storeName: {nodes[0]}},
		StorePreemptions: harness.StorePreemptions, StoreSchedules: harness.StoreSchedules,
	})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(m.Strategies, strategy) || !slices.Contains(m.Strategies, "set-nx-px") {
		t.Fatalf("the matrix's strategies are %v: want every registered one, %s among them", m.Strategies, strategy)
	}
	for _, sc := range scenarios {
		c, ok := m.Cell(strategy, sc)
		switch {
		case !ok:
			t.Errorf("%s: no cell", sc)
		case c.Outcome != want[sc]:
			t.Errorf("%s: %s (%s) after %d schedules, want %s", sc, c.Outcome, c.Message, c.Schedules, want[sc])
		case c.Outcome == harness.Safe && !c.Complete:
			t.Errorf("%s: safe after %d schedules, the bound not explored to its end", sc, c.Schedules)
		case c.Outcome == harness.Safe && c.Schedules < 2:
			t.Errorf("%s: safe after %d schedules: the explorer scheduled nothing", sc, c.Schedules)
		}
		t.Logf("%s: %s after %d schedules %q %s", sc, c.Outcome, c.Schedules, c.Schedule, c.Message)
		if r, ok := m.Cell("set-nx-px", sc); !ok || r.Outcome != harness.NA {
			t.Errorf("set-nx-px on %s: %s, want n/a without a Redis node", sc, r.Outcome)
		}
	}
	for sc, msg := range map[string]string{"restart-loses-lock": "n1 cannot", "pause-session-killed": "not a session's",
		"redlock-restart": "runs on one server"} {
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
	// The matrix's table puts its column after Redis's (Driver.Columns).
	header, _, _ := strings.Cut(render.MatrixMarkdown(m, harness.StorePreemptions, harness.StoreSchedules), "\n")
	if i, j := strings.Index(header, strategy), strings.Index(header, "redlock"); i < 0 || j < 0 || i < j {
		t.Errorf("the table's header %q: want %s's column after redlock's", header, strategy)
	}
}

// TestCoreListsTheFifthStore: the harness's lists name the store and its
// strategy (its stores, the strategy's store, play's levels), though the
// core neither imports its package nor names it: the store needed no
// change to the harness.
func TestCoreListsTheFifthStore(t *testing.T) {
	if !slices.ContainsFunc(harness.Stores(), func(d *harness.Driver) bool { return d.Name == storeName }) {
		t.Errorf("harness.Stores() lacks %s", storeName)
	}
	if got := harness.StoreOfStrategy(strategy); got != storeName {
		t.Errorf("StoreOfStrategy(%s) = %q", strategy, got)
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
					if s, _ := strconv.Unquote(lit.Value); strings.Contains(s, storeName) || strings.Contains(s, strategy) {
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
