package dashboard_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/backlogq/backlog/adapters/httpapi"
)

// rowSel is the CSS selector of job id's row in the jobs list.
func rowSel(id int64) string { return fmt.Sprintf(`tr[data-testid="job-row"][data-job-id="%d"]`, id) }

// shownIDs returns the ids of the rows the jobs list shows, in order.
func shownIDs(t *testing.T, ctx context.Context) []int64 {
	t.Helper()
	return eval[[]int64](t, ctx, `Array.from(document.querySelectorAll('tr[data-testid="job-row"]'), (r) => Number(r.dataset.jobId))`)
}

// waitRows waits until the jobs list shows exactly ids, in any order.
func waitRows(t *testing.T, ctx context.Context, what string, ids ...int64) {
	t.Helper()
	want := make([]string, len(ids))
	for i, id := range ids {
		want[i] = fmt.Sprint(id)
	}
	waitJS(t, ctx, what, fmt.Sprintf(`(() => {
		const got = Array.from(document.querySelectorAll('tr[data-testid="job-row"]'), (r) => r.dataset.jobId).sort().join(',');
		return got === %s;
	})()`, js(strings.Join(sortedStrings(want), ","))))
}

func sortedStrings(s []string) []string {
	out := append([]string(nil), s...)
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}

// countState counts the jobs in state through the API.
func (s *stack) countState(t *testing.T, state string) int {
	t.Helper()
	status, b := s.request(t, "GET", "/v1/jobs?limit=1000&state="+state, "")
	if status != http.StatusOK {
		t.Fatalf("list %s: %d %s", state, status, b)
	}
	var out struct {
		Jobs []json.RawMessage `json:"jobs"`
	}
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return len(out.Jobs)
}

// TestBrowserTriageFilters: several states at once (from the hash and from
// the checkboxes), the last error shown in the list, times labelled with
// the browser's zone, and args search.
func TestBrowserTriageFilters(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a browser")
	}
	s := newStack(t, httpapi.Tokens{})
	ctx := browser(t)
	watch := watchPage(ctx)

	failed := s.submit(t, `{"kind":"flaky","args":{"n":1}}`)
	later := s.submit(t, fmt.Sprintf(`{"kind":"flaky","run_at":%q}`, time.Now().Add(time.Hour).UTC().Format(time.RFC3339)))
	held := s.submit(t, `{"kind":"other","queue":"held","args":{"customer":7}}`)
	wanted := s.submit(t, `{"kind":"other","queue":"held","args":{"customer":8,"plan":"pro"}}`)

	step(t, ctx, "open the jobs list on discarded and scheduled jobs",
		chromedp.Navigate(s.url+"/dashboard/#/jobs?state=discarded,scheduled"),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="jobs-table"]`)))
	waitJS(t, ctx, "the flaky job is discarded", fmt.Sprintf(`document.querySelector(%s)?.dataset.state === "discarded"`, js(rowSel(failed))))
	waitRows(t, ctx, "only the discarded and the scheduled job are listed", failed, later)
	checked := eval[[]string](t, ctx, `Array.from(document.querySelectorAll('[data-testid="filter-state"] input:checked'), (b) => b.value)`)
	if strings.Join(checked, ",") != "scheduled,discarded" {
		t.Errorf("checked states %v; want scheduled and discarded", checked)
	}
	if got := eval[string](t, ctx, fmt.Sprintf(`document.querySelector(%s).querySelector('[data-testid="job-error-last"]').textContent`, js(rowSel(failed)))); !strings.Contains(got, "not fixed yet") {
		t.Errorf("the error column shows %q", got)
	}
	if got := eval[string](t, ctx, fmt.Sprintf(`document.querySelector(%s).querySelector('[data-testid="job-error-last"]').textContent`, js(rowSel(later)))); got != "" {
		t.Errorf("a job without errors shows %q in the error column", got)
	}
	when := eval[string](t, ctx, fmt.Sprintf(`document.querySelector(%s).querySelector('[data-testid="job-when"]').title`, js(rowSel(later))))
	zone := eval[string](t, ctx, `Intl.DateTimeFormat().resolvedOptions().timeZone`)
	if !strings.Contains(when, zone) || !strings.Contains(when, " UTC") {
		t.Errorf("the run time's title %q does not name the zone %q and UTC", when, zone)
	}
	if got := eval[string](t, ctx, `document.querySelector('[data-testid="time-zone"]').textContent`); !strings.Contains(got, zone) {
		t.Errorf("the zone note says %q; want %q in it", got, zone)
	}

	step(t, ctx, "untick scheduled", chromedp.Click(chromedp.CSS(`[data-testid="filter-state-scheduled"]`)))
	waitJS(t, ctx, "the hash keeps the one state", `location.hash === "#/jobs?state=discarded"`)
	waitRows(t, ctx, "only the discarded job is listed", failed)
	step(t, ctx, "the failed shortcut", chromedp.Click(chromedp.CSS(`[data-testid="filter-failed"]`)))
	waitJS(t, ctx, "the hash names discarded and retryable", `location.hash === "#/jobs?state=retryable%2Cdiscarded"`)

	// Args search: JSON containment.
	step(t, ctx, "search args",
		chromedp.Navigate(s.url+"/dashboard/#/jobs"),
		chromedp.WaitVisible(chromedp.CSS(rowSel(held))),
		chromedp.SendKeys(chromedp.CSS(`[data-testid="filter-args"]`), `{"customer": 8}`),
		chromedp.Click(chromedp.CSS(`[data-testid="filter-apply"]`)))
	waitRows(t, ctx, "only the job whose args contain customer 8", wanted)
	if got := eval[string](t, ctx, `document.querySelector('[data-testid="args-note"]').textContent`); !strings.Contains(got, "Sealed") {
		t.Errorf("the args note says %q; want it to say sealed args are not searched", got)
	}
	step(t, ctx, "an args search that is not an object",
		chromedp.Navigate(s.url+"/dashboard/#/jobs?args="+`%5B1%5D`))
	waitJS(t, ctx, "the page says what is wrong", `document.querySelector('[data-testid="args-note"]')?.textContent.includes("must be a JSON object")`)
	if n := len(shownIDs(t, ctx)); n != 0 {
		t.Errorf("an invalid args search lists %d jobs", n)
	}
	watch.check(t)
}

// TestBrowserBulkRetryAllMatching: "all matching this filter", then Retry:
// the confirmation gives the count of the server's dry run, and the server
// retries every matching job.
func TestBrowserBulkRetryAllMatching(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a browser")
	}
	s := newStack(t, httpapi.Tokens{})
	ctx := browser(t)
	watch := watchPage(ctx)

	var ids []int64
	for i := range 3 {
		ids = append(ids, s.submit(t, fmt.Sprintf(`{"kind":"flaky","args":{"n":%d}}`, i)))
	}
	other := s.submit(t, `{"kind":"other","queue":"held"}`)
	step(t, ctx, "open the discarded jobs",
		chromedp.Navigate(s.url+"/dashboard/#/jobs?state=discarded"),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="jobs-table"]`)))
	waitRows(t, ctx, "the three jobs are discarded", ids...)
	if n := s.countState(t, "discarded"); n != 3 {
		t.Fatalf("%d discarded jobs, want 3", n)
	}

	step(t, ctx, "select all matching", chromedp.Click(chromedp.CSS(`[data-testid="bulk-select-all"]`)))
	waitJS(t, ctx, "the bar says every matching job", `document.querySelector('[data-testid="bulk-bar"]').dataset.mode === "all" && document.querySelector('[data-testid="bulk-count"]').textContent.includes("state discarded")`)
	s.fixed.Store(true)
	step(t, ctx, "press Retry", chromedp.Click(chromedp.CSS(`[data-testid="bulk-retry"]`)))
	waitJS(t, ctx, "the confirmation opens", `document.getElementById('confirm-dialog').open`)
	if got := eval[string](t, ctx, `document.getElementById('confirm-title').textContent`); got != "Retry 3 jobs?" {
		t.Errorf("confirmation title %q; want the dry run's count, \"Retry 3 jobs?\"", got)
	}
	if got := eval[string](t, ctx, `document.getElementById('confirm-text').textContent`); !strings.Contains(got, "3 jobs matching") || !strings.Contains(got, "discarded") {
		t.Errorf("confirmation text %q", got)
	}
	if n := s.countState(t, "discarded"); n != 3 {
		t.Fatalf("the dry run changed jobs: %d discarded", n)
	}
	step(t, ctx, "confirm", chromedp.Click(chromedp.CSS(`[data-testid="confirm-ok"]`)))
	waitJS(t, ctx, "the result is reported", `document.querySelector('[data-testid="bulk-result"]').textContent.startsWith("3 of 3 jobs retried")`)
	waitJS(t, ctx, "the list empties", `document.querySelectorAll('tr[data-testid="job-row"]').length === 0`)
	deadline := time.Now().Add(60 * time.Second)
	for s.countState(t, "completed") != 3 {
		if time.Now().After(deadline) {
			t.Fatalf("the retried jobs did not complete: %d completed", s.countState(t, "completed"))
		}
		time.Sleep(100 * time.Millisecond)
	}
	if n := s.countState(t, "available"); n != 1 {
		t.Errorf("%d available jobs; the job outside the filter (%d) must stay available", n, other)
	}

	// Selected ids: delete one job by its checkbox.
	step(t, ctx, "list the completed jobs",
		chromedp.Navigate(s.url+"/dashboard/#/jobs?state=completed"),
		chromedp.WaitVisible(chromedp.CSS(rowSel(ids[1]))),
		chromedp.Click(chromedp.CSS(rowSel(ids[1])+` [data-testid="job-select"]`)))
	waitJS(t, ctx, "one selected", `document.querySelector('[data-testid="bulk-count"]').textContent === "1 selected"`)
	step(t, ctx, "delete it",
		chromedp.Click(chromedp.CSS(`[data-testid="bulk-delete"]`)))
	waitJS(t, ctx, "the confirmation opens", `document.getElementById('confirm-dialog').open && document.getElementById('confirm-title').textContent === "Delete 1 job?"`)
	step(t, ctx, "confirm", chromedp.Click(chromedp.CSS(`[data-testid="confirm-ok"]`)))
	waitRows(t, ctx, "the other two remain", ids[0], ids[2])
	watch.check(t)
}

// TestBrowserRunNowScheduledJob: a scheduled job offers "Run now" (not
// "Retry"), and running it makes it run at once.
func TestBrowserRunNowScheduledJob(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a browser")
	}
	s := newStack(t, httpapi.Tokens{})
	ctx := browser(t)
	watch := watchPage(ctx)
	s.fixed.Store(true)

	runAt := time.Now().Add(2 * time.Hour).UTC()
	id := s.submit(t, fmt.Sprintf(`{"kind":"flaky","run_at":%q}`, runAt.Format(time.RFC3339)))
	detail := fmt.Sprintf(`[data-testid="job-detail"][data-job-id="%d"]`, id)
	step(t, ctx, "open the scheduled job",
		chromedp.Navigate(fmt.Sprintf("%s/dashboard/#/jobs/%d", s.url, id)),
		chromedp.WaitVisible(chromedp.CSS(detail)))
	waitJS(t, ctx, "the action is Run now", `document.querySelector('[data-testid="action-retry"]').textContent === "Run now"`)
	zone := eval[string](t, ctx, `Intl.DateTimeFormat().resolvedOptions().timeZone`)
	if got := eval[string](t, ctx, `document.querySelector('[data-testid="timeline-run-at"] td').title`); !strings.Contains(got, zone) || !strings.Contains(got, runAt.Format("2006-01-02T15:04:05Z")+" UTC") {
		t.Errorf("run at's title %q; want the zone %q and %s UTC", got, zone, runAt.Format(time.RFC3339))
	}
	step(t, ctx, "press Run now", chromedp.Click(chromedp.CSS(`[data-testid="action-retry"]`)))
	waitJS(t, ctx, "the confirmation opens", `document.getElementById('confirm-dialog').open`)
	if got := eval[string](t, ctx, `document.getElementById('confirm-text').textContent`); !strings.Contains(got, "now instead of at") {
		t.Errorf("confirmation text %q", got)
	}
	step(t, ctx, "confirm", chromedp.Click(chromedp.CSS(`[data-testid="confirm-ok"]`)))
	waitJS(t, ctx, "the job runs and completes", `document.querySelector('[data-testid="job-detail-state"]').textContent === "completed"`)
	if got := eval[string](t, ctx, `document.querySelector('[data-testid="action-retry"]').textContent`); got != "Retry" {
		t.Errorf("a completed job's action reads %q, want Retry", got)
	}

	// The list's bulk Run now takes scheduled jobs only.
	a := s.submit(t, fmt.Sprintf(`{"kind":"flaky","run_at":%q}`, runAt.Format(time.RFC3339)))
	b := s.submit(t, fmt.Sprintf(`{"kind":"flaky","run_at":%q}`, runAt.Add(-time.Hour).Format(time.RFC3339)))
	step(t, ctx, "list the scheduled jobs",
		chromedp.Navigate(s.url+"/dashboard/#/jobs?state=scheduled"),
		chromedp.WaitVisible(chromedp.CSS(rowSel(a))))
	waitRows(t, ctx, "both scheduled jobs", a, b)
	if got := shownIDs(t, ctx); len(got) != 2 || got[0] != b {
		t.Errorf("scheduled jobs listed as %v; want the sooner one (%d) first", got, b)
	}
	step(t, ctx, "select all, Run now",
		chromedp.Click(chromedp.CSS(`[data-testid="bulk-select-all"]`)),
		chromedp.Click(chromedp.CSS(`[data-testid="bulk-run-now"]`)))
	waitJS(t, ctx, "the confirmation counts 2", `document.getElementById('confirm-dialog').open && document.getElementById('confirm-title').textContent === "Run now 2 jobs?"`)
	step(t, ctx, "confirm", chromedp.Click(chromedp.CSS(`[data-testid="confirm-ok"]`)))
	deadline := time.Now().Add(60 * time.Second)
	for s.countState(t, "completed") != 3 {
		if time.Now().After(deadline) {
			t.Fatalf("the jobs run now did not complete: %d completed", s.countState(t, "completed"))
		}
		time.Sleep(100 * time.Millisecond)
	}
	watch.check(t)
}

// TestBrowserScheduledByRunAt: the scheduled jobs are listed by run time,
// soonest first, across pages (the server sorts by run_at and pages with
// it), not only within the page.
func TestBrowserScheduledByRunAt(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a browser")
	}
	s := newStack(t, httpapi.Tokens{})
	ctx := browser(t)
	watch := watchPage(ctx)
	// Run times shuffled against ids (minute (7·i) mod 55), so the 50
	// soonest are not the 50 newest: a page sorted on its own would not
	// show them.
	byMinute := make([]int64, 55)
	base := time.Now().Add(time.Hour).UTC().Truncate(time.Minute)
	for i := range 55 {
		m := (7 * i) % 55
		byMinute[m] = s.submit(t, fmt.Sprintf(`{"kind":"later","run_at":%q}`, base.Add(time.Duration(m)*time.Minute).Format(time.RFC3339)))
	}
	soonest := byMinute
	step(t, ctx, "list the scheduled jobs", chromedp.Navigate(s.url+"/dashboard/#/jobs?state=scheduled"))
	waitJS(t, ctx, "a full first page", `document.querySelectorAll('tr[data-testid="job-row"]').length === 50`)
	if got := shownIDs(t, ctx); !slices.Equal(got, soonest[:50]) {
		t.Fatalf("first page %v; want the 50 soonest %v", got, soonest[:50])
	}
	step(t, ctx, "next page", chromedp.Click(chromedp.CSS(`[data-testid="page-older"]`)))
	waitJS(t, ctx, "the last five", `document.querySelectorAll('tr[data-testid="job-row"]').length === 5`)
	if got := shownIDs(t, ctx); !slices.Equal(got, soonest[50:]) {
		t.Fatalf("second page %v; want %v", got, soonest[50:])
	}
	watch.check(t)
}
