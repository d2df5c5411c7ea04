package dashboard_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/backlogq/backlog/adapters/httpapi"
)

// TestBrowserUniqueKeys: the Unique keys screen refuses the producer
// token with a clear message; with the admin token it lists the held keys
// (a deleted job's as gone, with when the hold ends; a live job's without
// a Release it could use) and releases a gone job's key after
// confirmation, after which the key makes a new job.
func TestBrowserUniqueKeys(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a browser")
	}
	const producer, admin = "producer-secret-1", "admin-secret-2"
	s := newStack(t, httpapi.Tokens{Producer: producer, Admin: admin})
	ctx := browser(t)
	watch := watchPage(ctx)
	// Queue "held" is worked by nothing here.
	gone := s.submit(t, `{"kind":"report","queue":"held","unique_key":"tenant-42","unique_for_seconds":86400}`)
	for _, c := range []struct{ method, path string }{{"POST", fmt.Sprintf("/v1/jobs/%d/cancel", gone)}, {"DELETE", fmt.Sprintf("/v1/jobs/%d", gone)}} {
		if status, b := s.request(t, c.method, c.path, ""); status != http.StatusOK && status != http.StatusNoContent {
			t.Fatalf("%s %s = %d %s", c.method, c.path, status, b)
		}
	}
	live := s.submit(t, `{"kind":"mail","queue":"held","unique_key":"welcome","unique_scope":"queue"}`)

	step(t, ctx, "load the unique keys screen with the producer token",
		chromedp.Navigate(s.url+"/dashboard/#/unique"),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="token-input"]`)),
		chromedp.SendKeys(chromedp.CSS(`[data-testid="token-input"]`), producer),
		chromedp.Click(chromedp.CSS(`[data-testid="token-save"]`)))
	waitJS(t, ctx, "the producer is refused", `(() => {
		const f = document.querySelector('[data-testid="unique-forbidden"]');
		return f && !f.hidden && f.textContent.includes("admin");
	})()`)
	step(t, ctx, "enter the admin token",
		chromedp.Click(chromedp.CSS(`[data-testid="token-button"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="token-input"]`)),
		chromedp.SendKeys(chromedp.CSS(`[data-testid="token-input"]`), admin),
		chromedp.Click(chromedp.CSS(`[data-testid="token-save"]`)))
	goneRow := `tr[data-testid="unique-row"][data-scoped-key="g:tenant-42"]`
	liveRow := `tr[data-testid="unique-row"][data-scoped-key="q4:held:welcome"]`
	step(t, ctx, "both holds are listed", chromedp.WaitVisible(chromedp.CSS(goneRow)), chromedp.WaitVisible(chromedp.CSS(liveRow)))
	cell := func(row, testid string) string {
		return eval[string](t, ctx, fmt.Sprintf(`document.querySelector(%s).querySelector('[data-testid="%s"]').textContent`, js(row), testid))
	}
	for row, want := range map[string]map[string]string{
		goneRow: {"unique-key": "tenant-42", "unique-scope": "global", "unique-state": "gone", "unique-job": fmt.Sprintf("job %d", gone), "unique-window": "24 h"},
		liveRow: {"unique-key": "welcome", "unique-scope": "queue", "unique-queue": "held", "unique-state": "available", "unique-job": fmt.Sprintf("job %d", live), "unique-until": "while the job lives"},
	} {
		for testid, w := range want {
			if got := cell(row, testid); got != w {
				t.Errorf("%s %s shows %q, want %q", row, testid, got, w)
			}
		}
	}
	if got := cell(goneRow, "unique-until"); !strings.Contains(got, "-") {
		t.Errorf("the gone job's hold shows until %q, want a time", got)
	}
	if !eval[bool](t, ctx, fmt.Sprintf(`document.querySelector(%s).querySelector('[data-testid="unique-release"]').disabled`, js(liveRow))) {
		t.Errorf("Release is enabled for a live job's key")
	}

	step(t, ctx, "release the gone job's key",
		clickJS(goneRow+` [data-testid="unique-release"]`),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="confirm-ok"]`)),
		chromedp.Click(chromedp.CSS(`[data-testid="confirm-ok"]`)))
	waitJS(t, ctx, "the release is reported", `(() => {
		const m = document.querySelector('[data-testid="action-result"]');
		return m && !m.hidden && m.textContent.includes("tenant-42 released");
	})()`)
	waitJS(t, ctx, "the released key is no longer listed", fmt.Sprintf(`!document.querySelector(%s)`, js(goneRow)))
	if status, b := s.request(t, "GET", "/v1/unique", ""); status != http.StatusOK || strings.Contains(string(b), "tenant-42") || !strings.Contains(string(b), "welcome") {
		t.Errorf("GET /v1/unique after the release = %d %s", status, b)
	}
	if id := s.submit(t, `{"kind":"report","queue":"held","unique_key":"tenant-42"}`); id == gone {
		t.Errorf("the key still returns job %d after its release", gone)
	}
	watch.check(t)
}
