package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/backlogq/backlog/internal/browsertest"
)

// TestServeDashboardShowsJobsEnqueuedWithCurl is the README's first
// command end to end: serve on SQLite with a shell handler prints the
// dashboard URL; a job enqueued with curl shows in the dashboard, in a
// real browser, and completes there without a reload.
func TestServeDashboardShowsJobsEnqueuedWithCurl(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a browser")
	}
	curl, err := exec.LookPath("curl")
	if err != nil {
		t.Skip("curl is not installed")
	}
	w, base := startServe(t, tempDB(t), nil, "--handler", `hello=echo "hello, $(cat)"`)
	dash := base + "/dashboard/"
	if !strings.Contains(w.stdout.String(), "dashboard "+dash) {
		t.Fatalf("serve did not print the dashboard URL %s:\n%s", dash, w.stdout)
	}
	ctx := browsertest.Start(t)
	sctx, cancel := context.WithTimeout(ctx, browsertest.StepTimeout)
	defer cancel()
	if err := chromedp.Do(sctx, chromedp.Navigate(dash+"#/jobs"), chromedp.WaitVisible(chromedp.CSS(`[data-testid="jobs-table"]`))); err != nil {
		t.Fatalf("load %s: %v", dash, err)
	}

	out, err := exec.Command(curl, "-s", "-f", base+"/v1/jobs", "-H", "Content-Type: application/json",
		"-d", `{"kind":"hello","args":{"name":"ada"}}`).Output()
	if err != nil {
		t.Fatalf("curl: %v: %s", err, out)
	}
	var sub struct{ Job struct{ ID int64 } }
	if err := json.Unmarshal(out, &sub); err != nil || sub.Job.ID == 0 {
		t.Fatalf("curl's answer %s: %v", out, err)
	}
	row := fmt.Sprintf(`tr[data-testid="job-row"][data-job-id="%d"]`, sub.Job.ID)
	browsertest.WaitJS(t, ctx, "the job enqueued with curl shows as completed",
		fmt.Sprintf(`document.querySelector(%q)?.dataset.state === "completed"`, row))
}
