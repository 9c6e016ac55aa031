package render_test

import (
	"bytes"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/locklab/locklab/harness"
	"github.com/locklab/locklab/harness/render"
	_ "github.com/locklab/locklab/stores" // registers the stores, etcd-lease and pg-advisory
)

// testMeta is what the page's header says of the recorded matrix.
func testMeta() render.Meta {
	return render.Meta{
		Redis:        "process /usr/bin/redis-server (Redis 7.0.15)",
		Backend:      "process",
		Nodes:        []string{"n1 127.0.0.1:6379"},
		Generated:    time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC),
		Command:      "go test ./harness/render",
		MaxSchedules: matrixSchedules,
		Workers:      2,
	}
}

func cellID(strategy, scenario string) string { return "cell--" + strategy + "--" + scenario }

// TestWriteSelfContained checks the page without a browser: a cell and a
// details block per strategy and scenario, nothing loaded from elsewhere,
// and text that could end a script kept out of the embedded data.
func TestWriteSelfContained(t *testing.T) {
	m, meta := loadMatrix(t), testMeta()
	meta.Title = `locklab <b>matrix</b>`
	meta.Command = `locklab report </script><script>alert(1)</script>`
	var buf bytes.Buffer
	require.NoError(t, render.HTML(&buf, m, meta))
	page := buf.String()

	assert.Equal(t, len(testStrategies)*len(testScenarios), strings.Count(page, `<td class="cell `))
	for _, st := range testStrategies {
		for _, sc := range testScenarios {
			id := cellID(st, sc)
			assert.Equal(t, 1, strings.Count(page, `<article class="detail" id="`+id+`"`), id)
			assert.Equal(t, 1, strings.Count(page, `href="#`+id+`"`), id)
		}
	}
	assert.Equal(t, 2, strings.Count(page, "<script"), "the data block and the inline script, nothing injected")
	assert.NotContains(t, page, "<b>matrix</b>")
	assert.NotRegexp(t, regexp.MustCompile(`(?i)\ssrc\s*=`), page, "nothing is loaded by src")
	for _, l := range regexp.MustCompile(`<link[^>]*>`).FindAllString(page, -1) {
		assert.Contains(t, l, `href="data:`, "a link element loads nothing: %s", l)
	}
	for _, u := range regexp.MustCompile(`url\([^)]*\)`).FindAllString(page, -1) {
		assert.True(t, strings.HasPrefix(u, "url(#"), "only in-document url(): %s", u)
	}
	v, _ := m.Cell(violatedCell[0], violatedCell[1])
	assert.Contains(t, page, "no violation within the bound")
	assert.Contains(t, page, "verdict: "+string(harness.Violated))
	assert.Contains(t, page, v.Schedule)
	require.NotEmpty(t, v.Counterexample.Events)
	assert.NotEmpty(t, v.Counterexample.Events[0].Keys, "the replayed counterexample records the key")
	assert.Contains(t, page, `class="seq-key`, "the sequence diagram shows the key's value")
}

// TestHTMLNamesTheStoresThatRan: a page of PostgreSQL's and etcd's cells
// says they ran there, lists their servers and their own bounds, names no
// Redis server, and a safe* cell gives the limit that stopped it.
func TestHTMLNamesTheStoresThatRan(t *testing.T) {
	sc, err := harness.Lookup("restart-loses-lock")
	require.NoError(t, err)
	m := &harness.MatrixResult{Strategies: []string{"pg-advisory", "etcd-lease"}, Scenarios: []string{"restart-loses-lock"},
		About: []harness.ScenarioAbout{{Name: sc.Name, Title: sc.Title, Story: sc.Story, Source: sc.Source,
			Property: sc.Property, Stores: sc.Stores}},
		Cells: []harness.Cell{
			{Strategy: "pg-advisory", Scenario: "restart-loses-lock", Outcome: harness.Violated, Schedule: "c1 restart(n1) c2", Schedules: 1},
			{Strategy: "etcd-lease", Scenario: "restart-loses-lock", Outcome: harness.Safe, Schedules: 21, Limit: 20},
		}}
	meta := testMeta()
	meta.Servers = []string{"PostgreSQL: process 127.0.0.1:5432 (postgres 15)", "etcd: 3 member processes"}
	var buf bytes.Buffer
	require.NoError(t, render.HTML(&buf, m, meta))
	page := buf.String()
	assert.Contains(t, page, "schedules run on real PostgreSQL and etcd in")
	assert.NotContains(t, page, "<dt>Redis</dt>", "no Redis strategy ran")
	assert.Contains(t, page, "<dt>PostgreSQL</dt><dd>process 127.0.0.1:5432 (postgres 15)</dd>")
	assert.Contains(t, page, "<dt>etcd</dt><dd>3 member processes</dd>")
	assert.Contains(t, page, fmt.Sprintf("on PostgreSQL and etcd at most 2 (default) preemptions and %d (default) schedules per cell", harness.StoreSchedules))
	assert.NotContains(t, page, "200 (default) schedules", "the Redis bound is not the one that applied")
	assert.Contains(t, page, "limit of 20 schedules for its search was reached")
	// Each cell tells its own store's story, with its own source.
	for _, story := range regexp.MustCompile(`<p class="story">[^<]*</p>`).FindAllString(page, -1) {
		assert.NotContains(t, story, "without persistence", "Redis's story of the restart is not told")
	}
	assert.Contains(t, page, "advisory lock and the transaction&#39;s row lock end with C1&#39;s session")
	assert.Contains(t, page, "catches up from its raft log")
	assert.Contains(t, page, "Explicit Locking")
}

// Each store's timelines say what their short names stand for.
func TestAbbreviations(t *testing.T) {
	assert.Contains(t, render.Abbreviations("set-nx-px"), "K: the lock's key")
	etcd := render.Abbreviations("etcd-lease")
	for _, s := range []string{"P/:", "L1, L2:", "first P/:", "@N:"} {
		assert.Contains(t, etcd, s)
	}
	assert.Contains(t, render.Abbreviations("pg-lock-table"), "@30.001s:")
}
