package dashboard_test

import (
	"fmt"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/backlogq/backlog/adapters/httpapi"
)

// TestBrowserKinds: the Kinds screen lists the server's kinds with their
// defaults (here "flaky", handled by the stack's client with the default
// retry policy) and what any other kind gets.
func TestBrowserKinds(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a browser")
	}
	s := newStack(t, httpapi.Tokens{})
	ctx := browser(t)
	watch := watchPage(ctx)
	step(t, ctx, "load the kinds screen",
		chromedp.Navigate(s.url+"/dashboard/#/kinds"),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-testid="kind-row"][data-kind="flaky"]`)),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-testid="kind-row"][data-kind=""]`)))
	cell := func(kind, testid string) string {
		return eval[string](t, ctx, fmt.Sprintf(`document.querySelector('tr[data-testid="kind-row"][data-kind="%s"] [data-testid="%s"]').textContent`, kind, testid))
	}
	for _, c := range []struct{ kind, testid, want string }{
		{"flaky", "kind-name", "flaky"},
		{"flaky", "kind-handled", "yes"},
		{"flaky", "kind-max-attempts", "20"},
		{"flaky", "kind-retry", "exponential from 1 s up to 24 h, ±25 %"},
		{"flaky", "kind-timeout", "none"},
		{"", "kind-name", "(any other kind)"},
		{"", "kind-max-attempts", "20"},
	} {
		if got := cell(c.kind, c.testid); got != c.want {
			t.Errorf("kind %q %s = %q, want %q", c.kind, c.testid, got, c.want)
		}
	}
	if got := eval[string](t, ctx, `document.querySelector('[data-nav="kinds"]').getAttribute('aria-current')`); got != "page" {
		t.Errorf("the Kinds link is not marked current (%q)", got)
	}
	watch.check(t)
}

// TestBrowserJobPageWaitsForTheEnd: a job's page reads a job that is not
// final with a short long-poll (GET /v1/jobs/{id}?wait=1s), so its end
// shows when it happens; once final it reads it plainly.
func TestBrowserJobPageWaitsForTheEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a browser")
	}
	s := newStack(t, httpapi.Tokens{})
	id := s.submit(t, `{"kind":"held","queue":"nobody-works-this"}`)
	ctx := browser(t)
	watch := watchPage(ctx)
	step(t, ctx, "load the job's page",
		chromedp.Navigate(fmt.Sprintf("%s/dashboard/#/jobs/%d", s.url, id)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="job-detail-state"][data-value="available"]`)))
	waitJS(t, ctx, "a long-poll of the job", fmt.Sprintf(
		`performance.getEntriesByType('resource').some((e) => e.name.endsWith('/v1/jobs/%d?wait=1s'))`, id))
	if status, b := s.request(t, "POST", fmt.Sprintf("/v1/jobs/%d/cancel", id), ""); status != 200 {
		t.Fatalf("cancel: %d %s", status, b)
	}
	step(t, ctx, "the page shows the cancel",
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="job-detail-state"][data-value="cancelled"]`)))
	watch.check(t)
}
