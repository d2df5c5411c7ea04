package dashboard_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/backlogq/backlog/adapters/httpapi"
)

// TestBrowserProgress: a running job's reported progress shows as a bar
// with its percent and message in the jobs table and on the job page,
// which also shows the job's checkpoint.
func TestBrowserProgress(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a browser")
	}
	s := newStack(t, httpapi.Tokens{})
	ctx := browser(t)
	watch := watchPage(ctx)

	// Queue "remote" is not worked here: a remote worker claims the job
	// and reports its progress.
	id := s.submit(t, `{"kind":"import","queue":"remote"}`)
	idle := s.submit(t, `{"kind":"import","queue":"other"}`)
	if status, b := s.request(t, "PUT", "/v1/workers/remote-1", `{"queues":["remote"]}`); status != http.StatusOK {
		t.Fatalf("register: %d %s", status, b)
	}
	var claimed struct {
		Jobs []struct {
			ID         int64  `json:"id"`
			LeaseToken string `json:"lease_token"`
		} `json:"jobs"`
	}
	deadline := time.Now().Add(30 * time.Second)
	for len(claimed.Jobs) == 0 && time.Now().Before(deadline) {
		status, b := s.request(t, "POST", "/v1/workers/remote-1/claim", `{"limit":1,"wait_seconds":1}`)
		if status != http.StatusOK {
			t.Fatalf("claim: %d %s", status, b)
		}
		if err := json.Unmarshal(b, &claimed); err != nil {
			t.Fatalf("claim answer %s: %v", b, err)
		}
	}
	if len(claimed.Jobs) != 1 || claimed.Jobs[0].ID != id {
		t.Fatalf("claim: %+v", claimed)
	}
	body := fmt.Sprintf(`{"lease_token":%s,"percent":42.5,"message":"row <b>425</b>","checkpoint":{"row":425}}`, js(claimed.Jobs[0].LeaseToken))
	if status, b := s.request(t, "POST", fmt.Sprintf("/v1/jobs/%d/progress", id), body); status != http.StatusOK {
		t.Fatalf("progress: %d %s", status, b)
	}

	row := fmt.Sprintf(`tr[data-testid="job-row"][data-job-id="%d"]`, id)
	idleRow := fmt.Sprintf(`tr[data-testid="job-row"][data-job-id="%d"]`, idle)
	step(t, ctx, "open the jobs table",
		chromedp.Navigate(s.url+"/dashboard/#/jobs"),
		chromedp.WaitVisible(chromedp.CSS(row)),
		chromedp.WaitVisible(chromedp.CSS(idleRow)))
	waitJS(t, ctx, "the running job shows its progress", fmt.Sprintf(`(() => {
		const p = document.querySelector(%s).querySelector('[data-testid="job-progress"]');
		return p && !p.hidden && p.querySelector('progress').value === 42.5 &&
			p.querySelector('[data-testid="job-progress-label"]').textContent === '42.5%% row <b>425</b>';
	})()`, js(row)))
	if !eval[bool](t, ctx, fmt.Sprintf(`document.querySelector(%s).querySelector('[data-testid="job-progress"]').hidden`, js(idleRow))) {
		t.Errorf("a job that is not running shows a progress bar")
	}

	detail := fmt.Sprintf(`[data-testid="job-detail"][data-job-id="%d"]`, id)
	step(t, ctx, "open the job",
		chromedp.Navigate(fmt.Sprintf("%s/dashboard/#/jobs/%d", s.url, id)),
		chromedp.WaitVisible(chromedp.CSS(detail)))
	waitJS(t, ctx, "the job page shows the progress and the checkpoint", `(() => {
		const p = document.querySelector('[data-testid="job-detail-progress"]');
		const c = document.querySelector('[data-testid="job-checkpoint"]');
		return p && !p.hidden && p.querySelector('progress').value === 42.5 &&
			p.textContent.includes('row <b>425</b>') && c && c.textContent.includes('425');
	})()`)
	if n := eval[int](t, ctx, `document.querySelectorAll('b').length`); n != 0 {
		t.Errorf("the progress message became markup: %d <b> elements", n)
	}
	watch.check(t)
}
