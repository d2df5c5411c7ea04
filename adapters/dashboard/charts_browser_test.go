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

// TestBrowserChartsShowQueueHistory: jobs that fail and complete reach
// the store's queue history at the engine's maintenance rounds, and the
// overview's charts of queue "default" draw them from
// GET /v1/queues/default/history: the completed and failed charts get
// non-zero points, the due-jobs and oldest-age charts their samples.
func TestBrowserChartsShowQueueHistory(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a browser")
	}
	s := newStack(t, httpapi.Tokens{})
	ctx := browser(t)
	watch := watchPage(ctx)

	// One job fails (permanently: discarded after one attempt), then
	// three complete.
	failing := s.submit(t, `{"kind":"flaky","args":{"n":0}}`)
	waitState(t, s, failing, "discarded")
	s.fixed.Store(true)
	for i := range 3 {
		waitState(t, s, s.submit(t, fmt.Sprintf(`{"kind":"flaky","args":{"n":%d}}`, i+1)), "completed")
	}

	step(t, ctx, "load the overview",
		chromedp.Navigate(s.url+"/dashboard/#/"),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="charts-section"]`)))
	block := `[data-testid="chart-queue"][data-queue="default"]`
	chart := func(key string) string { return js(block + ` [data-testid="chart-` + key + `"]`) }
	// The engine writes its counts at each maintenance round (5 s), the
	// page reads the history every 5 s: wait for all four jobs.
	waitJS(t, ctx, "the completed chart draws the three completions", fmt.Sprintf(`(() => {
		const f = document.querySelector(%s);
		return f && f.dataset.total === "3" && Number(f.dataset.points) > 0 && f.querySelectorAll("svg rect").length > 0;
	})()`, chart("completed")))
	waitJS(t, ctx, "the failed chart draws the failure", fmt.Sprintf(`(() => {
		const f = document.querySelector(%s);
		return f && f.dataset.total === "1" && f.querySelectorAll("svg rect").length > 0;
	})()`, chart("failed")))
	waitJS(t, ctx, "the gauge charts have samples", fmt.Sprintf(`(() => {
		const d = document.querySelector(%s), a = document.querySelector(%s);
		return d && a && d.querySelector("svg circle, svg polyline") && a.querySelector("svg circle, svg polyline");
	})()`, chart("depth"), chart("age")))

	// The charts add up to what the store holds.
	completed, failed := historyTotals(t, s, "default")
	if completed != 3 || failed != 1 {
		t.Errorf("GET /v1/queues/default/history adds up to %d completed and %d failed; want 3 and 1", completed, failed)
	}
	drawn := eval[float64](t, ctx, fmt.Sprintf(`[...document.querySelectorAll(%s)].length`, js(block+` [data-testid="chart-completed"] svg rect`)))
	if drawn < 1 {
		t.Errorf("the completed chart draws %v bars", drawn)
	}
	watch.check(t)
}

// waitState polls the API until job id is in state want.
func waitState(t *testing.T, s *stack, id int64, want string) {
	t.Helper()
	deadline := time.Now().Add(stepTimeout)
	for {
		status, b := s.request(t, "GET", fmt.Sprintf("/v1/jobs/%d", id), "")
		var out struct {
			Job struct {
				State string `json:"state"`
			} `json:"job"`
		}
		if status == http.StatusOK && json.Unmarshal(b, &out) == nil && out.Job.State == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %d did not reach %s: %d %s", id, want, status, b)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// historyTotals sums the counts of the queue's history of the last hour.
func historyTotals(t *testing.T, s *stack, queue string) (completed, failed int64) {
	t.Helper()
	status, b := s.request(t, "GET", "/v1/queues/"+queue+"/history?minutes=60", "")
	var out httpapi.QueueHistoryResponse
	if status != http.StatusOK || json.Unmarshal(b, &out) != nil {
		t.Fatalf("GET /v1/queues/%s/history = %d %s", queue, status, b)
	}
	for _, m := range out.Buckets {
		completed += m.Completed
		failed += m.Failed
	}
	return completed, failed
}
