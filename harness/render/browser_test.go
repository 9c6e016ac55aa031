//go:build browser

// The report's page in headless Chromium: built only with -tags browser
// (make test-long and CI), so a developer's make test compiles no browser
// driver.

package render_test

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/locklab/locklab/harness"
	"github.com/locklab/locklab/harness/render"
	"github.com/locklab/locklab/internal/tooling/browsertest"
)

// safeCell is a SAFE cell of the recorded matrix: clicking it shows its bound.
var safeCell = [2]string{"set-nx-px", "stale-recovery"}

// TestReportInBrowser opens the page in headless Chromium: it loads with no
// console error, no exception and no request beyond the file itself, the
// matrix has one cell per strategy and scenario, and clicking a VIOLATED
// cell shows its timeline, a SAFE one its bound. With LOCKLAB_SCREENSHOT
// set it saves a screenshot of the page there (PNG).
func TestReportInBrowser(t *testing.T) {
	m, meta := loadMatrix(t), testMeta()
	path := filepath.Join(t.TempDir(), "report.html")
	f, err := os.Create(path)
	require.NoError(t, err)
	require.NoError(t, render.HTML(f, m, meta))
	require.NoError(t, f.Close())
	pageURL := (&url.URL{Scheme: "file", Path: path}).String()

	// A hung browser fails the test instead of hanging it.
	bctx := browsertest.New(t, 1280, 900, 45*time.Second)

	var (
		mu       sync.Mutex
		problems []string
		requests []string
		urls     = map[network.RequestID]string{}
	)
	// Listen starts the browser; it sees every event from here on.
	require.NoError(t, chromedp.Listen(bctx, func(ev any) {
		mu.Lock()
		defer mu.Unlock()
		switch e := ev.(type) {
		case *runtime.EventConsoleAPICalled:
			if e.Type == runtime.ConsoleAPICalledTypeError || e.Type == runtime.ConsoleAPICalledTypeAssert {
				var args []string
				for _, a := range e.Args {
					args = append(args, string(a.Value)+a.Description)
				}
				problems = append(problems, fmt.Sprintf("console.%s: %s", e.Type, strings.Join(args, " ")))
			}
		case *runtime.EventExceptionThrown:
			d := e.ExceptionDetails
			msg := d.Text
			if d.Exception != nil {
				msg += " " + d.Exception.Description
			}
			problems = append(problems, fmt.Sprintf("exception at %d:%d: %s", d.LineNumber, d.ColumnNumber, msg))
		case *cdplog.EventEntryAdded:
			if e.Entry.Level == cdplog.EntryLevelError {
				problems = append(problems, fmt.Sprintf("log %s: %s %s", e.Entry.Source, e.Entry.Text, e.Entry.URL))
			}
		case *network.EventRequestWillBeSent:
			urls[e.RequestID] = e.Request.URL
			requests = append(requests, e.Request.URL)
		case *network.EventLoadingFailed:
			problems = append(problems, fmt.Sprintf("request %s failed: %s", urls[e.RequestID], e.ErrorText))
		case *network.EventResponseReceived:
			if e.Response.Status >= 400 {
				problems = append(problems, fmt.Sprintf("request %s: status %d", e.Response.URL, e.Response.Status))
			}
		}
	}), "loading the page")
	check := func(when string) {
		t.Helper()
		mu.Lock()
		defer mu.Unlock()
		assert.Empty(t, problems, "console errors, exceptions or failed requests %s", when)
		for _, u := range requests {
			assert.True(t, u == pageURL || strings.HasPrefix(u, pageURL+"#") || strings.HasPrefix(u, "data:"),
				"the page requested %s %s: it must need nothing but itself", u, when)
		}
		problems, requests = nil, nil
	}

	// Load, and read the matrix back from the page.
	type domCell struct {
		Strategy, Scenario, Outcome, Text string
		Link                              bool
	}
	start := time.Now()
	require.NoError(t, chromedp.Do(bctx,
		chromedp.Navigate(pageURL),
		chromedp.WaitVisible(chromedp.CSS("table.matrix")),
	), "loading %s", pageURL)
	cells, err := chromedp.Run(bctx, chromedp.Evaluate[[]domCell](`Array.from(document.querySelectorAll("table.matrix td.cell")).map(td => ({
		Strategy: td.dataset.strategy, Scenario: td.dataset.scenario, Outcome: td.dataset.outcome,
		Text: td.innerText.trim(), Link: !!td.querySelector("a")}))`))
	require.NoError(t, err)
	rows, err := chromedp.Run(bctx, chromedp.Evaluate[int](`document.querySelectorAll("table.matrix tbody tr").length`))
	require.NoError(t, err)
	cols, err := chromedp.Run(bctx, chromedp.Evaluate[int](`document.querySelectorAll("table.matrix thead th.sc").length`))
	require.NoError(t, err)
	t.Logf("browser started and page loaded in %v (%s)", time.Since(start).Round(time.Millisecond), browsertest.Bin())
	check("on load")

	assert.Equal(t, len(m.Strategies), rows, "a row per strategy")
	assert.Equal(t, len(m.Scenarios), cols, "a column per scenario")
	require.Len(t, cells, len(testStrategies)*len(testScenarios), "a cell per strategy and scenario")
	seen := map[[2]string]int{}
	for _, c := range cells {
		seen[[2]string{c.Strategy, c.Scenario}]++
		want, ok := m.Cell(c.Strategy, c.Scenario)
		if !assert.True(t, ok, "cell %s × %s is not in the matrix", c.Strategy, c.Scenario) {
			continue
		}
		assert.Equal(t, string(want.Outcome), c.Outcome, "%s × %s", c.Strategy, c.Scenario)
		label := string(want.Outcome)
		assert.Contains(t, c.Text, label, "%s × %s: the outcome is written, not only coloured", c.Strategy, c.Scenario)
		assert.True(t, c.Link, "%s × %s can be clicked", c.Strategy, c.Scenario)
	}
	for _, st := range testStrategies {
		for _, sc := range testScenarios {
			assert.Equal(t, 1, seen[[2]string{st, sc}], "%s × %s: exactly one cell", st, sc)
		}
	}

	// Clicking a cell shows its details, and only those.
	open := func(cell [2]string) (text string, shown int) {
		t.Helper()
		id := cellID(cell[0], cell[1])
		sel := fmt.Sprintf(`td.cell[data-strategy=%q][data-scenario=%q] a`, cell[0], cell[1])
		require.NoError(t, chromedp.Do(bctx,
			chromedp.Click(chromedp.CSS(sel)),
			chromedp.WaitVisible(chromedp.CSS("#"+id)),
		), "clicking %s × %s", cell[0], cell[1])
		text, err := chromedp.Run(bctx, chromedp.Text(chromedp.CSS("#"+id)))
		require.NoError(t, err)
		shown, err = chromedp.Run(bctx, chromedp.Evaluate[int](`document.querySelectorAll("article.detail:not([hidden])").length`))
		require.NoError(t, err)
		return text, shown
	}

	text, shown := open(safeCell)
	assert.Equal(t, 1, shown, "one panel at a time")
	s, _ := m.Cell(safeCell[0], safeCell[1])
	assert.Contains(t, text, fmt.Sprintf("no violation within the bound, %d schedules", s.Schedules))

	text, shown = open(violatedCell)
	assert.Equal(t, 1, shown, "one panel at a time")
	v, _ := m.Cell(violatedCell[0], violatedCell[1])
	sc, err := harness.Lookup(violatedCell[1])
	require.NoError(t, err)
	tl := render.Timeline(v.Counterexample)
	var marker string
	for _, line := range strings.Split(tl, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "!! ") {
			marker = strings.TrimSpace(line)
			break
		}
	}
	require.NotEmpty(t, marker, "the timeline marks the violation:\n%s", tl)
	assert.Contains(t, text, marker, "the panel shows the timeline's violation marker")
	assert.Contains(t, text, "verdict: "+v.Counterexample.Verdict.String(), "the panel shows the timeline's verdict")
	assert.Contains(t, text, v.Message)
	assert.Contains(t, text, v.Schedule)
	assert.Contains(t, text, sc.Title)
	assert.Contains(t, text, sc.Source)
	active, err := chromedp.Run(bctx, chromedp.Evaluate[bool](fmt.Sprintf(
		`document.querySelector('td.cell[data-id=%q]').classList.contains("selected")`, cellID(violatedCell[0], violatedCell[1]))))
	require.NoError(t, err)
	assert.True(t, active, "the clicked cell is marked")
	check("after clicking cells")

	if out := os.Getenv("LOCKLAB_SCREENSHOT"); out != "" {
		png, err := chromedp.Run(bctx, chromedp.FullScreenshot(100))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(out, png, 0o644))
		t.Logf("screenshot written to %s", out)
	}
}
