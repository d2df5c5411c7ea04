package dashboard_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/backlogq/backlog/adapters/httpapi"
	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/core/contract"
)

// TestBrowserArchivedJobs: the jobs page's Archived box lists the archive
// (kept in the hash, without bulk actions), the live list leaves archived
// jobs out, and an archived job's page shows it from the archive.
func TestBrowserArchivedJobs(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a browser")
	}
	s := newStack(t, httpapi.Tokens{})
	ctx := browser(t)
	watch := watchPage(ctx)

	old := s.submit(t, `{"kind":"other","queue":"held","args":{"n":1}}`)
	live := s.submit(t, `{"kind":"other","queue":"held","args":{"n":2}}`)
	if status, b := s.request(t, "POST", fmt.Sprintf("/v1/jobs/%d/cancel", old), ""); status != 200 {
		t.Fatalf("cancel: %d %s", status, b)
	}
	if n, err := s.store.(contract.Archiver).Archive(context.Background(), core.StateCancelled, time.Now().Add(time.Hour), 100); err != nil || n != 1 {
		t.Fatalf("Archive: %d, %v", n, err)
	}

	step(t, ctx, "open the jobs list",
		chromedp.Navigate(s.url+"/dashboard/#/jobs"),
		chromedp.WaitVisible(chromedp.CSS(rowSel(live))))
	waitRows(t, ctx, "the live list leaves the archived job out", live)
	step(t, ctx, "tick Archived", chromedp.Click(chromedp.CSS(`[data-testid="filter-archived"]`)))
	waitJS(t, ctx, "the hash says archived", `location.hash === "#/jobs?archived=true"`)
	waitRows(t, ctx, "the archive lists the archived job", old)
	if got := eval[string](t, ctx, fmt.Sprintf(`document.querySelector(%s).dataset.state`, js(rowSel(old)))); got != "cancelled" {
		t.Errorf("the archived job's row has state %q; want cancelled", got)
	}
	if n := eval[int](t, ctx, `document.querySelectorAll('[data-testid="bulk-bar"]').length`); n != 0 {
		t.Errorf("the archive view shows %d bulk bars; want none (archived jobs take no actions)", n)
	}
	if got := eval[string](t, ctx, `document.querySelector('[data-testid="page-info"]').textContent`); !strings.Contains(got, "archived job") {
		t.Errorf("the page info says %q; want it to say archived", got)
	}

	step(t, ctx, "open the archived job",
		chromedp.Click(chromedp.CSS(rowSel(old)+` [data-testid="job-link"]`)))
	waitJS(t, ctx, "the job page shows it from the archive", `document.querySelector('[data-testid="job-detail"]')?.dataset.archived === "true"`)
	if got := eval[string](t, ctx, `document.querySelector('[data-testid="summary-archived"]')?.textContent || ""`); !strings.Contains(got, "archive") {
		t.Errorf("the job page's summary says archived %q", got)
	}
	if got := eval[[]bool](t, ctx, `['retry', 'cancel', 'delete'].map((a) => document.querySelector('[data-testid="action-' + a + '"]').disabled)`); len(got) != 3 || !got[0] || !got[1] || !got[2] {
		t.Errorf("an archived job's Retry, Cancel and Delete disabled = %v; want all disabled (the archive is read only)", got)
	}
	step(t, ctx, "back to the live list", chromedp.Navigate(s.url+"/dashboard/#/jobs"))
	waitRows(t, ctx, "the live list again", live)
	if eval[bool](t, ctx, `document.querySelector('[data-testid="filter-archived"]').checked`) {
		t.Errorf("the Archived box is ticked on #/jobs")
	}
	watch.check(t)
}
