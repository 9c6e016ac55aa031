package render_test

import (
	"bytes"
	"fmt"
	"html"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/locklab/locklab/harness"
	"github.com/locklab/locklab/harness/render"
	"github.com/locklab/locklab/strategies"
)

// faults are the phrases that name a fault of a store's servers: a
// restart that forgets, a replica a failover promotes, a server that
// writes to disk or not. A row title or a page names one only where the
// store's telling of the scenario runs it.
var faults = []string{"without persistence", "asynchronous replica", "failover to", "replica that",
	"appendfsync", "fsync", "comes back empty"}

// telling is how store d tells sc: its own telling (Scenario.Stores), or,
// for the Main store, the catalog's; ok is false for another store that
// tells it no way of its own, whose servers run none of the catalog's
// faults as the catalog tells them.
func telling(d *harness.Driver, sc *harness.Scenario) (t harness.Telling, ok bool) {
	if t, ok := sc.Stores[d.Name]; ok {
		return t, true
	}
	if d.Main {
		return harness.Telling{Title: sc.Title, Story: sc.Story, Source: sc.Source}, true
	}
	return harness.Telling{}, false
}

// unrun returns the faults text names, as words of their own ("asynchronous
// replica", not "asynchronous replication"), that no telling of ts runs.
func unrun(text string, ts ...harness.Telling) []string {
	var out []string
	for _, f := range faults {
		re := regexp.MustCompile(`(?i)\b` + regexp.QuoteMeta(f) + `\b`)
		if !re.MatchString(text) {
			continue
		}
		if !slices.ContainsFunc(ts, func(t harness.Telling) bool { return re.MatchString(t.Story) }) {
			out = append(out, f)
		}
	}
	return out
}

// storeMatrix is a matrix of every scenario of the catalog on the
// registered strategies of stores, every cell safe but those where the
// scenario has no meaning.
func storeMatrix(stores ...*harness.Driver) *harness.MatrixResult {
	m := &harness.MatrixResult{}
	for _, d := range stores {
		for _, desc := range strategies.All() {
			if harness.StoreOfStrategy(desc.Name) == d.Name {
				m.Strategies = append(m.Strategies, desc.Name)
			}
		}
	}
	for _, sc := range harness.Scenarios() {
		m.Scenarios = append(m.Scenarios, sc.Name)
		m.About = append(m.About, harness.ScenarioAbout{Name: sc.Name, Title: sc.Title, Story: sc.Story,
			Source: sc.Source, Property: sc.Property, Stores: sc.Stores})
		for _, st := range m.Strategies {
			c := harness.Cell{Strategy: st, Scenario: sc.Name, Outcome: harness.Safe, Complete: true}
			if desc, _ := strategies.Info(st); !sc.AppliesTo(desc) || harness.StoreNA(harness.StoreOfStrategy(st), sc) != "" {
				c.Outcome = harness.NA
			}
			m.Cells = append(m.Cells, c)
		}
	}
	return m
}

// runOn returns the titles of the stores whose strategies scenario
// applies to in m.
func runOn(m *harness.MatrixResult, scenario string) []string {
	var out []string
	for _, c := range m.Cells {
		name := harness.StoreTitle(harness.StoreOfStrategy(c.Strategy))
		if c.Scenario == scenario && c.Outcome != harness.NA && !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	return out
}

// rowTitles returns the title of each scenario's row, as the terminal's
// matrix (its legend) and the page's (its column heads) show them; they
// must agree.
func rowTitles(t *testing.T, m *harness.MatrixResult) map[string]string {
	t.Helper()
	var text, page bytes.Buffer
	require.NoError(t, render.MatrixText(&text, m))
	require.NoError(t, render.HTML(&page, m, testMeta()))
	out := map[string]string{}
	for _, l := range regexp.MustCompile(`(?m)^ +\d+ (\S+) — (.*)$`).FindAllStringSubmatch(text.String(), -1) {
		out[l[1]] = l[2]
	}
	heads := regexp.MustCompile(`title="\d+\. ([^"]*)"><span>([^<]+)</span>`).FindAllStringSubmatch(page.String(), -1)
	require.Len(t, heads, len(m.Scenarios))
	for _, h := range heads {
		require.Equal(t, out[h[2]], html.UnescapeString(h[1]), "the page's head of %s", h[2])
	}
	require.Len(t, out, len(m.Scenarios))
	return out
}

// TestRowTitlesNameOnlyFaultsTheStoreRuns: a matrix's row title names no
// fault that the telling of a store whose strategies it shows does not
// run (a PostgreSQL or etcd server restarts on its data, not without
// persistence), on a matrix of each store's strategies alone and on one
// of every store's.
func TestRowTitlesNameOnlyFaultsTheStoreRuns(t *testing.T) {
	all := harness.Stores()
	for _, d := range all {
		m := storeMatrix(d)
		if len(m.Strategies) == 0 {
			continue
		}
		for sc, title := range rowTitles(t, m) {
			s, err := harness.Lookup(sc)
			require.NoError(t, err)
			if len(runOn(m, sc)) == 0 {
				continue // every cell n/a: the row is the scenario's, run nowhere here
			}
			tl, _ := telling(d, s)
			if bad := unrun(title, tl); len(bad) > 0 {
				t.Errorf("on %s's strategies, %s's row reads %q: %s does not run %s", d.Title, sc, title, d.Title, strings.Join(bad, ", "))
			}
		}
	}
	// On every store's strategies, a title told differently by the stores
	// is each one's, after the stores it is told for.
	byTitle := map[string]*harness.Driver{}
	var titles []string
	for _, d := range all {
		byTitle[d.Title] = d
		titles = append(titles, regexp.QuoteMeta(d.Title))
	}
	store := "(?:" + strings.Join(titles, "|") + ")"
	part := regexp.MustCompile(`(.*?) \((` + store + `(?:(?:, | and )` + store + `)*)\)(?:; |$)`)
	m := storeMatrix(all...)
	for sc, title := range rowTitles(t, m) {
		s, err := harness.Lookup(sc)
		require.NoError(t, err)
		parts := part.FindAllStringSubmatch(title, -1)
		if sc == "restart-loses-lock" {
			require.GreaterOrEqual(t, len(parts), 2, "the restart is told its own way on the stores that restart on their data: %q", title)
		}
		if len(parts) == 0 {
			parts = [][]string{{title, title, strings.Join(runOn(m, sc), " and ")}}
		}
		for _, p := range parts {
			for _, name := range regexp.MustCompile(`, | and `).Split(p[2], -1) {
				d := byTitle[name]
				tl, _ := telling(d, s)
				if bad := unrun(p[1], tl); len(bad) > 0 {
					t.Errorf("on every store's strategies, %s's row reads %q for %s, which does not run %s", sc, p[1], name, strings.Join(bad, ", "))
				}
			}
		}
	}
}

// TestUnrunFaultIsSaid: a telling whose title names a fault its story
// does not run is said, and one that runs it is not.
func TestUnrunFaultIsSaid(t *testing.T) {
	lie := harness.Telling{Title: "the server restarts without persistence", Story: "The server restarts on its data directory."}
	require.Equal(t, []string{"without persistence"}, unrun(lie.Title, lie))
	truth := harness.Telling{Title: "the server restarts without persistence", Story: "The server restarts without persistence."}
	require.Empty(t, unrun(truth.Title, truth))
	require.Equal(t, []string{"failover to"}, unrun("after a failover to a replica", lie, truth))
}

// TestStorePagesNameOnlyFaultsTheStoreRuns: a store's page (docs/NAME.md)
// names, where it speaks of its scenarios, no fault that the store's
// telling of them does not run. A paragraph or an item of a list that
// names a scenario (`restart-loses-lock`) speaks of the store's, but for
// a sentence that names Redis, to compare; the generated timelines and
// the code are left out.
func TestStorePagesNameOnlyFaultsTheStoreRuns(t *testing.T) {
	pages := 0
	for _, d := range harness.Stores() {
		if d.Main {
			continue
		}
		b, err := os.ReadFile(fmt.Sprintf("../../docs/%s.md", d.Name))
		if os.IsNotExist(err) {
			continue
		}
		require.NoError(t, err)
		pages++
		for _, bad := range pageLies(d, string(b)) {
			t.Errorf("docs/%s.md: %s", d.Name, bad)
		}
	}
	require.GreaterOrEqual(t, pages, 3, "the pages of PostgreSQL, etcd and ZooKeeper")
}

var (
	generated = regexp.MustCompile(`(?s)<!-- generated:.*?<!-- end -->`)
	fenced    = regexp.MustCompile("(?s)\n```.*?\n```")
	// blockStart begins a paragraph or an item of a list.
	blockStart = regexp.MustCompile(`\n\s*\n|\n(?:[-*] |\d+\. |#)`)
	named      = regexp.MustCompile("`([a-z0-9-]+)`")
	redisWords = regexp.MustCompile(`Redis|Redlock|Sentinel`)
	// sentenceEnd ends a sentence, or a clause after a semicolon.
	sentenceEnd = regexp.MustCompile(`[.;:]\s+`)
)

// pageLies returns, for each sentence naming no Redis lock in a block of
// page that names one of the catalog's scenarios, the faults it names
// that d's telling of those scenarios does not run.
func pageLies(d *harness.Driver, page string) []string {
	page = fenced.ReplaceAllString(generated.ReplaceAllString(page, ""), "\n")
	var out []string
	for _, block := range blockStart.Split(page, -1) {
		var ts []harness.Telling
		names := 0
		for _, m := range named.FindAllStringSubmatch(block, -1) {
			if sc, err := harness.Lookup(m[1]); err == nil {
				names++
				if tl, ok := telling(d, sc); ok {
					ts = append(ts, tl)
				}
			}
		}
		if names == 0 {
			continue
		}
		for _, sentence := range sentenceEnd.Split(block, -1) {
			if redisWords.MatchString(sentence) {
				continue // Redis's, to compare
			}
			if bad := unrun(sentence, ts...); len(bad) > 0 {
				out = append(out, fmt.Sprintf("%q names %s, which its scenarios' tellings do not run",
					strings.Join(strings.Fields(sentence), " "), strings.Join(bad, ", ")))
			}
		}
	}
	return out
}
