package dashboard_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/backlogq/backlog/adapters/dashboard"
	"github.com/backlogq/backlog/adapters/httpapi"
	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/core/contract"
	"github.com/backlogq/backlog/internal/browsertest"
	"github.com/backlogq/backlog/internal/teststores"
)

// stepTimeout bounds each browser step; the machine may be slow and loaded.
const stepTimeout = browsertest.StepTimeout

// browser starts headless Chromium for t (see internal/browsertest).
func browser(t *testing.T) context.Context { return browsertest.Start(t) }

// stack is the API and the dashboard on one loopback server, over a client
// that works queue "default" with a "flaky" kind that fails permanently
// until fixed is set, and runs the periodic jobs given.
type stack struct {
	url      string
	fixed    *atomic.Bool
	workerID string
	token    string         // sent by submit and apiGet
	store    contract.Store // the stack's store, for what the API cannot do
}

func newStack(t *testing.T, tokens httpapi.Tokens, periodic ...core.PeriodicJob) *stack {
	t.Helper()
	return newStackOn(t, teststores.SQLite(t), tokens, periodic...)
}

// newStackOn is newStack over st (the memory store for what needs job
// dependencies: workflows and batches).
func newStackOn(t *testing.T, st contract.Store, tokens httpapi.Tokens, periodic ...core.PeriodicJob) *stack {
	t.Helper()
	fixed := new(atomic.Bool)
	hs := core.NewHandlers()
	hs.HandleRaw("flaky", func(ctx context.Context, job *core.Job) error {
		if !fixed.Load() {
			return core.Permanent(errors.New("flaky: not fixed yet"))
		}
		return core.RecordResult(ctx, map[string]any{"fixed": true, "job": job.ID})
	})
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	client, err := core.NewClient(st, core.Config{
		Queues:       map[string]core.QueueConfig{"default": {MaxWorkers: 4}},
		Handlers:     hs,
		PollInterval: 100 * time.Millisecond,
		Logger:       log,
		// The page submits jobs of kinds no handler here runs (held in
		// their queue), as a job server for remote workers does.
		AllowUnknownKinds: true,
		Periodic:          periodic,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := client.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = client.Stop(ctx)
	})
	api, err := httpapi.New(client, httpapi.Config{Tokens: tokens, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/v1/", api)
	mux.Handle("/dashboard/", http.StripPrefix("/dashboard", dashboard.Handler(dashboard.Options{Logger: log})))
	srv := httptest.NewServer(mux) // listens on 127.0.0.1
	t.Cleanup(srv.Close)
	return &stack{url: srv.URL, fixed: fixed, workerID: client.WorkerID(), token: tokens.Admin, store: st}
}

func (s *stack) request(t *testing.T, method, path, body string) (int, []byte) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, s.url+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if s.token != "" {
		req.Header.Set("Authorization", "Bearer "+s.token)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, b
}

// submit posts a job through the API and returns its id.
func (s *stack) submit(t *testing.T, body string) int64 {
	t.Helper()
	status, b := s.request(t, "POST", "/v1/jobs", body)
	if status != http.StatusCreated {
		t.Fatalf("POST /v1/jobs %s = %d %s", body, status, b)
	}
	var out struct {
		Job struct {
			ID int64 `json:"id"`
		} `json:"job"`
	}
	if err := json.Unmarshal(b, &out); err != nil || out.Job.ID == 0 {
		t.Fatalf("POST /v1/jobs answer %s: %v", b, err)
	}
	return out.Job.ID
}

// pageWatch records what the page must never do: throw, open a dialog
// (an injected alert would), or trip the Content-Security-Policy.
type pageWatch struct {
	mu       sync.Mutex
	problems []string
}

func (w *pageWatch) add(s string) {
	w.mu.Lock()
	w.problems = append(w.problems, s)
	w.mu.Unlock()
}

func (w *pageWatch) check(t *testing.T) {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, p := range w.problems {
		t.Error(p)
	}
}

func watchPage(ctx context.Context) *pageWatch {
	w := &pageWatch{}
	messages := chromedp.Console(ctx)
	dialogs := chromedp.Events(ctx, page.JavascriptDialogOpening)
	go func() {
		for m, err := range messages {
			if err != nil {
				return
			}
			switch {
			case m.IsException():
				w.add(fmt.Sprintf("page exception: %s", m))
			case strings.Contains(m.Text, "Content Security Policy"):
				w.add(fmt.Sprintf("CSP violation: %s", m))
			}
		}
	}()
	go func() {
		for ev, err := range dialogs {
			if err != nil {
				return
			}
			w.add(fmt.Sprintf("the page opened a %s dialog: %q", ev.Type, ev.Message))
			_, _ = chromedp.Call(ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: false})
		}
	}()
	return w
}

// step runs actions with the step deadline, failing t with what names it.
func step(t *testing.T, ctx context.Context, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, stepTimeout)
	defer cancel()
	if err := chromedp.Do(sctx, actions...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// waitJS waits until the JavaScript expression is truthy.
func waitJS(t *testing.T, ctx context.Context, what, expr string) {
	t.Helper()
	browsertest.WaitJS(t, ctx, what, expr)
}

func eval[T any](t *testing.T, ctx context.Context, expr string) T {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, stepTimeout)
	defer cancel()
	v, err := chromedp.Run(sctx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

func js(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func TestBrowserRetryDiscardedJob(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a browser")
	}
	s := newStack(t, httpapi.Tokens{})
	ctx := browser(t)
	watch := watchPage(ctx)

	step(t, ctx, "load the dashboard",
		chromedp.Navigate(s.url+"/dashboard/#/jobs"),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="jobs-table"]`)))
	waitJS(t, ctx, "first poll", `document.querySelector('[data-testid="live-status"]').dataset.state === "live"`)
	// A marker that a full reload would lose.
	eval[chromedp.Void](t, ctx, `window.__sameDocument = "yes"`)

	id := s.submit(t, `{"kind":"flaky","args":{"n":1}}`)
	row := fmt.Sprintf(`tr[data-testid="job-row"][data-job-id="%d"]`, id)
	step(t, ctx, "the job appears in the jobs view", chromedp.WaitVisible(chromedp.CSS(row)))
	waitJS(t, ctx, "the job is discarded", fmt.Sprintf(`document.querySelector(%s)?.dataset.state === "discarded"`, js(row)))
	if got := eval[string](t, ctx, fmt.Sprintf(`document.querySelector(%s).querySelector('[data-testid="job-state"]').textContent`, js(row))); got != "discarded" {
		t.Fatalf("state cell shows %q", got)
	}

	detail := fmt.Sprintf(`[data-testid="job-detail"][data-job-id="%d"]`, id)
	step(t, ctx, "open the job",
		chromedp.Click(chromedp.CSS(row+` a[data-testid="job-link"]`)),
		chromedp.WaitVisible(chromedp.CSS(detail)))
	waitJS(t, ctx, "the detail shows the discarded state and the error",
		fmt.Sprintf(`document.querySelector(%s)?.dataset.state === "discarded" && document.querySelector('[data-testid="job-errors"]').textContent.includes("not fixed yet")`, js(detail)))
	if got := eval[string](t, ctx, `document.querySelector('[data-testid="job-error-cause"]')?.textContent ?? "(none)"`); got != core.CauseHandlerError {
		t.Errorf("the error's cause shows %q, want %q", got, core.CauseHandlerError)
	}

	s.fixed.Store(true)
	step(t, ctx, "press Retry and confirm",
		chromedp.Click(chromedp.CSS(`[data-testid="action-retry"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="confirm-ok"]`)),
		chromedp.Click(chromedp.CSS(`[data-testid="confirm-ok"]`)))
	waitJS(t, ctx, "the job completes without a reload",
		`document.querySelector('[data-testid="job-detail-state"]').textContent === "completed"`)
	if got := eval[string](t, ctx, `document.querySelector('[data-testid="job-result"]').textContent`); !strings.Contains(got, `"fixed": true`) {
		t.Errorf("result shows %q", got)
	}
	if got := eval[string](t, ctx, `String(window.__sameDocument)`); got != "yes" {
		t.Errorf("the page was reloaded (marker %q)", got)
	}
	if got := eval[bool](t, ctx, `document.querySelector('[data-testid="action-error"]').hidden`); !got {
		t.Errorf("an action error is shown: %q", eval[string](t, ctx, `document.querySelector('[data-testid="action-error"]').textContent`))
	}

	// The API refuses to cancel a completed job (409 invalid-state); the
	// page shows the problem's detail.
	// The page disables Cancel for a final job; enable it and press it in
	// one script, so no poll re-renders the button in between.
	eval[chromedp.Void](t, ctx, `(() => { const b = document.querySelector('[data-testid="action-cancel"]'); b.disabled = false; b.click(); })()`)
	step(t, ctx, "confirm Cancel of a completed job",
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="confirm-ok"]`)),
		chromedp.Click(chromedp.CSS(`[data-testid="confirm-ok"]`)))
	waitJS(t, ctx, "the refusal is shown", `!document.querySelector('[data-testid="action-error"]').hidden`)
	if got := eval[string](t, ctx, `document.querySelector('[data-testid="action-error"]').textContent`); !strings.Contains(got, "Cancel failed") || !strings.Contains(strings.ToLower(got), "state") {
		t.Errorf("action error shows %q", got)
	}

	watch.check(t)
}

// TestBrowserErrorCauses: the job detail shows each error entry's cause,
// here a panic a remote worker reported through the API, newest first,
// with what the cause means as its title.
func TestBrowserErrorCauses(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a browser")
	}
	s := newStack(t, httpapi.Tokens{})
	ctx := browser(t)
	watch := watchPage(ctx)

	// Queue "remote" is not worked here: a remote worker claims the job
	// and reports two failures, a plain one and a panic.
	id := s.submit(t, `{"kind":"remote-kind","queue":"remote","max_attempts":5}`)
	if status, b := s.request(t, "PUT", "/v1/workers/remote-1", `{"queues":["remote"]}`); status != http.StatusOK {
		t.Fatalf("register: %d %s", status, b)
	}
	for _, fail := range []string{`"error":"boom","retry_in_seconds":0`, `"error":"handler panicked: kaboom","trace":"goroutine 7 [running]","cause":"panic"`} {
		var claimed struct {
			Jobs []struct {
				ID         int64  `json:"id"`
				LeaseToken string `json:"lease_token"`
			} `json:"jobs"`
		}
		var status int
		var b []byte
		deadline := time.Now().Add(30 * time.Second)
		for len(claimed.Jobs) == 0 && time.Now().Before(deadline) {
			status, b = s.request(t, "POST", "/v1/workers/remote-1/claim", `{"limit":1,"wait_seconds":1}`)
			if status != http.StatusOK {
				t.Fatalf("claim: %d %s", status, b)
			}
			if err := json.Unmarshal(b, &claimed); err != nil {
				t.Fatalf("claim answer %s: %v", b, err)
			}
		}
		if len(claimed.Jobs) != 1 || claimed.Jobs[0].ID != id {
			t.Fatalf("claim: %s", b)
		}
		body := fmt.Sprintf(`{"lease_token":%s,%s}`, js(claimed.Jobs[0].LeaseToken), fail)
		if status, b := s.request(t, "POST", fmt.Sprintf("/v1/jobs/%d/fail", id), body); status != http.StatusOK {
			t.Fatalf("fail %s: %d %s", body, status, b)
		}
	}

	detail := fmt.Sprintf(`[data-testid="job-detail"][data-job-id="%d"]`, id)
	step(t, ctx, "open the job",
		chromedp.Navigate(fmt.Sprintf("%s/dashboard/#/jobs/%d", s.url, id)),
		chromedp.WaitVisible(chromedp.CSS(detail)))
	waitJS(t, ctx, "both errors are shown", `document.querySelectorAll('[data-testid="job-error"]').length === 2`)
	causes := eval[[]string](t, ctx, `Array.from(document.querySelectorAll('[data-testid="job-error-cause"]'), (e) => e.textContent)`)
	if len(causes) != 2 || causes[0] != core.CausePanic || causes[1] != core.CauseHandlerError {
		t.Fatalf("causes shown %q, want [panic handler_error] (newest first)", causes)
	}
	if title := eval[string](t, ctx, `document.querySelector('[data-testid="job-error-cause"]').title`); !strings.Contains(title, "panicked") {
		t.Errorf("the panic's cause is titled %q", title)
	}
	if got := eval[string](t, ctx, `document.querySelector('[data-testid="job-error"]').textContent`); !strings.Contains(got, "kaboom") || !strings.Contains(got, "goroutine 7") {
		t.Errorf("the newest error shows %q", got)
	}
	watch.check(t)
}

func TestBrowserEscapesJobData(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a browser")
	}
	s := newStack(t, httpapi.Tokens{})
	ctx := browser(t)
	watch := watchPage(ctx)

	const payload = `<img src=x onerror=alert(1)>`
	// Queue "held" is not worked, so the job stays available.
	id := s.submit(t, `{"kind":"inert","queue":"held","args":{"html":"<img src=x onerror=alert(1)>"},"tags":["<b>t</b>"],"metadata":{"<i>k</i>":"<script>alert(2)</script>"}}`)

	step(t, ctx, "load the jobs of queue held",
		chromedp.Navigate(s.url+"/dashboard/#/jobs?queue=held"),
		chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf(`tr[data-testid="job-row"][data-job-id="%d"]`, id))))
	got := eval[string](t, ctx, fmt.Sprintf(`document.querySelector('tr[data-job-id="%d"] [data-testid="job-args-preview"]').textContent`, id))
	if !strings.Contains(got, payload) {
		t.Errorf("args preview shows %q, want the payload as text", got)
	}

	step(t, ctx, "open the job", chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`location.hash = "#/jobs/%d"`, id)))
	waitJS(t, ctx, "the detail shows the args", fmt.Sprintf(`document.querySelector('[data-testid="job-detail"][data-job-id="%d"]') && !document.querySelector('[data-testid="job-detail"]').hidden && document.querySelector('[data-testid="job-args"]').textContent.includes('"html"')`, id))
	args := eval[string](t, ctx, `document.querySelector('[data-testid="job-args"]').textContent`)
	if !strings.Contains(args, payload) {
		t.Errorf("args show %q, want the payload as text", args)
	}
	for _, sel := range []string{"img", "script:not([src])", "b", "i"} {
		if n := eval[int](t, ctx, fmt.Sprintf(`document.querySelectorAll(%s).length`, js("#view "+sel))); n != 0 {
			t.Errorf("the page has %d %s elements: job data became markup", n, sel)
		}
	}
	md := eval[string](t, ctx, `document.querySelector('[data-testid="job-metadata"]').textContent`)
	tags := eval[string](t, ctx, `document.querySelector('[data-testid="job-tags"]').textContent`)
	if !strings.Contains(md, "<script>alert(2)</script>") || !strings.Contains(md, "<i>k</i>") || !strings.Contains(tags, "<b>t</b>") {
		t.Errorf("metadata %q / tags %q not shown as text", md, tags)
	}
	// Give an injected handler every chance to run before checking.
	step(t, ctx, "settle", chromedp.Sleep(500*time.Millisecond))
	watch.check(t)
}

func TestBrowserTokenWorkersAndPause(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a browser")
	}
	const producer, admin = "producer-secret-1", "admin-secret-2"
	s := newStack(t, httpapi.Tokens{Producer: producer, Admin: admin})
	ctx := browser(t)
	watch := watchPage(ctx)
	s.submit(t, `{"kind":"flaky","args":{}}`)

	// The API answers 401: the page asks for a token and waits.
	step(t, ctx, "load the overview",
		chromedp.Navigate(s.url+"/dashboard/#/"),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="token-input"]`)))
	waitJS(t, ctx, "the status says a token is needed", `document.querySelector('[data-testid="live-status"]').dataset.state === "auth"`)
	step(t, ctx, "enter the producer token",
		chromedp.SendKeys(chromedp.CSS(`[data-testid="token-input"]`), producer),
		chromedp.Click(chromedp.CSS(`[data-testid="token-save"]`)),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-testid="queue-row"][data-queue="default"]`)))
	if got := eval[string](t, ctx, `sessionStorage.getItem("backlog.dashboard.token")`); got != producer {
		t.Errorf("sessionStorage token = %q", got)
	}
	if got := eval[string](t, ctx, `location.href`); strings.Contains(got, producer) {
		t.Errorf("the token is in the URL %q", got)
	}
	waitJS(t, ctx, "the overview counts the job", `(() => {
		const r = document.querySelector('tr[data-queue="default"]');
		const total = Number(r.querySelector('[data-testid="count-total"]').textContent);
		return total === 1 && r.querySelector('[data-testid="queue-paused"]').textContent === "active";
	})()`)

	// Workers need the admin token: the producer's gets a clear refusal.
	step(t, ctx, "open the workers screen", chromedp.Evaluate[chromedp.Void](`location.hash = "#/workers"`))
	waitJS(t, ctx, "workers are refused to the producer", `(() => {
		const f = document.querySelector('[data-testid="workers-forbidden"]');
		return f && !f.hidden && f.textContent.includes("admin");
	})()`)
	step(t, ctx, "enter the admin token",
		chromedp.Click(chromedp.CSS(`[data-testid="token-button"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="token-input"]`)),
		chromedp.SendKeys(chromedp.CSS(`[data-testid="token-input"]`), admin),
		chromedp.Click(chromedp.CSS(`[data-testid="token-save"]`)))
	row := fmt.Sprintf(`tr[data-testid="worker-row"][data-worker-id=%s]`, js(s.workerID))
	step(t, ctx, "the engine's worker is listed", chromedp.WaitVisible(chromedp.CSS(row)))
	waitJS(t, ctx, "the worker is active", fmt.Sprintf(`document.querySelector(%s).querySelector('[data-testid="worker-liveness"]').textContent === "active"`, js(row)))
	if got := eval[string](t, ctx, fmt.Sprintf(`document.querySelector(%s).querySelector('[data-testid="worker-queues"]').textContent`, js(row))); got != "default" {
		t.Errorf("worker queues show %q", got)
	}

	// Pause and resume the queue from the overview.
	queue := `tr[data-testid="queue-row"][data-queue="default"]`
	step(t, ctx, "pause queue default",
		chromedp.Evaluate[chromedp.Void](`location.hash = "#/"`),
		chromedp.WaitVisible(chromedp.CSS(queue)),
		chromedp.Click(chromedp.CSS(queue+` [data-testid="queue-pause-toggle"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="confirm-ok"]`)),
		chromedp.Click(chromedp.CSS(`[data-testid="confirm-ok"]`)))
	waitJS(t, ctx, "the queue shows as paused", fmt.Sprintf(`document.querySelector(%s)?.dataset.paused === "true"`, js(queue)))
	if status, b := s.request(t, "GET", "/v1/queues", ""); status != 200 || !strings.Contains(string(b), `"paused":true`) {
		t.Errorf("GET /v1/queues after pause = %d %s", status, b)
	}
	step(t, ctx, "resume queue default", chromedp.Click(chromedp.CSS(queue+` [data-testid="queue-pause-toggle"]`)))
	waitJS(t, ctx, "the queue shows as active", fmt.Sprintf(`document.querySelector(%s)?.dataset.paused === "false"`, js(queue)))
	if status, b := s.request(t, "GET", "/v1/queues", ""); status != 200 || strings.Contains(string(b), `"paused":true`) {
		t.Errorf("GET /v1/queues after resume = %d %s", status, b)
	}
	watch.check(t)
}
