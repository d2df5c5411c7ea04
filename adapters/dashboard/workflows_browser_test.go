package dashboard_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/backlogq/backlog/adapters/httpapi"
	"github.com/backlogq/backlog/internal/teststores"
)

// submitFlow posts a workflow or batch (path /v1/workflows or
// /v1/batches) and returns the answer.
func (s *stack) submitFlow(t *testing.T, path, body string) map[string]json.RawMessage {
	t.Helper()
	status, b := s.request(t, "POST", path, body)
	if status != http.StatusCreated {
		t.Fatalf("POST %s %s = %d %s", path, body, status, b)
	}
	var out map[string]json.RawMessage
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("POST %s answer %s: %v", path, b, err)
	}
	return out
}

// jobIDOf reads the id of a job of an answer.
func jobIDOf(t *testing.T, raw json.RawMessage) int64 {
	t.Helper()
	var j struct {
		ID int64 `json:"id"`
	}
	if err := json.Unmarshal(raw, &j); err != nil || j.ID == 0 {
		t.Fatalf("no job id in %s: %v", raw, err)
	}
	return j.ID
}

// TestBrowserWorkflows: the Workflows screen lists a workflow and a batch
// newest first; the workflow's page lists its steps in dependency order
// with what each waits for and cancels it whole; the batch's page shows
// its progress and its callback, and links to its jobs; a waiting job's
// page links to its batch and names its dependencies.
func TestBrowserWorkflows(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a browser")
	}
	s := newStackOn(t, teststores.Memory(t), httpapi.Tokens{})
	s.fixed.Store(true) // the batch's flaky job completes
	ctx := browser(t)
	watch := watchPage(ctx)

	wf := s.submitFlow(t, "/v1/workflows", `{"steps": [
		{"name": "extract", "kind": "etl.extract", "queue": "held"},
		{"name": "load", "kind": "etl.load", "queue": "held", "after": ["extract"]},
		{"name": "report", "kind": "etl.report", "queue": "held", "after": ["load", "extract"]}]}`)
	var wfID int64
	_ = json.Unmarshal(wf["id"], &wfID)
	var steps map[string]json.RawMessage
	_ = json.Unmarshal(wf["steps"], &steps)
	extract, load := jobIDOf(t, steps["extract"]), jobIDOf(t, steps["load"])

	b := s.submitFlow(t, "/v1/batches", `{"jobs": [{"kind": "flaky"}, {"kind": "resize", "queue": "held"}, {"kind": "resize", "queue": "held"}],
		"on_finish": {"kind": "album.done", "queue": "held"}}`)
	var batchID int64
	_ = json.Unmarshal(b["id"], &batchID)
	var batchJobs []json.RawMessage
	_ = json.Unmarshal(b["jobs"], &batchJobs)
	held := jobIDOf(t, batchJobs[1])
	callback := jobIDOf(t, b["on_finish"])
	if status, body := s.request(t, "POST", fmt.Sprintf("/v1/jobs/%d/cancel", held), ""); status != 200 {
		t.Fatalf("cancel: %d %s", status, body)
	}

	// The list: the batch (newer) first, then the workflow.
	wfRow := fmt.Sprintf(`tr[data-testid="workflow-row"][data-workflow-id="%d"]`, wfID)
	batchRow := fmt.Sprintf(`tr[data-testid="workflow-row"][data-workflow-id="%d"]`, batchID)
	step(t, ctx, "load the workflows screen",
		chromedp.Navigate(s.url+"/dashboard/#/workflows"),
		chromedp.WaitVisible(chromedp.CSS(wfRow)),
		chromedp.WaitVisible(chromedp.CSS(batchRow)))
	if got := eval[[]string](t, ctx, `Array.from(document.querySelectorAll('tr[data-testid="workflow-row"]'), (r) => r.dataset.workflowId)`); strings.Join(got, ",") != fmt.Sprintf("%d,%d", batchID, wfID) {
		t.Errorf("the list shows %v; want the batch %d, then the workflow %d", got, batchID, wfID)
	}
	cell := func(row, testid string) string {
		return eval[string](t, ctx, fmt.Sprintf(`document.querySelector(%s).querySelector('[data-testid="%s"]').textContent`, js(row), testid))
	}
	for _, c := range []struct{ row, testid, want string }{
		{wfRow, "workflow-type", "workflow"},
		{wfRow, "workflow-jobs", "3"},
		{wfRow, "workflow-counts", "2 waiting, 1 available"},
		{wfRow, "workflow-done", "open"},
		{batchRow, "workflow-type", "batch"},
		{batchRow, "workflow-jobs", "4"},
		{batchRow, "workflow-done", "open"},
	} {
		if got := cell(c.row, c.testid); got != c.want {
			t.Errorf("%s %s = %q, want %q", c.row, c.testid, got, c.want)
		}
	}
	if eval[bool](t, ctx, fmt.Sprintf(`document.querySelector(%s).querySelector('[data-testid="workflow-bar"]').hidden`, js(batchRow))) {
		t.Errorf("the batch's row has no progress bar")
	}
	if got := eval[string](t, ctx, `document.querySelector('[data-nav="workflows"]').getAttribute('aria-current')`); got != "page" {
		t.Errorf("the Workflows link is not marked current (%q)", got)
	}

	// The workflow's page: the steps in order, each with what it waits for.
	step(t, ctx, "open the workflow",
		chromedp.Click(chromedp.CSS(wfRow+` [data-testid="workflow-link"]`)),
		chromedp.WaitVisible(chromedp.CSS(`li[data-testid="workflow-step"][data-step="report"]`)))
	if got := eval[[]string](t, ctx, `Array.from(document.querySelectorAll('li[data-testid="workflow-step"]'), (li) => li.dataset.step + ":" + li.dataset.state)`); strings.Join(got, " ") != "extract:available load:waiting report:waiting" {
		t.Errorf("the steps are %v", got)
	}
	stepText := func(name, testid string) string {
		return eval[string](t, ctx, fmt.Sprintf(`document.querySelector('li[data-step="%s"] [data-testid="%s"]').textContent`, name, testid))
	}
	if got := stepText("report", "step-after"); got != "after extract, load" {
		t.Errorf("report's dependencies read %q", got)
	}
	if got := stepText("load", "step-waiting"); !strings.Contains(got, "waiting for 1 of 1") {
		t.Errorf("load's waiting reads %q", got)
	}
	if got := stepText("extract", "step-after"); !strings.Contains(got, "waits for nothing") {
		t.Errorf("extract's dependencies read %q", got)
	}
	if got := eval[string](t, ctx, `document.querySelector('li[data-step="load"] [data-testid="step-job"]').getAttribute('href')`); got != fmt.Sprintf("#/jobs/%d", load) {
		t.Errorf("load's job link is %q", got)
	}
	if got := eval[string](t, ctx, `document.querySelector('li[data-step="load"] [data-testid="step-state"]').dataset.value`); got != "waiting" {
		t.Errorf("load's state badge says %q", got)
	}

	// Cancel it whole.
	step(t, ctx, "cancel the workflow", chromedp.Click(chromedp.CSS(`[data-testid="flow-cancel"]`)))
	waitJS(t, ctx, "the confirmation opens", fmt.Sprintf(`document.getElementById('confirm-dialog').open && document.getElementById('confirm-title').textContent === "Cancel workflow %d?"`, wfID))
	step(t, ctx, "confirm", chromedp.Click(chromedp.CSS(`[data-testid="confirm-ok"]`)))
	// The waiting steps are cancelled first (load's cancel settles report
	// too, which is then skipped), then extract.
	waitJS(t, ctx, "the result is reported", fmt.Sprintf(`/^\d jobs? of workflow %d cancelled/.test(document.querySelector('[data-testid="action-result"]').textContent)`, wfID))
	waitJS(t, ctx, "every step is cancelled", `Array.from(document.querySelectorAll('li[data-testid="workflow-step"]')).every((li) => li.dataset.state === "cancelled")`)
	waitJS(t, ctx, "the workflow is done", `document.querySelector('[data-testid="flow-done"]').dataset.value === "done" && document.querySelector('[data-testid="flow-cancel"]').disabled`)

	// The batch's page: one job completed, one cancelled, one pending, and
	// its callback waiting.
	step(t, ctx, "open the batch", chromedp.Navigate(fmt.Sprintf("%s/dashboard/#/batches/%d", s.url, batchID)))
	waitJS(t, ctx, "the batch's progress", `(() => {
		const bar = document.querySelector('[data-testid="batch-bar"]');
		const n = (k) => bar.querySelector('[data-testid="batch-bar-' + k + '"]').dataset.count;
		return bar.dataset.total === "3" && n("completed") === "1" && n("cancelled") === "1" && n("pending") === "1" && n("discarded") === "0";
	})()`)
	cbRow := `tr[data-testid="batch-callback"][data-step="on_finish"]`
	step(t, ctx, "the callback is listed", chromedp.WaitVisible(chromedp.CSS(cbRow)))
	if got := cell(cbRow, "callback-state"); got != "waiting" {
		t.Errorf("the callback's state is %q", got)
	}
	if got := cell(cbRow, "callback-waiting"); got != "1 job" {
		t.Errorf("the callback waits for %q", got)
	}
	if got := cell(cbRow, "callback-ends"); got != "1 completed, 1 cancelled, 0 discarded" {
		t.Errorf("the callback's dependency ends read %q", got)
	}

	// The batch's jobs on the jobs screen.
	step(t, ctx, "open the batch's jobs", chromedp.Click(chromedp.CSS(`[data-testid="batch-jobs-link"]`)))
	waitJS(t, ctx, "the hash filters by workflow", fmt.Sprintf(`location.hash === "#/jobs?workflow_id=%d"`, batchID))
	waitRows(t, ctx, "the batch's jobs and its callback", batchID, held, held+1, callback)
	if !eval[bool](t, ctx, `document.querySelector('[data-testid="bulk-select-all"]').hidden`) {
		t.Errorf("the jobs of one workflow offer a select-all (the bulk filter has no workflow)")
	}
	if got := eval[string](t, ctx, fmt.Sprintf(`document.querySelector(%s + ' [data-testid="job-when"]').textContent`, js(rowSel(callback)))); got != "waits for 1 job" {
		t.Errorf("the callback's row says %q", got)
	}
	step(t, ctx, "filter waiting jobs", chromedp.Click(chromedp.CSS(`[data-testid="filter-state-waiting"]`)))
	waitJS(t, ctx, "the hash keeps the workflow", fmt.Sprintf(`location.hash === "#/jobs?state=waiting&workflow_id=%d"`, batchID))
	waitRows(t, ctx, "only the callback waits", callback)

	// The callback's page: its batch, its dependencies, what it waits for.
	step(t, ctx, "open the callback",
		chromedp.Click(chromedp.CSS(rowSel(callback)+` [data-testid="job-link"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="job-workflow-link"]`)))
	if got := eval[string](t, ctx, `document.querySelector('[data-testid="job-workflow-link"]').getAttribute('href')`); got != fmt.Sprintf("#/batches/%d", batchID) {
		t.Errorf("the callback links to %q", got)
	}
	if got := eval[string](t, ctx, `document.querySelector('[data-testid="job-step"]').textContent`); got != "on_finish" {
		t.Errorf("the callback's step reads %q", got)
	}
	if got := eval[int](t, ctx, `document.querySelectorAll('[data-testid="job-dependency"]').length`); got != 3 {
		t.Errorf("the callback lists %d dependencies, want 3", got)
	}
	if got := eval[string](t, ctx, `document.querySelector('[data-testid="job-waiting-for"]').textContent`); got != "1 of 3 jobs not yet settled" {
		t.Errorf("the callback's waiting reads %q", got)
	}
	if !eval[bool](t, ctx, `document.querySelector('[data-testid="action-retry"]').disabled`) {
		t.Errorf("a waiting job's Retry is enabled")
	}

	// A workflow's step links to the workflow; a workflow id under
	// #/batches/ is sent on to the workflow's page.
	step(t, ctx, "open a step's job", chromedp.Navigate(fmt.Sprintf("%s/dashboard/#/jobs/%d", s.url, extract)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="job-workflow-link"]`)))
	if got := eval[string](t, ctx, `document.querySelector('[data-testid="job-workflow-link"]').getAttribute('href')`); got != fmt.Sprintf("#/workflows/%d", wfID) {
		t.Errorf("the step links to %q", got)
	}
	step(t, ctx, "open the workflow as a batch", chromedp.Navigate(fmt.Sprintf("%s/dashboard/#/batches/%d", s.url, wfID)))
	waitJS(t, ctx, "sent on to the workflow's page", fmt.Sprintf(`location.hash === "#/workflows/%d"`, wfID))
	step(t, ctx, "open a workflow that does not exist", chromedp.Navigate(s.url+"/dashboard/#/workflows/999999"))
	waitJS(t, ctx, "it says so", `(() => { const m = document.querySelector('[data-testid="flow-missing"]'); return m && !m.hidden && m.textContent.includes("does not exist"); })()`)
	watch.check(t)
}

// TestBrowserWorkflowsPaging: the list merges workflows and batches by id,
// 20 a page, Older » continues below the last id shown and « Newest goes
// back; Show picks one sort.
func TestBrowserWorkflowsPaging(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a browser")
	}
	s := newStackOn(t, teststores.Memory(t), httpapi.Tokens{})
	ctx := browser(t)
	watch := watchPage(ctx)
	var ids, batches []int64 // newest first
	for i := range 25 {
		var out map[string]json.RawMessage
		if i%2 == 0 {
			out = s.submitFlow(t, "/v1/batches", `{"jobs": [{"kind": "resize", "queue": "held"}]}`)
		} else {
			out = s.submitFlow(t, "/v1/workflows", `{"steps": [{"name": "only", "kind": "etl", "queue": "held"}]}`)
		}
		var id int64
		_ = json.Unmarshal(out["id"], &id)
		ids = append([]int64{id}, ids...)
		if i%2 == 0 {
			batches = append([]int64{id}, batches...)
		}
	}
	shown := func() string {
		return strings.Join(eval[[]string](t, ctx, `Array.from(document.querySelectorAll('tr[data-testid="workflow-row"]'), (r) => r.dataset.workflowId)`), ",")
	}
	want := func(ids []int64) string {
		s := make([]string, len(ids))
		for i, id := range ids {
			s[i] = fmt.Sprint(id)
		}
		return strings.Join(s, ",")
	}
	waitList := func(what string, ids []int64) {
		t.Helper()
		waitJS(t, ctx, what, fmt.Sprintf(`Array.from(document.querySelectorAll('tr[data-testid="workflow-row"]'), (r) => r.dataset.workflowId).join(",") === %s`, js(want(ids))))
	}
	step(t, ctx, "load the workflows screen", chromedp.Navigate(s.url+"/dashboard/#/workflows"))
	waitList("the newest 20", ids[:20])
	step(t, ctx, "older", chromedp.Click(chromedp.CSS(`[data-testid="workflows-older"]`)))
	waitJS(t, ctx, "the hash holds the cursor", fmt.Sprintf(`location.hash === "#/workflows?after=%d"`, ids[19]))
	waitList("the other 5", ids[20:])
	if !eval[bool](t, ctx, `document.querySelector('[data-testid="workflows-older"]').disabled`) {
		t.Errorf("Older is enabled on the last page (%s)", shown())
	}
	step(t, ctx, "newest", chromedp.Click(chromedp.CSS(`[data-testid="workflows-newest"]`)))
	waitList("the newest 20 again", ids[:20])
	step(t, ctx, "show batches only", chromedp.SetValue(chromedp.CSS(`[data-testid="workflows-type"]`), "batch"),
		chromedp.Evaluate[chromedp.Void](`document.querySelector('[data-testid="workflows-type"]').dispatchEvent(new Event('change'))`))
	waitJS(t, ctx, "the hash names the type", `location.hash === "#/workflows?type=batch"`)
	waitList("the 13 batches", batches)
	watch.check(t)
}
