package dashboard_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/backlogq/backlog/adapters/httpapi"
)

// TestBrowserQueuesArePaged: with more queues than one page holds, the
// overview shows the first page of queues (and reads only their charts),
// and its pager moves to the next page and back.
func TestBrowserQueuesArePaged(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a browser")
	}
	s := newStack(t, httpapi.Tokens{})
	var jobs []string
	for i := range 130 {
		jobs = append(jobs, fmt.Sprintf(`{"kind":"held","queue":"pg%03d"}`, i))
	}
	if status, b := s.request(t, "POST", "/v1/jobs/batch", `{"jobs":[`+strings.Join(jobs, ",")+`]}`); status != http.StatusOK {
		t.Fatalf("batch: %d %s", status, b)
	}
	ctx := browser(t)
	watch := watchPage(ctx)
	rows := `document.querySelectorAll('tr[data-testid="queue-row"]')`
	step(t, ctx, "load the overview",
		chromedp.Navigate(s.url+"/dashboard/#/"),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-testid="queue-row"][data-queue="pg000"]`)))
	waitJS(t, ctx, "the first page shows 100 queues and a pager", `(() => {
		const r = `+rows+`;
		const pager = document.querySelector('[data-testid="queues-pager"]');
		return r.length === 100 && r[99].dataset.queue === "pg099" && !pager.hidden &&
			!document.querySelector('[data-testid="queues-next"]').disabled &&
			document.querySelector('[data-testid="queues-first"]').disabled &&
			document.querySelector('[data-testid="queues-total"]').textContent.includes("these queues");
	})()`)
	step(t, ctx, "next page", chromedp.Click(chromedp.CSS(`[data-testid="queues-next"]`)))
	waitJS(t, ctx, "the second page shows the other 30", `(() => {
		const r = `+rows+`;
		return r.length === 30 && r[0].dataset.queue === "pg100" && r[29].dataset.queue === "pg129" &&
			document.querySelector('[data-testid="queues-next"]').disabled &&
			!document.querySelector('[data-testid="queues-first"]').disabled;
	})()`)
	step(t, ctx, "first page", chromedp.Click(chromedp.CSS(`[data-testid="queues-first"]`)))
	waitJS(t, ctx, "back on the first page", `(() => { const r = `+rows+`; return r.length === 100 && r[0].dataset.queue === "pg000"; })()`)
	watch.check(t)
}
