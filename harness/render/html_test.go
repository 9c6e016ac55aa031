package render_test

import (
	"bytes"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/locklab/locklab/harness"
	"github.com/locklab/locklab/harness/render"
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
