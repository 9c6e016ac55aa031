//go:build browser

// Package browsertest starts headless Chromium for the tests that drive a
// page in a real browser (chromedp): the HTML report and locklab play. It
// and those tests build only with -tags browser (make test-long, CI).
package browsertest

import (
	"context"
	"os/exec"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// Bin is the path of a Chromium or Chrome on PATH, or "".
func Bin() string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// New starts a headless browser with a window of width x height and
// returns its context, or skips the test where there is no browser. The
// browser is gone when the test ends; one that hangs fails the test after
// timeout instead of hanging it.
func New(t testing.TB, width, height int, timeout time.Duration) context.Context {
	t.Helper()
	bin := Bin()
	if bin == "" {
		t.Skip("no chromium, chromium-browser or google-chrome on PATH: install chromium (apt-get install chromium) to run the browser test")
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(bin),
		chromedp.NoSandbox, // root in CI
		chromedp.Flag("headless", "new"),
		chromedp.DisableGPU,
		chromedp.WindowSize(width, height),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	t.Cleanup(cancelAlloc)
	bctx, cancelBrowser := chromedp.NewContext(actx)
	t.Cleanup(func() {
		// Close the browser gracefully, then make sure its process is gone.
		_ = chromedp.Cancel(bctx)
		cancelBrowser()
	})
	if err := chromedp.Do(bctx); err != nil {
		t.Fatalf("starting %s: %v", bin, err)
	}
	return bctx
}
