// Package browsertest starts Debian's headless Chromium for tests that
// drive the dashboard through chromedp. Without the browser a test skips,
// or fails when BACKLOG_REQUIRE_BROWSER=1 (CI installs it with
// scripts/install-chromium.sh).
package browsertest

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// ChromiumPath is where Debian's chromium package puts the browser.
const ChromiumPath = "/usr/bin/chromium"

// StepTimeout bounds one browser step; the machine may be slow and loaded.
const StepTimeout = 90 * time.Second

// Start starts headless Chromium for t, or skips t when it is not
// installed (failing instead when BACKLOG_REQUIRE_BROWSER=1). The returned
// context drives one tab; the browser and its profile go away when t ends.
func Start(t *testing.T) context.Context {
	t.Helper()
	if _, err := os.Stat(ChromiumPath); err != nil {
		if os.Getenv("BACKLOG_REQUIRE_BROWSER") == "1" {
			t.Fatalf("BACKLOG_REQUIRE_BROWSER=1 but %s is missing (run scripts/install-chromium.sh): %v", ChromiumPath, err)
		}
		t.Skipf("%s is missing (scripts/install-chromium.sh installs it); set BACKLOG_REQUIRE_BROWSER=1 to fail instead", ChromiumPath)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(ChromiumPath),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		// Without these the closed network here makes Chromium hang on
		// lookups of its own services.
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 900),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(actx, chromedp.WithErrorf(func(format string, args ...any) {
		t.Logf("chromedp: "+format, args...)
	}))
	t.Cleanup(func() {
		cancelTab()
		cancelAlloc()
	})
	// Start the browser with the tab's own context (the first Run binds the
	// browser's life to the context it gets), bounded from outside.
	started := make(chan error, 1)
	go func() { started <- chromedp.Do(ctx) }()
	select {
	case err := <-started:
		if err != nil {
			t.Fatalf("start %s: %v", ChromiumPath, err)
		}
	case <-time.After(StepTimeout):
		cancelTab()
		cancelAlloc()
		t.Fatalf("%s did not start within %s", ChromiumPath, StepTimeout)
	}
	return ctx
}

// WaitJS waits until the JavaScript expression is truthy in the tab, and
// fails t with the page's text when it does not become so in StepTimeout.
func WaitJS(t *testing.T, ctx context.Context, what, expr string) {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, StepTimeout+5*time.Second)
	defer cancel()
	_, err := chromedp.Run(sctx, chromedp.Poll[chromedp.Void](expr,
		chromedp.WithPollingTimeout(StepTimeout), chromedp.WithPollingInterval(50*time.Millisecond)))
	if err != nil {
		dctx, dcancel := context.WithTimeout(ctx, 10*time.Second)
		defer dcancel()
		dump, _ := chromedp.Run(dctx, chromedp.Evaluate[string](`document.body.innerText`))
		t.Fatalf("%s: waiting for %s: %v\npage shows:\n%s", what, expr, err, dump)
	}
}
