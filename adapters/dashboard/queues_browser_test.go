package dashboard_test

import (
	"context"
	"encoding/json"
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

	"github.com/chromedp/chromedp"

	"github.com/backlogq/backlog/adapters/dashboard"
	"github.com/backlogq/backlog/adapters/httpapi"
	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/internal/teststores"
)

// queuesPoll is the engine's poll interval in the Queues tests: a change
// of workers per node applies within it.
const queuesPoll = 100 * time.Millisecond

// queuesStack is the API and the dashboard over an engine on SQLite that
// works queue "default" with one worker (MaxWorkers 1), re-registers
// every 200 ms (so its worker count shows soon after a change), and runs
// kind "block" (counts its starts, then waits for release) and kind "sms"
// (completes at once).
type queuesStack struct {
	*stack
	started   atomic.Int64 // "block" jobs started
	lastStart atomic.Int64 // when the latest "block" job started, Unix ns
	putDone   atomic.Int64 // when the latest PUT …/limits was answered, Unix ns
	release   chan struct{}
	once      sync.Once
}

func (s *queuesStack) releaseAll() { s.once.Do(func() { close(s.release) }) }

func newQueuesStack(t *testing.T, tokens httpapi.Tokens) *queuesStack {
	t.Helper()
	st := teststores.SQLite(t)
	s := &queuesStack{release: make(chan struct{})}
	hs := core.NewHandlers()
	hs.HandleRaw("block", func(ctx context.Context, _ *core.Job) error {
		s.lastStart.Store(time.Now().UnixNano())
		s.started.Add(1)
		select {
		case <-s.release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	hs.HandleRaw("sms", func(context.Context, *core.Job) error { return nil })
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	client, err := core.NewClient(st, core.Config{
		Queues:            map[string]core.QueueConfig{"default": {MaxWorkers: 1}},
		Handlers:          hs,
		PollInterval:      queuesPoll,
		HeartbeatInterval: 200 * time.Millisecond,
		Logger:            log,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := client.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.releaseAll()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = client.Stop(ctx)
	})
	api, err := httpapi.New(client, httpapi.Config{Tokens: tokens, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/v1/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		api.ServeHTTP(w, r)
		if r.Method == http.MethodPut && strings.HasSuffix(r.URL.Path, "/limits") {
			s.putDone.Store(time.Now().UnixNano())
		}
	}))
	mux.Handle("/dashboard/", http.StripPrefix("/dashboard", dashboard.Handler(dashboard.Options{Logger: log, PollInterval: 250 * time.Millisecond})))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	s.stack = &stack{url: srv.URL, workerID: client.WorkerID(), token: tokens.Admin}
	return s
}

// limits reads GET /v1/queues/{queue}/limits.
func (s *stack) limits(t *testing.T, queue string) httpapi.QueueLimitsResponse {
	t.Helper()
	status, b := s.request(t, "GET", "/v1/queues/"+queue+"/limits", "")
	var out httpapi.QueueLimitsResponse
	if status != http.StatusOK || json.Unmarshal(b, &out) != nil {
		t.Fatalf("GET /v1/queues/%s/limits = %d %s", queue, status, b)
	}
	return out
}

// setField types value into the form field sel as a user would: the value,
// then an input event.
func setField(sel, value string) chromedp.Action[chromedp.Void] {
	return chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`(() => {
		const el = document.querySelector(%s);
		el.value = %s;
		el.dispatchEvent(new Event('input', { bubbles: true }));
	})()`, js(sel), js(value)))
}

// saveAndConfirm presses Save and confirms.
func saveAndConfirm(t *testing.T, ctx context.Context) {
	t.Helper()
	step(t, ctx, "save the policy and confirm",
		clickJS(`[data-testid="limits-save"]`),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="confirm-ok"]`)),
		chromedp.Click(chromedp.CSS(`[data-testid="confirm-ok"]`)))
}

// TestBrowserQueues: the Queues list shows queue "default" with its
// node's worker count; on the queue's page the form stores max running,
// a queue rate and workers per node (read back through the API), and the
// node runs the new number of jobs at once within a poll interval and
// registers it; an aging period of 0.5 s shows the server's refusal and
// stores nothing; a per-kind rate whose burst jobs used up shows its
// wait; a remote worker without a count is listed outside the sum; an
// edit in progress survives a change made elsewhere, which the page
// reports; Pause (confirmed) and Resume act on the queue.
func TestBrowserQueues(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a browser")
	}
	s := newQueuesStack(t, httpapi.Tokens{})
	ctx := browser(t)
	watch := watchPage(ctx)

	// Three blocking jobs: the node runs one at a time.
	for range 3 {
		s.submit(t, `{"kind":"block"}`)
	}

	row := `tr[data-testid="queues-list-row"][data-queue="default"]`
	step(t, ctx, "load the queues list",
		chromedp.Navigate(s.url+"/dashboard/#/queues"),
		chromedp.WaitVisible(chromedp.CSS(row)))
	if got := eval[string](t, ctx, `document.querySelector('[data-nav="queues"]').getAttribute('aria-current')`); got != "page" {
		t.Errorf("the Queues link is not marked current (%q)", got)
	}
	waitJS(t, ctx, "the list shows the node's worker count, one running job and no limits", fmt.Sprintf(`(() => {
		const r = document.querySelector(%s);
		return r.querySelector('[data-testid="queues-list-concurrency"]').textContent === "1" &&
			r.querySelector('[data-testid="queues-list-nodes"]').textContent.endsWith(": 1") &&
			r.querySelector('[data-testid="queues-list-running"]').textContent === "1" &&
			r.querySelector('[data-testid="queues-list-policy"]').textContent === "no limits";
	})()`, js(row)))
	if n := s.started.Load(); n != 1 {
		t.Fatalf("%d blocking jobs started with one worker", n)
	}

	step(t, ctx, "open the queue",
		clickJS(row+` [data-testid="queues-list-name"]`),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="limits-form"]`)))
	node := fmt.Sprintf(`tr[data-testid="queue-node"][data-worker-id=%s]`, js(s.workerID))
	step(t, ctx, "the node is listed", chromedp.WaitVisible(chromedp.CSS(node)))
	if got := eval[string](t, ctx, `document.querySelector('[data-testid="queue-concurrency"]').textContent`); got != "1" {
		t.Errorf("concurrency across workers shows %q, want 1", got)
	}

	// Max running 3, a queue rate of 20 a minute, 3 workers per node.
	step(t, ctx, "fill in the form",
		setField(`[data-testid="limit-max-running"]`, "3"),
		setField(`[data-testid="limit-rate-starts"]`, "20"),
		setField(`[data-testid="limit-rate-per"]`, "60"),
		setField(`[data-testid="limit-workers-per-node"]`, "3"))
	saveAndConfirm(t, ctx)
	waitJS(t, ctx, "the page reports the saved policy", `!document.querySelector('[data-testid="limits-result"]').hidden`)
	l := s.limits(t, "default").Limits
	if l.MaxRunning != 3 || l.Rate != (core.RateLimit{Starts: 20, Per: time.Minute}) || l.WorkersPerNode != 3 {
		t.Fatalf("stored limits %+v, want max running 3, rate 20/1m, 3 workers per node", l)
	}
	// The node starts the two waiting jobs within a poll interval of the
	// PUT's answer (allowing the loaded machine's slack).
	stored := time.Unix(0, s.putDone.Load())
	for s.started.Load() < 3 {
		if time.Since(stored) > 5*time.Second {
			t.Fatalf("%d jobs started %s after the save; want 3", s.started.Load(), time.Since(stored))
		}
		time.Sleep(5 * time.Millisecond)
	}
	took := time.Unix(0, s.lastStart.Load()).Sub(stored)
	t.Logf("the node ran 3 jobs at once %s after the PUT was answered (poll interval %s)", took.Round(time.Millisecond), queuesPoll)
	if took > 2*time.Second {
		t.Errorf("the node took %s to apply workers per node; poll interval %s", took, queuesPoll)
	}
	waitJS(t, ctx, "the node's registered count and the sum show 3", fmt.Sprintf(`(() => {
		return document.querySelector(%s).querySelector('[data-testid="queue-node-workers"]').textContent === "3" &&
			document.querySelector('[data-testid="queue-concurrency"]').textContent === "3";
	})()`, js(node)))
	if got := eval[string](t, ctx, `document.querySelector('[data-testid="queue-policy"]').textContent`); got != "at most 3 running · rate 20/60 s · 3 workers per node" {
		t.Errorf("policy line %q", got)
	}
	s.releaseAll()

	// An aging period under a second: the server's detail is shown and
	// nothing changes.
	step(t, ctx, "enter an aging period of 0.5 s", setField(`[data-testid="limit-aging-every"]`, "0.5"))
	saveAndConfirm(t, ctx)
	waitJS(t, ctx, "the refusal is shown", `!document.querySelector('[data-testid="limits-error"]').hidden`)
	if got := eval[string](t, ctx, `document.querySelector('[data-testid="limits-error"]').textContent`); !strings.Contains(got, "priority aging every 500ms") {
		t.Errorf("the error shows %q, want the server's detail", got)
	} else {
		t.Logf("the page shows: %s", got)
	}
	if l := s.limits(t, "default").Limits; !l.Aging.IsZero() || l.MaxRunning != 3 {
		t.Errorf("a refused policy changed the stored one: %+v", l)
	}
	if got := eval[string](t, ctx, `document.querySelector('[data-testid="limit-aging-every"]').value`); got != "0.5" {
		t.Errorf("the refused value was lost from the form (%q)", got)
	}

	// A per-kind rate through a new row: 2 sms a minute; three sms jobs
	// use the burst and the third waits.
	step(t, ctx, "set a per-kind rate",
		setField(`[data-testid="limit-aging-every"]`, ""),
		clickJS(`[data-testid="limit-rate-kind-add"]`),
		setField(`[data-testid="limit-rate-kind-rows"] [data-testid="limit-kind-name"]`, "sms"),
		setField(`[data-testid="limit-rate-kind-starts"]`, "2"),
		setField(`[data-testid="limit-rate-kind-per"]`, "60"))
	saveAndConfirm(t, ctx)
	waitJS(t, ctx, "the per-kind rate is saved", `document.querySelector('[data-testid="queue-policy"]').textContent.includes("sms rate 2/60 s")`)
	if r := s.limits(t, "default").Limits.RatePerKind["sms"]; r != (core.RateLimit{Starts: 2, Per: time.Minute}) {
		t.Fatalf("stored sms rate %+v", r)
	}
	for range 3 {
		s.submit(t, `{"kind":"sms"}`)
	}
	wait := `[data-testid="queue-rate-waits"] [data-testid="rate-wait"][data-group="kind:sms"]`
	step(t, ctx, "the sms wait is shown", chromedp.WaitVisible(chromedp.CSS(wait)))
	text := eval[string](t, ctx, fmt.Sprintf(`document.querySelector(%s).textContent`, js(wait)))
	title := eval[string](t, ctx, fmt.Sprintf(`document.querySelector(%s).title`, js(wait)))
	if !strings.HasPrefix(text, "kind:sms waits until ") || !strings.Contains(text, "(in ") || !strings.Contains(title, "UTC") {
		t.Errorf("the wait reads %q (title %q)", text, title)
	}
	waits := s.limits(t, "default").RateWaits
	if len(waits) != 1 || waits[0].Group != "kind:sms" || time.Until(waits[0].NextStart) < 10*time.Second {
		t.Errorf("GET limits rate_waits = %+v, want kind:sms about 30 s ahead", waits)
	}

	// A remote worker of the queue registers no worker count: it is
	// listed, and left out of the sum.
	if status, b := s.request(t, "PUT", "/v1/workers/remote-1", `{"name":"remote-1","queues":["default"]}`); status != http.StatusOK {
		t.Fatalf("register a remote worker: %d %s", status, b)
	}
	remote := `tr[data-testid="queue-node"][data-worker-id="remote-1"]`
	step(t, ctx, "the remote worker is listed", chromedp.WaitVisible(chromedp.CSS(remote)))
	if got := eval[string](t, ctx, fmt.Sprintf(`document.querySelector(%s).querySelector('[data-testid="queue-node-workers"]').textContent`, js(remote))); got != "not reported" {
		t.Errorf("the remote worker's count shows %q", got)
	}
	if got := eval[string](t, ctx, `document.querySelector('[data-testid="queue-concurrency"]').textContent`); got != "3 + 1 node not reporting" {
		t.Errorf("concurrency across workers shows %q", got)
	}

	// The list shows the same.
	step(t, ctx, "back to the list",
		chromedp.Evaluate[chromedp.Void](`location.hash = "#/queues"`),
		chromedp.WaitVisible(chromedp.CSS(row)))
	waitJS(t, ctx, "the list shows the policy, the wait and the count", fmt.Sprintf(`(() => {
		const r = document.querySelector(%s);
		return r.querySelector('[data-testid="queues-list-concurrency"]').textContent === "3 + 1 node not reporting" &&
			r.querySelector('[data-testid="queues-list-nodes"]').textContent.includes("remote-1: ?") &&
			r.querySelector('[data-testid="queues-list-policy"]').textContent.includes("sms rate 2/60 s") &&
			r.querySelector('[data-testid="rate-wait"][data-group="kind:sms"]');
	})()`, js(row)))

	// An edit in progress is kept when the policy changes elsewhere; the
	// page says so, and Discard changes loads the new policy.
	step(t, ctx, "start an edit",
		chromedp.Evaluate[chromedp.Void](`location.hash = "#/queues/default"`),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="limits-form"]`)))
	waitJS(t, ctx, "the form shows the stored policy", `document.querySelector('[data-testid="limit-max-running"]').value === "3"`)
	step(t, ctx, "type a value", setField(`[data-testid="limit-max-running"]`, "9"))
	if status, b := s.request(t, "PUT", "/v1/queues/default/limits", `{"max_running":7}`); status != http.StatusOK {
		t.Fatalf("PUT limits: %d %s", status, b)
	}
	waitJS(t, ctx, "the page says the policy changed elsewhere", `!document.querySelector('[data-testid="limits-changed"]').hidden &&
		document.querySelector('[data-testid="queue-policy"]').textContent === "at most 7 running"`)
	if got := eval[string](t, ctx, `document.querySelector('[data-testid="limit-max-running"]').value`); got != "9" {
		t.Errorf("a poll overwrote the edit in progress (%q)", got)
	}
	step(t, ctx, "discard the edit", clickJS(`[data-testid="limits-revert"]`))
	waitJS(t, ctx, "the form shows the new policy", `document.querySelector('[data-testid="limit-max-running"]').value === "7" &&
		document.querySelector('[data-testid="limits-changed"]').hidden && document.querySelector('[data-testid="limit-workers-per-node"]').value === ""`)

	// Pause (confirmed) and resume from the queue's page.
	step(t, ctx, "pause the queue",
		clickJS(`[data-testid="queue-pause-toggle"]`),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="confirm-ok"]`)),
		chromedp.Click(chromedp.CSS(`[data-testid="confirm-ok"]`)))
	waitJS(t, ctx, "the queue shows as paused", `document.querySelector('[data-testid="screen-queue"]').dataset.paused === "true" &&
		document.querySelector('[data-testid="queue-pause-toggle"]').textContent === "Resume"`)
	if status, b := s.request(t, "GET", "/v1/queues", ""); status != http.StatusOK || !strings.Contains(string(b), `"paused":true`) {
		t.Errorf("GET /v1/queues after pause = %d %s", status, b)
	}
	step(t, ctx, "resume the queue", clickJS(`[data-testid="queue-pause-toggle"]`))
	waitJS(t, ctx, "the queue shows as active", `document.querySelector('[data-testid="screen-queue"]').dataset.paused === "false"`)
	watch.check(t)
}

// TestBrowserQueuesReadOnly: with a producer token the list and the
// queue's page show the policy but no nodes, say that changing needs the
// admin token, and disable the form and Pause.
func TestBrowserQueuesReadOnly(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a browser")
	}
	const producer, admin = "producer-secret-1", "admin-secret-2"
	s := newQueuesStack(t, httpapi.Tokens{Producer: producer, Admin: admin})
	ctx := browser(t)
	watch := watchPage(ctx)
	if status, b := s.request(t, "PUT", "/v1/queues/default/limits", `{"max_running":5}`); status != http.StatusOK {
		t.Fatalf("PUT limits: %d %s", status, b)
	}
	s.submit(t, `{"kind":"sms"}`)

	row := `tr[data-testid="queues-list-row"][data-queue="default"]`
	step(t, ctx, "load the queues list with the producer token",
		chromedp.Navigate(s.url+"/dashboard/#/queues"),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="token-input"]`)),
		chromedp.SendKeys(chromedp.CSS(`[data-testid="token-input"]`), producer),
		chromedp.Click(chromedp.CSS(`[data-testid="token-save"]`)),
		chromedp.WaitVisible(chromedp.CSS(row)))
	waitJS(t, ctx, "the list is read-only", fmt.Sprintf(`(() => {
		const r = document.querySelector(%s);
		return !document.querySelector('[data-testid="queues-readonly"]').hidden &&
			r.querySelector('[data-testid="queues-list-policy"]').textContent === "at most 5 running" &&
			r.querySelector('[data-testid="queues-list-nodes"]').textContent === "—";
	})()`, js(row)))

	step(t, ctx, "open the queue",
		chromedp.Evaluate[chromedp.Void](`location.hash = "#/queues/default"`),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="limits-form"]`)))
	waitJS(t, ctx, "the page is read-only", `(() => {
		const note = document.querySelector('[data-testid="queue-readonly"]');
		return note && !note.hidden && note.textContent.includes("admin") &&
			document.querySelector('[data-testid="limits-form"]').dataset.readonly === "true" &&
			document.querySelector('[data-testid="limits-save"]').disabled &&
			document.querySelector('[data-testid="limit-max-running"]').disabled &&
			document.querySelector('[data-testid="queue-pause-toggle"]').disabled &&
			document.querySelector('[data-testid="limit-max-running"]').value === "5" &&
			!document.querySelector('[data-testid="queue-nodes-none"]').hidden;
	})()`)
	if got := eval[string](t, ctx, `document.querySelector('[data-testid="queue-policy"]').textContent`); got != "at most 5 running" {
		t.Errorf("policy line %q", got)
	}
	watch.check(t)
}
