package dashboard_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/backlogq/backlog/adapters/httpapi"
)

// claimAs claims one job of the worker's queues through the API, as a
// remote worker does, waiting up to 30 s; it returns the job's id and
// lease token.
func (s *stack) claimAs(t *testing.T, worker string) (int64, string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		status, b := s.request(t, "POST", "/v1/workers/"+worker+"/claim", `{"limit":1,"wait_seconds":1}`)
		if status != http.StatusOK {
			t.Fatalf("claim as %s: %d %s", worker, status, b)
		}
		var out struct {
			Jobs []struct {
				ID         int64  `json:"id"`
				LeaseToken string `json:"lease_token"`
			} `json:"jobs"`
		}
		if err := json.Unmarshal(b, &out); err != nil {
			t.Fatalf("claim answer %s: %v", b, err)
		}
		if len(out.Jobs) == 1 {
			return out.Jobs[0].ID, out.Jobs[0].LeaseToken
		}
	}
	t.Fatalf("worker %s claimed nothing in 30 s", worker)
	return 0, ""
}

// register registers a remote worker on queue.
func (s *stack) register(t *testing.T, worker, queue string) {
	t.Helper()
	if status, b := s.request(t, "PUT", "/v1/workers/"+worker, fmt.Sprintf(`{"name":"host-%s","queues":[%s]}`, worker, js(queue))); status != http.StatusOK {
		t.Fatalf("register %s: %d %s", worker, status, b)
	}
}

// noPageOverflow fails t when the page scrolls sideways: the document is
// wider than the viewport.
func noPageOverflow(t *testing.T, ctx context.Context, where string) {
	t.Helper()
	got := eval[[]float64](t, ctx, `[document.documentElement.scrollWidth, document.documentElement.clientWidth, innerWidth]`)
	if got[0] > got[1] {
		// Name the widest elements, to say what overflows.
		wide := eval[[]string](t, ctx, `Array.from(document.querySelectorAll('body *')).filter((e) => {
			const r = e.getBoundingClientRect();
			return r.right > document.documentElement.clientWidth + 0.5 && !e.closest('.table-wrap');
		}).slice(0, 8).map((e) => e.tagName.toLowerCase() + (e.className ? '.' + String(e.className).replace(/ /g, '.') : '') + (e.dataset.testid ? '[' + e.dataset.testid + ']' : '') + ' right=' + Math.round(e.getBoundingClientRect().right))`)
		t.Errorf("%s at %v px: the page is %v px wide (scrolls sideways); too wide: %q", where, got[2], got[0], wide)
	}
}

// TestBrowserLayoutFitsAt1400AndPhone: the overview, the jobs list, a
// job's page and the workers page never scroll sideways at 1,400 px nor
// at a phone's 390 px, with long queue names, kinds, args and errors.
// At 1,400 px the jobs table fits whole; on a phone it scrolls inside its
// own container. Long args are cut with an ellipsis and shown whole in
// the title.
func TestBrowserLayoutFitsAt1400AndPhone(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a browser")
	}
	s := newStack(t, httpapi.Tokens{})
	ctx := browser(t)
	watch := watchPage(ctx)

	longQueue := "billing-reconciliation-exports-for-the-european-region-" + strings.Repeat("x", 40)
	longKind := "reports.monthly.generate_customer_statement_with_attachments_" + strings.Repeat("y", 40)
	longArg := strings.Repeat("customer-0123456789-", 30)
	// Not worked here: the jobs stay available.
	held := s.submit(t, fmt.Sprintf(`{"kind":%s,"queue":%s,"args":{"note":%s},"tags":[%s],"metadata":{"trace":%s}}`,
		js(longKind), js(longQueue), js(longArg), js(strings.Repeat("tag", 30)), js(longArg)))
	s.submit(t, `{"kind":"inert","queue":"held","args":{"n":1}}`)
	failed := s.submit(t, `{"kind":"flaky","args":{"n":1}}`)
	waitState(t, s, failed, "discarded")

	for _, size := range []struct {
		name string
		w, h int64
	}{{"desktop", 1400, 900}, {"phone", 390, 844}} {
		step(t, ctx, "viewport "+size.name, chromedp.EmulateViewport(size.w, size.h))

		step(t, ctx, "overview at "+size.name,
			chromedp.Navigate(s.url+"/dashboard/#/"),
			chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf(`tr[data-testid="queue-row"][data-queue=%s]`, js(longQueue)))))
		waitJS(t, ctx, "the charts are drawn", fmt.Sprintf(`document.querySelector('[data-testid="chart-queue"][data-queue=%s] svg text')`, js(longQueue)))
		noPageOverflow(t, ctx, "overview")

		step(t, ctx, "jobs at "+size.name,
			chromedp.Evaluate[chromedp.Void](`location.hash = "#/jobs"`),
			chromedp.WaitVisible(chromedp.CSS(rowSel(held))))
		noPageOverflow(t, ctx, "jobs")
		fits := eval[[]float64](t, ctx, `(() => { const w = document.querySelector('[data-testid="jobs-table"]').closest('.table-wrap'); return [w.scrollWidth, w.clientWidth, getComputedStyle(w).overflowX === 'auto' ? 1 : 0]; })()`)
		if size.w >= 1400 && fits[0] > fits[1] {
			t.Errorf("at 1400 px the jobs table is %v px wide in a %v px container: it must fit without scrolling", fits[0], fits[1])
		}
		if fits[2] != 1 {
			t.Errorf("the jobs table's container does not scroll (overflow-x is not auto)")
		}
		cut := eval[[]float64](t, ctx, fmt.Sprintf(`(() => { const c = document.querySelector(%s).querySelector('[data-testid="job-args-preview"] .cut'); return [c.scrollWidth, c.clientWidth, getComputedStyle(c).textOverflow === 'ellipsis' ? 1 : 0]; })()`, js(rowSel(held))))
		if cut[0] <= cut[1] || cut[2] != 1 {
			t.Errorf("the long args are not cut with an ellipsis: %v", cut)
		}
		if title := eval[string](t, ctx, fmt.Sprintf(`document.querySelector(%s).querySelector('[data-testid="job-args-preview"] .cut').title`, js(rowSel(held)))); !strings.Contains(title, longArg[:200]) {
			t.Errorf("the args' title is %q; want the whole args", title)
		}
		if title := eval[string](t, ctx, fmt.Sprintf(`document.querySelector(%s).querySelector('[data-testid="job-kind"] .cut').title`, js(rowSel(held)))); title != longKind {
			t.Errorf("the kind's title is %q; want %q", title, longKind)
		}

		for _, id := range []int64{held, failed} {
			step(t, ctx, fmt.Sprintf("job %d at %s", id, size.name),
				chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`location.hash = "#/jobs/%d"`, id)),
				chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf(`[data-testid="job-detail"][data-job-id="%d"]`, id))))
			noPageOverflow(t, ctx, fmt.Sprintf("job %d", id))
		}

		step(t, ctx, "workers at "+size.name,
			chromedp.Evaluate[chromedp.Void](`location.hash = "#/workers"`),
			chromedp.WaitVisible(chromedp.CSS(`tr[data-testid="worker-row"]`)))
		noPageOverflow(t, ctx, "workers")
	}
	watch.check(t)
}

// TestBrowserChartAxes: each chart of the overview has a y axis whose
// ticks are labelled with their unit (per minute, jobs, a duration) and
// an x axis of clock times every quarter hour.
func TestBrowserChartAxes(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a browser")
	}
	s := newStack(t, httpapi.Tokens{})
	ctx := browser(t)
	watch := watchPage(ctx)
	s.fixed.Store(true)
	for i := range 3 {
		waitState(t, s, s.submit(t, fmt.Sprintf(`{"kind":"flaky","args":{"n":%d}}`, i)), "completed")
	}
	step(t, ctx, "load the overview",
		chromedp.Navigate(s.url+"/dashboard/#/"),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="chart-queue"][data-queue="default"]`)))
	// The completions reach the history at the next maintenance round.
	waitJS(t, ctx, "the completed chart draws the completions",
		`document.querySelector('[data-queue="default"] [data-testid="chart-completed"]').dataset.total === "3"`)

	labels := func(key, axis string) []string {
		return eval[[]string](t, ctx, fmt.Sprintf(`Array.from(document.querySelectorAll('[data-queue="default"] [data-testid="chart-%s"] svg text[data-axis="%s"]'), (e) => e.textContent)`, key, axis))
	}
	for _, c := range []struct{ key, unit string }{{"completed", "/min"}, {"failed", "/min"}, {"depth", " job"}, {"age", ""}} {
		ys := labels(c.key, "y")
		if len(ys) < 2 || !strings.HasPrefix(ys[0], "0") {
			t.Errorf("chart %s: y tick labels %q; want at least two, from 0", c.key, ys)
			continue
		}
		if c.unit != "" && !strings.Contains(ys[len(ys)-1], c.unit) {
			t.Errorf("chart %s: top y tick %q lacks its unit %q", c.key, ys[len(ys)-1], c.unit)
		}
		xs := labels(c.key, "x")
		if len(xs) != 4 {
			t.Errorf("chart %s: x tick labels %q; want the 4 quarter hours of the last hour", c.key, xs)
		}
		for _, x := range xs {
			if !strings.Contains(x, ":") {
				t.Errorf("chart %s: x tick %q is not a clock time", c.key, x)
			}
		}
	}
	// The completed chart's scale reaches its largest bar: its top tick is
	// at least the busiest minute's count.
	top := eval[float64](t, ctx, `Math.max(...Array.from(document.querySelectorAll('[data-queue="default"] [data-testid="chart-completed"] svg text[data-axis="y"]'), (e) => Number(e.dataset.value)))`)
	peak := eval[float64](t, ctx, `Number(document.querySelector('[data-queue="default"] [data-testid="chart-completed"]').dataset.max)`)
	if peak < 1 || top < peak {
		t.Errorf("the completed chart's top tick is %v for a peak of %v", top, peak)
	}
	if age := labels("age", "y"); len(age) > 1 && !strings.ContainsAny(age[len(age)-1], "smhd") {
		t.Errorf("the oldest-due chart's ticks %q are not durations", age)
	}
	watch.check(t)
}

// TestBrowserAttemptsAndDiscardReason: a job's page lists every attempt
// with its start, end and duration, and says why a discarded job was
// discarded: attempts used up for a job a remote worker failed twice, a
// permanent error for one the handler gave up on; a completed job's
// attempt runs from attempted_at to finished_at.
func TestBrowserAttemptsAndDiscardReason(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a browser")
	}
	s := newStack(t, httpapi.Tokens{})
	ctx := browser(t)
	watch := watchPage(ctx)

	s.register(t, "remote-1", "remote")
	id := s.submit(t, `{"kind":"remote-kind","queue":"remote","max_attempts":2}`)
	for attempt := 1; attempt <= 2; attempt++ {
		got, token := s.claimAs(t, "remote-1")
		if got != id {
			t.Fatalf("claimed job %d, want %d", got, id)
		}
		time.Sleep(20 * time.Millisecond) // a measurable attempt
		body := fmt.Sprintf(`{"lease_token":%s,"error":"boom %d","retry_in_seconds":0}`, js(token), attempt)
		if status, b := s.request(t, "POST", fmt.Sprintf("/v1/jobs/%d/fail", id), body); status != http.StatusOK {
			t.Fatalf("fail: %d %s", status, b)
		}
	}
	waitState(t, s, id, "discarded")

	detail := fmt.Sprintf(`[data-testid="job-detail"][data-job-id="%d"]`, id)
	step(t, ctx, "open the exhausted job",
		chromedp.Navigate(fmt.Sprintf("%s/dashboard/#/jobs/%d", s.url, id)),
		chromedp.WaitVisible(chromedp.CSS(detail)))
	waitJS(t, ctx, "both attempts are listed", `document.querySelectorAll('[data-testid="job-attempt"]').length === 2`)
	type attemptRow struct {
		Attempt, Start, End, Duration, Outcome string
		Discarded                              bool
	}
	rows := eval[[]attemptRow](t, ctx, `Array.from(document.querySelectorAll('[data-testid="job-attempt"]'), (r) => ({
		Attempt: r.dataset.attempt,
		Start: r.querySelector('[data-testid="attempt-start"]').textContent,
		End: r.querySelector('[data-testid="attempt-end"]').textContent,
		Duration: r.querySelector('[data-testid="attempt-duration"]').textContent,
		Outcome: r.querySelector('[data-testid="attempt-outcome"]').textContent,
		Discarded: Boolean(r.querySelector('[data-testid="attempt-discarded"]')),
	}))`)
	for i, r := range rows {
		want := fmt.Sprint(2 - i) // newest first
		if r.Attempt != want || r.Start == "—" || r.End == "—" || r.Start == "" || r.End == "" || !strings.HasSuffix(r.Duration, " ms") && !strings.HasSuffix(r.Duration, " s") {
			t.Errorf("attempt row %d: %+v; want attempt %s with a start, an end and a duration", i, r, want)
		}
		if r.Outcome != "handler_error" || r.Discarded != (i == 0) {
			t.Errorf("attempt row %d: outcome %q discarded %v; want handler_error, the newest marked discarded", i, r.Outcome, r.Discarded)
		}
	}
	reason := `document.querySelector('[data-testid="job-discard-reason"]')`
	waitJS(t, ctx, "the discard reason is shown", reason+` && !`+reason+`.hidden`)
	if got := eval[string](t, ctx, reason+`.dataset.reason`); got != "exhausted" {
		t.Errorf("discard reason %q, want exhausted", got)
	}
	if got := eval[string](t, ctx, reason+`.textContent`); !strings.Contains(got, "attempts were used up") || !strings.Contains(got, "2 of 2") || !strings.Contains(got, "boom 2") {
		t.Errorf("the discard reason reads %q", got)
	}

	// The handler gives up on a flaky job (a permanent error).
	permanent := s.submit(t, `{"kind":"flaky","args":{}}`)
	waitState(t, s, permanent, "discarded")
	step(t, ctx, "open the permanently failed job",
		chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`location.hash = "#/jobs/%d"`, permanent)),
		chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf(`[data-testid="job-detail"][data-job-id="%d"]`, permanent))))
	waitJS(t, ctx, "the permanent reason is shown", reason+`?.dataset.reason === "permanent" && !`+reason+`.hidden`)
	if got := eval[string](t, ctx, reason+`.textContent`); !strings.Contains(got, "gave up") || !strings.Contains(got, "not fixed yet") {
		t.Errorf("the discard reason reads %q", got)
	}

	// A completed job: one attempt, ended when the job finished; no
	// discard reason.
	s.fixed.Store(true)
	done := s.submit(t, `{"kind":"flaky","args":{}}`)
	waitState(t, s, done, "completed")
	step(t, ctx, "open the completed job",
		chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`location.hash = "#/jobs/%d"`, done)),
		chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf(`[data-testid="job-detail"][data-job-id="%d"]`, done))))
	waitJS(t, ctx, "the completed attempt is listed", `(() => {
		const r = document.querySelectorAll('[data-testid="job-attempt"]');
		return r.length === 1 && r[0].dataset.outcome === "completed" && r[0].querySelector('[data-testid="attempt-duration"]').textContent !== "—";
	})()`)
	if !eval[bool](t, ctx, reason+`.hidden`) {
		t.Errorf("a completed job shows a discard reason")
	}
	watch.check(t)
}

// TestBrowserWorkersShowRunningJobs: the workers page shows, for each
// worker, the jobs it runs now (linked, with kind, queue and for how
// long), and "idle" for a worker that runs none.
func TestBrowserWorkersShowRunningJobs(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a browser")
	}
	s := newStack(t, httpapi.Tokens{})
	ctx := browser(t)
	watch := watchPage(ctx)

	s.register(t, "remote-7", "remote")
	id := s.submit(t, `{"kind":"resize-image","queue":"remote"}`)
	if got, _ := s.claimAs(t, "remote-7"); got != id {
		t.Fatalf("claimed %d, want %d", got, id)
	}

	row := `tr[data-testid="worker-row"][data-worker-id="remote-7"]`
	step(t, ctx, "open the workers page",
		chromedp.Navigate(s.url+"/dashboard/#/workers"),
		chromedp.WaitVisible(chromedp.CSS(row)))
	job := fmt.Sprintf(`%s [data-testid="worker-job"][data-job-id="%d"]`, row, id)
	waitJS(t, ctx, "the running job is listed on its worker", fmt.Sprintf(`document.querySelector(%s)`, js(job)))
	got := eval[map[string]string](t, ctx, fmt.Sprintf(`(() => { const li = document.querySelector(%s); return {
		href: li.querySelector('[data-testid="worker-job-link"]').getAttribute('href'),
		kind: li.querySelector('[data-testid="worker-job-kind"]').textContent,
		queue: li.querySelector('[data-testid="worker-job-queue"]').textContent,
		for: li.querySelector('[data-testid="worker-job-for"]').textContent,
	}; })()`, js(job)))
	if got["href"] != fmt.Sprintf("#/jobs/%d", id) || got["kind"] != "resize-image" || got["queue"] != "remote" || !strings.HasPrefix(got["for"], "for ") {
		t.Errorf("the running job shows %v", got)
	}
	engine := fmt.Sprintf(`tr[data-testid="worker-row"][data-worker-id=%s] [data-testid="worker-running"]`, js(s.workerID))
	if got := eval[string](t, ctx, fmt.Sprintf(`document.querySelector(%s).textContent`, js(engine))); got != "idle" {
		t.Errorf("the engine's worker, running nothing, shows %q; want idle", got)
	}
	step(t, ctx, "follow the link to the job",
		chromedp.Click(chromedp.CSS(job+` [data-testid="worker-job-link"]`)),
		chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf(`[data-testid="job-detail"][data-job-id="%d"]`, id))))
	waitJS(t, ctx, "the running attempt is listed", `(() => {
		const r = document.querySelector('[data-testid="job-attempt"]');
		return r && r.dataset.outcome === "running" && r.querySelector('[data-testid="attempt-duration"]').textContent.endsWith("so far");
	})()`)
	watch.check(t)
}

// TestBrowserJumpToJob: the header's job id box opens a job's page; text
// that is not an id gets a message and no navigation, an unknown id the
// job page's "does not exist", and a typed #/jobs/abc a message too.
func TestBrowserJumpToJob(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a browser")
	}
	s := newStack(t, httpapi.Tokens{})
	ctx := browser(t)
	watch := watchPage(ctx)
	id := s.submit(t, `{"kind":"inert","queue":"held"}`)

	step(t, ctx, "load the overview",
		chromedp.Navigate(s.url+"/dashboard/#/"),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="jump-input"]`)))
	jump := func(text string) {
		t.Helper()
		step(t, ctx, "jump to "+text,
			chromedp.SetValue(chromedp.CSS(`[data-testid="jump-input"]`), text),
			chromedp.Click(chromedp.CSS(`[data-testid="jump-go"]`)))
	}

	jump("abc")
	waitJS(t, ctx, "a message says abc is not an id", `(() => {
		const m = document.querySelector('[data-testid="jump-message"]');
		return !m.hidden && m.textContent.includes("not a job id");
	})()`)
	if got := eval[string](t, ctx, `location.hash`); got != "#/" {
		t.Errorf("a bad id navigated to %q", got)
	}

	jump(fmt.Sprint(id))
	step(t, ctx, "the job opens", chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf(`[data-testid="job-detail"][data-job-id="%d"]`, id))))
	if !eval[bool](t, ctx, `document.querySelector('[data-testid="jump-message"]').hidden`) {
		t.Errorf("the message stays after a good id")
	}

	jump("#999999")
	waitJS(t, ctx, "an unknown id says the job does not exist", `(() => {
		const m = document.querySelector('[data-testid="job-missing"]');
		return location.hash === "#/jobs/999999" && m && !m.hidden && m.textContent.includes("does not exist");
	})()`)

	step(t, ctx, "type a bad job URL", chromedp.Evaluate[chromedp.Void](`location.hash = "#/jobs/abc"`))
	waitJS(t, ctx, "the page says abc is not a job id", `(() => {
		const m = document.querySelector('[data-testid="job-id-invalid"]');
		return m && m.textContent.includes("not a job id");
	})()`)
	watch.check(t)
}
