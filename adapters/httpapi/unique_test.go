package httpapi

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/core/contract"
	"github.com/backlogq/backlog/internal/teststores"
)

// completeDeleting claims the one due job of queue and completes it with
// a completed retention of zero: its row goes, its key stays held.
func completeDeleting(t *testing.T, st contract.Store, queue string) *core.Job {
	t.Helper()
	ctx := context.Background()
	now := time.Now().UTC()
	jobs, err := st.Claim(ctx, contract.ClaimParams{Queue: queue, WorkerID: "w", Limit: 1, Now: now, LeaseUntil: now.Add(time.Minute)})
	if err != nil || len(jobs) != 1 {
		t.Fatalf("claim from %q: %v %v", queue, jobs, err)
	}
	if _, err := st.Finish(ctx, []contract.Outcome{{JobID: jobs[0].ID, WorkerID: "w", ClaimSeq: jobs[0].ClaimSeq, Attempt: 1, Kind: contract.OutcomeComplete, At: now, Delete: true}}); err != nil {
		t.Fatal(err)
	}
	return jobs[0]
}

// An Idempotency-Key is bound to the kind, queue and args of the
// submission that took it: a retry of the same request (args with keys
// in another order, other spacing) answers 200 with the original job; the
// key with another kind, queue or args answers 422
// idempotency-key-reused, while the job lives and once its row is gone.
func TestIdempotencyKeyReusedWithAnotherBody(t *testing.T) {
	teststores.Run(t, func(t *testing.T, st contract.Store) {
		h := newHarness(t, st, core.Config{}, Config{})
		submit := func(key string, body any) reply {
			return h.send(req{method: "POST", path: "/v1/jobs", body: body, header: map[string]string{"Idempotency-Key": key}})
		}
		var first SubmitResponse
		r := submit("pay-7", map[string]any{"kind": "charge", "queue": "billing", "args": map[string]any{"order": 7, "amount": "10.00"}})
		if r.status != http.StatusCreated {
			t.Fatalf("first: %d %s", r.status, r.body)
		}
		r.decode(t, &first)
		same := `{"kind":"charge","queue":"billing","args":{ "amount" : "10.00", "order" : 7 }}`
		var again SubmitResponse
		r = submit("pay-7", same)
		r.decode(t, &again)
		if r.status != http.StatusOK || !again.Duplicate || again.Job.ID != first.Job.ID {
			t.Fatalf("the same request again: %d %s", r.status, r.body)
		}
		others := map[string]map[string]any{
			"args":  {"kind": "charge", "queue": "billing", "args": map[string]any{"order": 7, "amount": "99.00"}},
			"kind":  {"kind": "refund", "queue": "billing", "args": map[string]any{"order": 7, "amount": "10.00"}},
			"queue": {"kind": "charge", "args": map[string]any{"order": 7, "amount": "10.00"}},
		}
		for what, body := range others {
			p := wantProblem(t, submit("pay-7", body), SlugIdempotencyKeyReused)
			if !strings.Contains(p.Detail, "pay-7") {
				t.Fatalf("another %s: detail %q names no key", what, p.Detail)
			}
		}
		completeDeleting(t, st, "billing")
		wantProblem(t, submit("pay-7", others["args"]), SlugIdempotencyKeyReused)
		r = submit("pay-7", same)
		r.decode(t, &again)
		if r.status != http.StatusOK || !again.Duplicate || again.Job.ID != first.Job.ID {
			t.Fatalf("the same request after the job's row was deleted: %d %s", r.status, r.body)
		}
		// A unique_key without the header keeps deduplicating as before.
		h.must(http.StatusOK, "POST", "/v1/jobs", map[string]any{"kind": "charge", "queue": "billing", "unique_key": "pay-7", "args": map[string]any{"other": true}}, nil)
		if jobs, err := st.List(context.Background(), core.ListParams{Queue: "billing"}); err != nil || len(jobs) != 0 {
			t.Fatalf("jobs of billing: %v %v; want none (the only one was deleted at completion, nothing new inserted)", jobs, err)
		}
	})
}

// Holds on unique keys: admins list them (key, scope, job, whether the
// job is gone, until when) and release one whose job is finished or gone,
// after which the key makes a new job; a live job keeps its key (409), a
// key nothing holds is 404, producers may do neither (403).
func TestUniqueHoldsListAndRelease(t *testing.T) {
	teststores.Run(t, func(t *testing.T, st contract.Store) {
		h := newHarness(t, st, core.Config{}, Config{Tokens: Tokens{Producer: "p", Admin: "a"}})
		h.token = "p"
		var squat SubmitResponse
		h.must(http.StatusCreated, "POST", "/v1/jobs", map[string]any{"kind": "report", "queue": "reports", "unique_key": "tenant/42 ü", "unique_for_seconds": 30 * 86400}, &squat)
		completeDeleting(t, st, "reports")
		var live SubmitResponse
		h.must(http.StatusCreated, "POST", "/v1/jobs", map[string]any{"kind": "mail", "queue": "mail", "unique_key": "welcome", "unique_scope": "queue", "unique_for_seconds": 3600}, &live)
		// Still held: the producer's resubmission is a duplicate.
		h.must(http.StatusOK, "POST", "/v1/jobs", map[string]any{"kind": "report", "queue": "reports", "unique_key": "tenant/42 ü"}, nil)

		wantProblem(t, h.do("GET", "/v1/unique", nil), SlugForbidden)
		wantProblem(t, h.do("DELETE", "/v1/unique/welcome", nil), SlugForbidden)
		h.token = "a"
		var list UniqueHoldsResponse
		h.must(http.StatusOK, "GET", "/v1/unique", nil, &list)
		if len(list.Holds) != 2 || list.NextAfter != "" {
			t.Fatalf("holds: %s", h.do("GET", "/v1/unique", nil).body)
		}
		gone, mail := list.Holds[0], list.Holds[1]
		if gone.Key != "tenant/42 ü" || gone.Scope != "global" || gone.ScopedKey != "g:tenant/42 ü" || gone.JobID != squat.Job.ID || !gone.JobGone || gone.State != "" ||
			gone.UniqueForSeconds != 30*86400 || gone.Until == nil || time.Until(*gone.Until) < 29*24*time.Hour {
			t.Fatalf("the gone job's hold: %+v", gone)
		}
		if mail.Key != "welcome" || mail.Scope != "queue" || mail.ScopedKey != "q4:mail:welcome" || mail.JobID != live.Job.ID || mail.JobGone || mail.State != core.StateAvailable || mail.Until != nil || mail.UniqueForSeconds != 3600 {
			t.Fatalf("the live job's hold: %+v", mail)
		}
		var page UniqueHoldsResponse
		h.must(http.StatusOK, "GET", "/v1/unique?limit=1", nil, &page)
		if len(page.Holds) != 1 || page.NextAfter != gone.ScopedKey {
			t.Fatalf("page of 1: %+v", page)
		}
		h.must(http.StatusOK, "GET", "/v1/unique?limit=1&after="+url.QueryEscape(page.NextAfter), nil, &page)
		if len(page.Holds) != 1 || page.Holds[0].ScopedKey != mail.ScopedKey || page.NextAfter != "" {
			t.Fatalf("second page of 1: %+v", page)
		}
		wantProblem(t, h.do("GET", "/v1/unique?limit=0", nil), SlugInvalidRequest)
		wantProblem(t, h.do("GET", "/v1/unique?state=x", nil), SlugInvalidRequest)

		// A live job keeps its key; the scope must be named.
		wantProblem(t, h.do("DELETE", "/v1/unique/welcome?scope=queue&queue=mail", nil), SlugInvalidState)
		wantProblem(t, h.do("DELETE", "/v1/unique/welcome", nil), SlugUniqueHoldNotFound)
		wantProblem(t, h.do("DELETE", "/v1/unique/welcome?scope=queue", nil), SlugInvalidRequest)
		wantProblem(t, h.do("DELETE", "/v1/unique/welcome?scope=tenant", nil), SlugInvalidRequest)

		var rel UniqueHoldResponse
		h.must(http.StatusOK, "DELETE", "/v1/unique/"+url.PathEscape("tenant/42 ü"), nil, &rel)
		if rel.Hold.JobID != squat.Job.ID || !rel.Hold.JobGone {
			t.Fatalf("released: %+v", rel)
		}
		wantProblem(t, h.do("DELETE", "/v1/unique/"+url.PathEscape("tenant/42 ü"), nil), SlugUniqueHoldNotFound)
		h.token = "p"
		var fresh SubmitResponse
		h.must(http.StatusCreated, "POST", "/v1/jobs", map[string]any{"kind": "report", "queue": "reports", "unique_key": "tenant/42 ü"}, &fresh)
		if fresh.Duplicate || fresh.Job.ID == squat.Job.ID {
			t.Fatalf("after the release: %+v", fresh)
		}
		h.token = "a"
		h.must(http.StatusOK, "POST", "/v1/jobs/"+itoa(live.Job.ID)+"/cancel", nil, nil)
		h.must(http.StatusOK, "DELETE", "/v1/unique/welcome?scope=queue&queue=mail", nil, &rel)
		if rel.Hold.State != core.StateCancelled {
			t.Fatalf("released the cancelled job's hold: %+v", rel)
		}
	})
}

// A submission may hold its unique key for at most the server's
// MaxUniqueFor (30 days by default) after its job finishes: more is 400
// invalid-request naming the limit, nothing inserted. An Idempotency-Key's
// default window shrinks to a shorter limit.
func TestMaxUniqueFor(t *testing.T) {
	h := newHarness(t, teststores.Memory(t), core.Config{}, Config{})
	p := wantProblem(t, h.do("POST", "/v1/jobs", map[string]any{"kind": "k", "unique_key": "u", "unique_for_seconds": 30*86400 + 1}), SlugInvalidRequest)
	if !strings.Contains(p.Detail, "2592000") || !strings.Contains(p.Detail, "--max-unique-for") {
		t.Fatalf("detail %q", p.Detail)
	}
	wantProblem(t, h.do("POST", "/v1/jobs/batch", map[string]any{"jobs": []any{map[string]any{"kind": "k"}, map[string]any{"kind": "k", "unique_key": "v", "unique_for_seconds": 366 * 86400}}}), SlugInvalidRequest)
	if jobs, _ := h.st.List(context.Background(), core.ListParams{}); len(jobs) != 0 {
		t.Fatalf("jobs inserted by refused submissions: %d", len(jobs))
	}
	h.must(http.StatusCreated, "POST", "/v1/jobs", map[string]any{"kind": "k", "unique_key": "u", "unique_for_seconds": 30 * 86400}, nil)

	short := newHarness(t, teststores.Memory(t), core.Config{}, Config{MaxUniqueFor: time.Hour})
	wantProblem(t, short.do("POST", "/v1/jobs", map[string]any{"kind": "k", "unique_key": "u", "unique_for_seconds": 3601}), SlugInvalidRequest)
	short.must(http.StatusCreated, "POST", "/v1/jobs", map[string]any{"kind": "k", "queue": "q"}, nil)
	r := short.send(req{method: "POST", path: "/v1/jobs", body: map[string]any{"kind": "k", "queue": "idem"}, header: map[string]string{"Idempotency-Key": "i"}})
	if r.status != http.StatusCreated {
		t.Fatalf("idempotent submission under a 1 h limit: %d %s", r.status, r.body)
	}
	completeDeleting(t, short.st, "idem")
	holds, _, err := short.st.(contract.UniqueHolder).UniqueHolds(context.Background(), contract.UniqueHoldsParams{Now: time.Now()})
	if err != nil || len(holds) != 1 || holds[0].UniqueFor != time.Hour {
		t.Fatalf("the idempotency key's hold: %+v %v; want a window of 1 h", holds, err)
	}
	for _, bad := range []time.Duration{-time.Second, contract.MaxUniqueFor + time.Second} {
		c, err := core.NewClient(teststores.Memory(t), core.Config{MaintenanceInterval: -1})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := New(c, Config{MaxUniqueFor: bad}); err == nil {
			t.Fatalf("New with MaxUniqueFor %s: no error", bad)
		}
	}
}
