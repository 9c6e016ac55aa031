//go:build browser

package play

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/locklab/locklab/internal/tooling/browsertest"
	"github.com/locklab/locklab/stores/postgres"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// page is a browser tab's problems and requests.
type page struct {
	mu       sync.Mutex
	problems []string
	requests []string
}

func (p *page) listen(t *testing.T, ctx context.Context) {
	require.NoError(t, chromedp.Listen(ctx, func(ev any) {
		p.mu.Lock()
		defer p.mu.Unlock()
		switch e := ev.(type) {
		case *runtime.EventConsoleAPICalled:
			if e.Type == runtime.ConsoleAPICalledTypeError {
				p.problems = append(p.problems, fmt.Sprintf("console.error: %v", e.Args))
			}
		case *runtime.EventExceptionThrown:
			d := e.ExceptionDetails
			msg := d.Text
			if d.Exception != nil {
				msg += " " + d.Exception.Description
			}
			p.problems = append(p.problems, fmt.Sprintf("exception at %d:%d: %s", d.LineNumber, d.ColumnNumber, msg))
		case *network.EventRequestWillBeSent:
			p.requests = append(p.requests, e.Request.URL)
		}
	}))
}

// newBrowser starts headless Chromium, or skips the test where there is
// none. On a loaded machine a browser takes long to start.
func newBrowser(t *testing.T) context.Context {
	return browsertest.New(t, 1300, 1000, 4*time.Minute)
}

// click clicks the button of step and waits for the page to show n steps,
// or an error, which it returns.
func click(step string, n int) chromedp.Action[chromedp.Void] {
	button := `button[data-step="` + step + `"]`
	return chromedp.Steps(
		// The button's own click, not a mouse event at where it was when
		// it was found: the page's layout may still move it (the levels'
		// list fills in), and a click that lands beside it is lost.
		chromedp.WaitVisible(chromedp.CSS(button)),
		chromedp.Func(func(ctx context.Context, _ *chromedp.Target) error {
			_, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.querySelector('`+button+`').click() === undefined`))
			return err
		}),
		chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf(`body[data-steps="%d"], #notice.error`, n))),
		chromedp.Func(func(ctx context.Context, _ *chromedp.Target) error {
			msg, err := chromedp.Run(ctx, chromedp.Evaluate[string](
				`(e => e.hidden || !e.classList.contains("error") ? "" : e.textContent)(document.getElementById("notice"))`))
			if err != nil {
				return err
			}
			if msg != "" {
				return fmt.Errorf("the page says: %s", msg)
			}
			return nil
		}),
	)
}

// text evaluates a JavaScript expression of type string in the tab.
func text(t *testing.T, ctx context.Context, expr string) string {
	t.Helper()
	s, err := chromedp.Run(ctx, chromedp.Evaluate[string](expr))
	require.NoError(t, err, expr)
	return s
}

// TestPlayInBrowser solves the C1/C2 level in headless Chromium by clicks
// alone, on a real redis-server: the page shows each client's next command,
// grows a row per click, and after the tenth shows the violation banner
// with its replay command, marks the row, and remembers the level as
// solved. Nothing is loaded from elsewhere and no script fails. With
// LOCKLAB_PLAY_SCREENSHOT set it saves a screenshot of the page there.
func TestPlayInBrowser(t *testing.T) {
	ts := newTestServer(t, Options{})
	bctx := newBrowser(t)
	var pg page
	pg.listen(t, bctx)
	require.NoError(t, chromedp.Do(bctx,
		chromedp.Navigate(ts.hs.URL+"/#c1c2"),
		chromedp.WaitVisible(chromedp.CSS(`body[data-steps="0"]`)),
	))
	first := text(t, bctx, `document.querySelector('button[data-step="c3"]').textContent`)
	assert.Contains(t, first, "c3: acquire")
	for i, st := range c1c2 {
		require.NoError(t, chromedp.Do(bctx, click(st, i+1)), "step %d (%s)", i+1, st)
		if i == 8 {
			// The button shows c2's SETNX with the key, before it runs.
			next := text(t, bctx, `document.querySelector('button[data-step="c2"]').textContent`)
			assert.Contains(t, next, "c2: SETNX lock:stale-recovery @62.0")
		}
	}
	require.NoError(t, chromedp.Do(bctx, chromedp.WaitVisible(chromedp.CSS(`#banner`))))
	banner := text(t, bctx, `document.getElementById("banner-title").textContent`)
	replay := text(t, bctx, `document.getElementById("banner-replay").textContent`)
	solvedClass := text(t, bctx, `document.getElementById("level-c1c2").className`)
	rowClass := text(t, bctx, `document.getElementById("row-10").className`)
	key := text(t, bctx, `document.querySelector("#row-10 td.key").textContent`)
	assert.Contains(t, banner, "VIOLATED (mutual-exclusion) at step 10")
	assert.Contains(t, banner, "level solved")
	assert.Contains(t, replay, "--schedule 'c3 time c1 c2 c1 c2 c1 c1 c2 c2'")
	assert.Contains(t, solvedClass, "solved")
	assert.Contains(t, rowClass, "violation")
	assert.Equal(t, "c2's", key)

	if out := os.Getenv("LOCKLAB_PLAY_SCREENSHOT"); out != "" {
		png, err := chromedp.Run(bctx, chromedp.FullScreenshot(100))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(out, png, 0o644))
		t.Logf("screenshot written to %s", out)
	}

	// Undo in the browser: nine steps, no banner.
	require.NoError(t, chromedp.Do(bctx,
		chromedp.Click(chromedp.CSS(`#undo`)),
		chromedp.WaitVisible(chromedp.CSS(`body[data-steps="9"]`)),
	))
	hidden, err := chromedp.Run(bctx, chromedp.Evaluate[bool](`document.getElementById("banner").hidden`))
	require.NoError(t, err)
	assert.True(t, hidden, "the banner is gone after undo")

	pg.mu.Lock()
	defer pg.mu.Unlock()
	assert.Empty(t, pg.problems)
	for _, u := range pg.requests {
		assert.True(t, strings.HasPrefix(u, ts.hs.URL), "request outside the server: %s", u)
	}
}

// TestPlayTabsAtOnce opens three tabs at once: each gets a session of its
// own and plays it independently; a fourth, over the cap, shows that the
// room is full.
func TestPlayTabsAtOnce(t *testing.T) {
	ts := newTestServer(t, Options{MaxSessions: 3})
	bctx := newBrowser(t)
	steps := [][]string{{"c3"}, {"c3", "time"}, {"c1", "c2", "c1"}}
	var wg sync.WaitGroup
	errs := make([]error, len(steps))
	for i, ss := range steps {
		tab, cancel := chromedp.NewContext(bctx)
		t.Cleanup(cancel)
		wg.Add(1)
		go func() {
			defer wg.Done()
			tasks := []chromedp.Action[chromedp.Void]{
				chromedp.Navigate(ts.hs.URL + "/#c1c2"),
				chromedp.WaitVisible(chromedp.CSS(`body[data-steps="0"]`)),
			}
			for k, st := range ss {
				tasks = append(tasks, click(st, k+1))
			}
			errs[i] = chromedp.Do(tab, tasks...)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		require.NoError(t, err, "tab %d", i+1)
	}
	assert.Equal(t, 3, ts.srv.Sessions())
	// Each tab's run is its own: the third tab's c1 acquired, although c3
	// holds the lock in the first two.
	ts.srv.m.mu.Lock()
	var ids []string
	for id := range ts.srv.m.byID {
		ids = append(ids, id)
	}
	ts.srv.m.mu.Unlock()
	seen := map[string]bool{}
	for _, id := range ids {
		s, _ := ts.srv.m.get(id)
		s.mu.Lock()
		seen[s.run.State().Schedule] = true
		s.mu.Unlock()
	}
	assert.Equal(t, map[string]bool{"c3": true, "c3 time": true, "c1 c2 c1": true}, seen)

	full, cancel := chromedp.NewContext(bctx)
	t.Cleanup(cancel)
	require.NoError(t, chromedp.Do(full,
		chromedp.Navigate(ts.hs.URL+"/"),
		chromedp.WaitVisible(chromedp.CSS(`#notice`)),
	))
	assert.Contains(t, text(t, full, `document.getElementById("notice").textContent`), "the room is full")
}

// TestPlayRecoversEndedSession: when the server has closed a tab's session
// (idle too long), the next click starts a new one, replays the steps the
// tab had, and runs the click.
func TestPlayRecoversEndedSession(t *testing.T) {
	ts := newTestServer(t, Options{})
	bctx := newBrowser(t)
	require.NoError(t, chromedp.Do(bctx,
		chromedp.Navigate(ts.hs.URL+"/#c1c2"),
		chromedp.WaitVisible(chromedp.CSS(`body[data-steps="0"]`)),
		click("c3", 1),
	))
	ts.srv.m.mu.Lock()
	var id string
	for k := range ts.srv.m.byID {
		id = k
	}
	ts.srv.m.mu.Unlock()
	require.True(t, ts.srv.m.remove(id))
	require.NoError(t, chromedp.Do(bctx, click("time", 2)))
	shown, err := chromedp.Run(bctx, chromedp.Evaluate[bool](`!document.getElementById("notice").hidden`))
	require.NoError(t, err)
	assert.True(t, shown, "the page says what happened")
	assert.Contains(t, text(t, bctx, `document.getElementById("notice").textContent`), "a new one replayed your steps")
	assert.Equal(t, "c3 time", text(t, bctx, `cur.state.schedule`))
	assert.Equal(t, 1, ts.srv.Sessions())
}

// TestPlayEtcdLevelInBrowser solves the etcd level by clicks, on a real
// three-member etcd cluster, and shows a level whose servers are not
// installed as unavailable, with the reason, without leaving the level
// being played.
func TestPlayEtcdLevelInBrowser(t *testing.T) {
	ts := newTestServer(t, Options{Installed: func(store string) error {
		if store == postgres.Name {
			return errors.New("PostgreSQL server binaries (initdb, postgres) not found")
		}
		return nil
	}})
	bctx := newBrowser(t)
	var pg page
	pg.listen(t, bctx)
	require.NoError(t, chromedp.Do(bctx,
		chromedp.Navigate(ts.hs.URL+"/#etcd-pause"),
		chromedp.WaitVisible(chromedp.CSS(`body[data-steps="0"]`)),
	))
	assert.Contains(t, text(t, bctx, `document.getElementById("level-meta").textContent`), "a three-member etcd cluster")
	sched := strings.Fields("c1 c1 c1 c2 c2 c2 c1")
	for i, st := range sched {
		require.NoError(t, chromedp.Do(bctx, click(st, i+1)), "step %d (%s)", i+1, st)
	}
	require.NoError(t, chromedp.Do(bctx, chromedp.WaitVisible(chromedp.CSS(`#banner`))))
	banner := text(t, bctx, `document.getElementById("banner-title").textContent`)
	assert.Contains(t, banner, "VIOLATED (fencing) at step 7")
	assert.Contains(t, banner, "level solved")
	assert.Contains(t, text(t, bctx, `document.getElementById("level-etcd-pause").className`), "solved")

	// The PostgreSQL level is listed, unavailable; choosing it says why
	// and keeps the etcd run.
	assert.Contains(t, text(t, bctx, `document.getElementById("level-pg-restart").className`), "unavailable")
	assert.Contains(t, text(t, bctx, `document.getElementById("level-pg-restart").textContent`), "unavailable here")
	require.NoError(t, chromedp.Do(bctx,
		chromedp.Click(chromedp.CSS(`#level-pg-restart a`)),
		chromedp.WaitVisible(chromedp.CSS(`#notice`)),
	))
	assert.Contains(t, text(t, bctx, `document.getElementById("notice").textContent`), "not found")
	assert.Equal(t, "", text(t, bctx, `document.getElementById("notice").classList.contains("error") ? "error" : ""`), "not shown as an error")
	assert.Equal(t, strings.Join(sched, " "), text(t, bctx, `cur.state.schedule`))

	pg.mu.Lock()
	defer pg.mu.Unlock()
	assert.Empty(t, pg.problems)
}
