package dashboard_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/backlogq/backlog/adapters/httpapi"
	"github.com/backlogq/backlog/core"
)

// periodicStatus reads one periodic job's status through the API.
func (s *stack) periodicStatus(t *testing.T, name string) core.PeriodicStatus {
	t.Helper()
	status, b := s.request(t, "GET", "/v1/periodic", "")
	if status != http.StatusOK {
		t.Fatalf("GET /v1/periodic = %d %s", status, b)
	}
	var out struct {
		Periodic []core.PeriodicStatus `json:"periodic"`
	}
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("GET /v1/periodic answer %s: %v", b, err)
	}
	for _, p := range out.Periodic {
		if p.Name == name {
			return p
		}
	}
	t.Fatalf("GET /v1/periodic lacks %q: %s", name, b)
	return core.PeriodicStatus{}
}

// clickJS clicks the element sel selects from a script: the rows of the
// periodic screen change width while "ticker" runs every second, so a
// click at coordinates may land beside its target.
func clickJS(sel string) chromedp.Action[chromedp.Void] {
	return chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`document.querySelector(%s).click()`, js(sel)))
}

// TestBrowserPeriodic: the Periodic screen lists the server's schedules
// with their settings and UTC times, links the last run to its job, shows
// the API's refusal of Pause to the producer token, and with the admin
// token pauses, resumes and runs a schedule now after confirmation.
func TestBrowserPeriodic(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a browser")
	}
	const producer, admin = "producer-secret-1", "admin-secret-2"
	// "ticker" enqueues a job every second on queue "cron", which nothing
	// works here; "nightly" fires at 03:00 UTC.
	s := newStack(t, httpapi.Tokens{Producer: producer, Admin: admin},
		core.PeriodicJob{Name: "ticker", Schedule: "@every 1s", Kind: "tick", Options: core.Options{Queue: "cron"}},
		core.PeriodicJob{Name: "nightly", Schedule: "0 3 * * *", Kind: "cleanup", Options: core.Options{Queue: "maintenance"}, Missed: core.MissedSkip},
	)
	ctx := browser(t)
	watch := watchPage(ctx)

	step(t, ctx, "load the periodic screen",
		chromedp.Navigate(s.url+"/dashboard/#/periodic"),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="token-input"]`)),
		chromedp.SendKeys(chromedp.CSS(`[data-testid="token-input"]`), producer),
		chromedp.Click(chromedp.CSS(`[data-testid="token-save"]`)))
	nightly := `tr[data-testid="periodic-row"][data-name="nightly"]`
	ticker := `tr[data-testid="periodic-row"][data-name="ticker"]`
	step(t, ctx, "both schedules are listed", chromedp.WaitVisible(chromedp.CSS(nightly)), chromedp.WaitVisible(chromedp.CSS(ticker)))
	if got := eval[[]string](t, ctx, `Array.from(document.querySelectorAll('[data-testid="periodic-name"]'), (e) => e.textContent)`); len(got) != 2 || got[0] != "nightly" || got[1] != "ticker" {
		t.Errorf("rows %q, want nightly then ticker", got)
	}
	if got := eval[string](t, ctx, `document.querySelector('[data-nav="periodic"]').getAttribute('aria-current')`); got != "page" {
		t.Errorf("the Periodic link is not marked current (%q)", got)
	}
	cell := func(row, testid string) string {
		return eval[string](t, ctx, fmt.Sprintf(`document.querySelector(%s).querySelector('[data-testid="%s"]').textContent`, js(row), testid))
	}
	for testid, want := range map[string]string{
		"periodic-schedule": "0 3 * * *", "periodic-kind": "cleanup", "periodic-queue": "maintenance",
		"periodic-missed": "skip", "periodic-paused": "active", "periodic-last-run": "never",
	} {
		if got := cell(nightly, testid); got != want {
			t.Errorf("nightly %s shows %q, want %q", testid, got, want)
		}
	}
	// Times are shown in UTC and say so.
	headers := eval[string](t, ctx, `document.querySelector('[data-testid="periodic-table"] thead').textContent`)
	if !strings.Contains(headers, "Last run (UTC)") || !strings.Contains(headers, "Next run (UTC)") {
		t.Errorf("headers %q do not label the times UTC", headers)
	}
	next := s.periodicStatus(t, "nightly").NextRunAt
	if got, want := cell(nightly, "periodic-next-run"), next.UTC().Format(time.DateTime)+" UTC"; got != want {
		t.Errorf("nightly next run shows %q, want %q", got, want)
	}

	// The ticker's last run links to its job.
	waitJS(t, ctx, "the ticker's last run is linked", fmt.Sprintf(`!!document.querySelector(%s)?.querySelector('[data-testid="periodic-last-job"]')`, js(ticker)))
	if got := cell(ticker, "periodic-last-run"); !strings.HasSuffix(strings.Fields(got)[2], "UTC") {
		t.Errorf("ticker last run shows %q, want a UTC time and its job", got)
	}
	href := eval[string](t, ctx, fmt.Sprintf(`(() => { const a = document.querySelector(%s).querySelector('[data-testid="periodic-last-job"]'); const h = a.getAttribute('href'); a.click(); return h; })()`, js(ticker)))
	var lastID int64
	if _, err := fmt.Sscanf(href, "#/jobs/%d", &lastID); err != nil || lastID <= 0 {
		t.Fatalf("last job link %q", href)
	}
	detail := fmt.Sprintf(`[data-testid="job-detail"][data-job-id="%d"]`, lastID)
	step(t, ctx, "the link opens the job", chromedp.WaitVisible(chromedp.CSS(detail)))
	if got := eval[string](t, ctx, `document.querySelector('[data-testid="job-metadata"]').textContent`); !strings.Contains(got, core.PeriodicMetadataName) || !strings.Contains(got, "ticker") {
		t.Errorf("the linked job's metadata shows %q", got)
	}

	// The producer token may list but not pause: the refusal is shown and
	// nothing changes.
	step(t, ctx, "back to the periodic screen",
		chromedp.Evaluate[chromedp.Void](`location.hash = "#/periodic"`),
		chromedp.WaitVisible(chromedp.CSS(nightly)))
	step(t, ctx, "pause nightly with the producer token",
		clickJS(nightly+` [data-testid="periodic-pause-toggle"]`),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="confirm-ok"]`)),
		clickJS(`[data-testid="confirm-ok"]`))
	waitJS(t, ctx, "the refusal is shown", `!document.querySelector('[data-testid="action-error"]').hidden`)
	if got := eval[string](t, ctx, `document.querySelector('[data-testid="action-error"]').textContent`); !strings.Contains(got, "Could not pause periodic job nightly") || !strings.Contains(got, "Forbidden") {
		t.Errorf("action error shows %q", got)
	}
	if s.periodicStatus(t, "nightly").Paused {
		t.Fatal("the producer token paused nightly")
	}

	step(t, ctx, "enter the admin token",
		chromedp.Click(chromedp.CSS(`[data-testid="token-button"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="token-input"]`)),
		chromedp.SendKeys(chromedp.CSS(`[data-testid="token-input"]`), admin),
		chromedp.Click(chromedp.CSS(`[data-testid="token-save"]`)))

	// Cancelling the confirmation pauses nothing.
	step(t, ctx, "press Pause and cancel",
		clickJS(nightly+` [data-testid="periodic-pause-toggle"]`),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="confirm-cancel"]`)),
		clickJS(`[data-testid="confirm-cancel"]`))
	if s.periodicStatus(t, "nightly").Paused {
		t.Fatal("a cancelled confirmation paused nightly")
	}
	step(t, ctx, "pause nightly",
		clickJS(nightly+` [data-testid="periodic-pause-toggle"]`),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="confirm-ok"]`)),
		clickJS(`[data-testid="confirm-ok"]`))
	waitJS(t, ctx, "nightly shows as paused", fmt.Sprintf(`document.querySelector(%s)?.dataset.paused === "true"`, js(nightly)))
	if got := cell(nightly, "periodic-paused"); got != "paused" {
		t.Errorf("status shows %q", got)
	}
	if got := cell(nightly, "periodic-next-run"); !strings.Contains(got, "paused") {
		t.Errorf("next run of a paused schedule shows %q", got)
	}
	if got := eval[string](t, ctx, `document.querySelector('[data-testid="action-result"]').textContent`); got != "Periodic job nightly paused." {
		t.Errorf("action result shows %q", got)
	}
	if !s.periodicStatus(t, "nightly").Paused {
		t.Fatal("the API does not show nightly paused")
	}
	step(t, ctx, "resume nightly", clickJS(nightly+` [data-testid="periodic-pause-toggle"]`))
	waitJS(t, ctx, "nightly shows as active", fmt.Sprintf(`document.querySelector(%s)?.dataset.paused === "false"`, js(nightly)))
	if s.periodicStatus(t, "nightly").Paused {
		t.Fatal("the API still shows nightly paused")
	}

	// Run now enqueues a job and links to it.
	step(t, ctx, "run nightly now",
		clickJS(nightly+` [data-testid="periodic-run-now"]`),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="confirm-ok"]`)),
		clickJS(`[data-testid="confirm-ok"]`),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="run-job-link"]`)))
	runHref := eval[string](t, ctx, `document.querySelector('[data-testid="run-job-link"]').getAttribute('href')`)
	var runID int64
	if _, err := fmt.Sscanf(runHref, "#/jobs/%d", &runID); err != nil || runID <= 0 {
		t.Fatalf("run link %q", runHref)
	}
	status, b := s.request(t, "GET", fmt.Sprintf("/v1/jobs/%d", runID), "")
	var job struct {
		Job httpapi.Job `json:"job"`
	}
	if status != http.StatusOK || json.Unmarshal(b, &job) != nil || job.Job.Kind != "cleanup" || job.Job.Queue != "maintenance" ||
		job.Job.Metadata[core.PeriodicMetadataName] != "nightly" {
		t.Fatalf("the job run now: %d %s", status, b)
	}
	step(t, ctx, "open the job run now",
		chromedp.Click(chromedp.CSS(`[data-testid="run-job-link"]`)),
		chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf(`[data-testid="job-detail"][data-job-id="%d"]`, runID))))
	watch.check(t)
}
