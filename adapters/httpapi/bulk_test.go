package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/core/contract"
	"github.com/backlogq/backlog/internal/teststores"
)

// bulkSetup fills h's store: queue "mail" with 5 jobs of kind "send"
// (args {"n":0}…{"n":4}) of which the first 3 are discarded, and queue
// "later" with 2 jobs scheduled an hour ahead. It returns the ids.
func bulkSetup(t *testing.T, h *harness) (mail, later []int64) {
	t.Helper()
	ctx := context.Background()
	for i := range 5 {
		res, err := h.c.EnqueueRaw(ctx, "send", fmt.Appendf(nil, `{"n":%d}`, i), &core.Options{Queue: "mail"})
		if err != nil {
			t.Fatal(err)
		}
		mail = append(mail, res.Job.ID)
	}
	for range 2 {
		res, err := h.c.EnqueueRaw(ctx, "digest", nil, &core.Options{Queue: "later", RunAt: time.Now().Add(time.Hour)})
		if err != nil {
			t.Fatal(err)
		}
		later = append(later, res.Job.ID)
	}
	now := time.Now().UTC().Truncate(time.Microsecond)
	jobs, err := h.st.Claim(ctx, contract.ClaimParams{Queue: "mail", WorkerID: "w", Limit: 3, Now: now, LeaseUntil: now.Add(time.Minute)})
	if err != nil || len(jobs) != 3 {
		t.Fatalf("claim: %d jobs, %v", len(jobs), err)
	}
	var outs []contract.Outcome
	for _, j := range jobs {
		outs = append(outs, contract.Outcome{JobID: j.ID, WorkerID: "w", ClaimSeq: j.ClaimSeq, Attempt: j.Attempt, Kind: contract.OutcomeDiscard, At: now,
			Error: &core.AttemptError{Attempt: j.Attempt, At: now, Error: "smtp: 550 mailbox unavailable"}})
	}
	if _, err := h.st.Finish(ctx, outs); err != nil {
		t.Fatal(err)
	}
	return mail, later
}

func (h *harness) bulk(body any) BulkResponse {
	h.t.Helper()
	var out BulkResponse
	h.must(http.StatusOK, "POST", "/v1/jobs/bulk", body, &out)
	return out
}

func TestBulkRetryRunNowCancelDelete(t *testing.T) {
	runAll(t, core.Config{}, Config{}, func(t *testing.T, h *harness) {
		mail, later := bulkSetup(t, h)
		discarded := map[string]any{"queue": "mail", "states": []string{"discarded", "retryable"}}

		// The dry run counts and changes nothing.
		got := h.bulk(map[string]any{"action": "retry", "filter": discarded, "dry_run": true})
		if got.Matched != 3 || got.Applied != 0 || got.Skipped != 0 || !slices.Equal(got.IDs, mail[:3]) {
			t.Fatalf("dry run = %+v; want 3 matched, ids %v", got, mail[:3])
		}
		if j := h.get(mail[0]); j.State != core.StateDiscarded {
			t.Fatalf("a dry run changed job %d to %s", mail[0], j.State)
		}
		got = h.bulk(map[string]any{"action": "retry", "filter": discarded})
		if got.Matched != 3 || got.Applied != 3 || got.Skipped != 0 || !slices.Equal(got.IDs, mail[:3]) {
			t.Fatalf("retry = %+v; want 3 applied", got)
		}
		for _, id := range mail[:3] {
			if j := h.get(id); j.State != core.StateAvailable {
				t.Fatalf("job %d is %s after a bulk retry", id, j.State)
			}
		}
		if got = h.bulk(map[string]any{"action": "retry", "filter": discarded}); got.Matched != 0 || got.IDs == nil {
			t.Fatalf("second retry = %+v; want nothing matched and ids []", got)
		}

		// run_now: the scheduled jobs become available now.
		got = h.bulk(map[string]any{"action": "run_now", "filter": map[string]any{"queue": "later"}})
		if got.Applied != 2 || !slices.Equal(got.IDs, later) {
			t.Fatalf("run_now = %+v; want both scheduled jobs", got)
		}
		for _, id := range later {
			if j := h.get(id); j.State != core.StateAvailable || j.RunAt.After(time.Now()) {
				t.Fatalf("job %d after run_now: %s at %s", id, j.State, j.RunAt)
			}
		}
		p := wantProblem(t, h.do("POST", "/v1/jobs/bulk", map[string]any{"action": "run_now", "filter": map[string]any{"states": []string{"discarded"}}}), SlugInvalidRequest)
		if !strings.Contains(p.Detail, "run_now applies to scheduled and retryable jobs") {
			t.Fatalf("run_now of discarded jobs: %q", p.Detail)
		}

		// By args, then by ids with a limit.
		got = h.bulk(map[string]any{"action": "cancel", "filter": map[string]any{"args": map[string]any{"n": 4}}})
		if got.Applied != 1 || got.IDs[0] != mail[4] {
			t.Fatalf("cancel by args = %+v; want job %d", got, mail[4])
		}
		got = h.bulk(map[string]any{"action": "delete", "filter": map[string]any{"ids": []int64{mail[2], mail[1], 99999999}}, "limit": 1})
		if got.Matched != 1 || got.Applied != 1 || got.IDs[0] != mail[1] {
			t.Fatalf("delete by ids with limit 1 = %+v; want only job %d (the lowest id)", got, mail[1])
		}
		wantProblem(t, h.do("GET", "/v1/jobs/"+itoa(mail[1]), nil), SlugJobNotFound)
		if j := h.get(mail[2]); j.State != core.StateAvailable {
			t.Fatalf("job %d beyond the limit is %s", mail[2], j.State)
		}
	})
}

func TestBulkSkipsRunningJobs(t *testing.T) {
	h := newHarness(t, teststores.SQLite(t), core.Config{}, Config{})
	mail, _ := bulkSetup(t, h)
	h.register("w1", map[string]any{"queues": []string{"mail"}})
	if c := h.claim("w1", nil); len(c) != 1 || c[0].ID != mail[3] {
		t.Fatalf("claim = %v", c)
	}
	got := h.bulk(map[string]any{"action": "delete", "filter": map[string]any{"queue": "mail"}})
	if got.Matched != 5 || got.Applied != 4 || got.Skipped != 1 || slices.Contains(got.IDs, mail[3]) {
		t.Fatalf("delete with a running job = %+v; want 4 applied, the running job %d skipped", got, mail[3])
	}
	if j := h.get(mail[3]); j.State != core.StateRunning {
		t.Fatalf("the running job is %s", j.State)
	}
}

func TestBulkRefusesBadInput(t *testing.T) {
	h := newHarness(t, teststores.Memory(t), core.Config{}, Config{})
	many := make([]int64, core.MaxBulkIDs+1)
	for i := range many {
		many[i] = int64(i + 1)
	}
	cases := []struct {
		body any
		want string
	}{
		{map[string]any{"action": "explode", "filter": map[string]any{"queue": "q"}}, "action must be retry, cancel, delete or run_now"},
		{map[string]any{"filter": map[string]any{"queue": "q"}}, "action must be"},
		{map[string]any{"action": "retry"}, "filter must name at least one"},
		{map[string]any{"action": "retry", "filter": map[string]any{}}, "filter must name at least one"},
		{map[string]any{"action": "retry", "filter": map[string]any{"queue": "q"}, "limit": -1}, "limit must be 1..100000"},
		{map[string]any{"action": "retry", "filter": map[string]any{"queue": "q"}, "limit": core.MaxBulkJobs + 1}, "limit must be"},
		{map[string]any{"action": "retry", "filter": map[string]any{"states": []string{"lost"}}}, "is not one of waiting"},
		{map[string]any{"action": "retry", "filter": map[string]any{"ids": []int64{0}}}, "job id 0 is not a positive integer"},
		{map[string]any{"action": "retry", "filter": map[string]any{"ids": many}}, "over the limit of 1000"},
		{map[string]any{"action": "retry", "filter": map[string]any{"args": map[string]any{"tags": []string{"x"}}}}, "arrays cannot be searched"},
		{map[string]any{"action": "retry", "filter": map[string]any{"args": map[string]any{"backlog_enc": 1}}}, "reserved for sealed args"},
		{map[string]any{"action": "retry", "filter": map[string]any{"queue": "q", "color": "red"}}, "color"},
		{`{"action":"retry","filter":{"queue":"q"},"dry_run":"yes"}`, "dry_run"},
	}
	for _, c := range cases {
		r := h.do("POST", "/v1/jobs/bulk", c.body)
		if r.status != http.StatusBadRequest || !strings.Contains(string(r.body), c.want) {
			t.Errorf("POST /v1/jobs/bulk %v = %d %s; want 400 saying %q", c.body, r.status, r.body, c.want)
		}
	}
}

func TestBulkNeedsAdmin(t *testing.T) {
	h := newHarness(t, teststores.Memory(t), core.Config{}, Config{Tokens: Tokens{Producer: "p", Admin: "a"}})
	body := map[string]any{"action": "delete", "filter": map[string]any{"queue": "q"}, "dry_run": true}
	producer, admin := "p", "a"
	wantProblem(t, h.send(req{method: "POST", path: "/v1/jobs/bulk", body: body, token: &producer}), SlugForbidden)
	if r := h.send(req{method: "POST", path: "/v1/jobs/bulk", body: body, token: &admin}); r.status != http.StatusOK {
		t.Fatalf("admin: %d %s", r.status, r.body)
	}
}

func TestListManyStatesAndArgs(t *testing.T) {
	runAll(t, core.Config{}, Config{}, func(t *testing.T, h *harness) {
		mail, later := bulkSetup(t, h)
		var out ListResponse
		h.must(http.StatusOK, "GET", "/v1/jobs?state=discarded,scheduled", nil, &out)
		if got := listIDs(out); !slices.Equal(got, append(slices.Clone(mail[:3]), later...)) {
			t.Fatalf("state=discarded,scheduled listed %v", got)
		}
		out = ListResponse{}
		h.must(http.StatusOK, "GET", "/v1/jobs?state=discarded&state=available&queue=mail", nil, &out)
		if got := listIDs(out); !slices.Equal(got, mail) {
			t.Fatalf("repeated state listed %v; want %v", got, mail)
		}
		out = ListResponse{}
		h.must(http.StatusOK, "GET", "/v1/jobs?args="+url.QueryEscape(`{"n":3}`), nil, &out)
		if got := listIDs(out); !slices.Equal(got, mail[3:4]) {
			t.Fatalf("args={\"n\":3} listed %v; want [%d]", got, mail[3])
		}
		p := wantProblem(t, h.do("GET", "/v1/jobs?args="+url.QueryEscape(`{"n":[3]}`), nil), SlugInvalidRequest)
		if !strings.Contains(p.Detail, "arrays cannot be searched") {
			t.Fatalf("args with an array: %q", p.Detail)
		}
		wantProblem(t, h.do("GET", "/v1/jobs?args=nope", nil), SlugInvalidRequest)
	})
}

func listIDs(out ListResponse) []int64 {
	var ids []int64
	for _, j := range out.Jobs {
		ids = append(ids, j.ID)
	}
	return ids
}

// slowCancelStore takes delay over every Cancel.
type slowCancelStore struct {
	contract.Store
	delay time.Duration
}

func (s slowCancelStore) Cancel(ctx context.Context, id int64, now time.Time) (*core.Job, error) {
	time.Sleep(s.delay)
	return s.Store.Cancel(ctx, id, now)
}

// TestBulkOutlivesWriteTimeout: an action longer than Config.WriteTimeout
// is still answered (its deadline gets BulkExtraTime on top).
func TestBulkOutlivesWriteTimeout(t *testing.T) {
	st := slowCancelStore{Store: teststores.Memory(t), delay: 40 * time.Millisecond}
	h := newHarness(t, st, core.Config{}, Config{WriteTimeout: 200 * time.Millisecond})
	for range 10 {
		h.submit(map[string]any{"kind": "k", "queue": "slow"})
	}
	start := time.Now()
	got := h.bulk(map[string]any{"action": "cancel", "filter": map[string]any{"queue": "slow"}})
	if got.Applied != 10 {
		t.Fatalf("cancel = %+v; want 10 applied", got)
	}
	if d := time.Since(start); d < 400*time.Millisecond {
		t.Fatalf("the action took %v; the test needs it to outlast the 200ms write timeout", d)
	}
}

// sort=run_at lists scheduled jobs in the order they come due, page by
// page with the (next_after, next_after_run_at) cursor.
func TestListSortedByRunAt(t *testing.T) {
	runAll(t, core.Config{}, Config{}, func(t *testing.T, h *harness) {
		var want []int64
		byHour := map[int][]int64{}
		for _, hours := range []int{5, 1, 3, 1, 4, 2} {
			j := h.submit(map[string]any{"kind": "k", "queue": "later", "delay_seconds": hours * 3600})
			byHour[hours] = append(byHour[hours], j.ID)
		}
		for hours := 1; hours <= 5; hours++ {
			want = append(want, byHour[hours]...)
		}
		var got []int64
		q := "/v1/jobs?queue=later&state=scheduled&sort=run_at&limit=2"
		for range 10 {
			var out ListResponse
			h.must(http.StatusOK, "GET", q, nil, &out)
			got = append(got, listIDs(out)...)
			if out.NextAfter == nil {
				break
			}
			if out.NextAfterRunAt == nil {
				t.Fatalf("a page sorted by run_at without next_after_run_at: %+v", out)
			}
			q = "/v1/jobs?queue=later&state=scheduled&sort=run_at&limit=2&after=" + strconv.FormatInt(*out.NextAfter, 10) +
				"&after_run_at=" + url.QueryEscape(out.NextAfterRunAt.Format(time.RFC3339Nano))
		}
		if !slices.Equal(got, want) {
			t.Fatalf("sort=run_at listed %v; want %v", got, want)
		}
		wantProblem(t, h.do("GET", "/v1/jobs?sort=due", nil), SlugInvalidRequest)
		wantProblem(t, h.do("GET", "/v1/jobs?sort=run_at&after=3", nil), SlugInvalidRequest)
		wantProblem(t, h.do("GET", "/v1/jobs?after=3&after_run_at=2030-01-01T00:00:00Z", nil), SlugInvalidRequest)
	})
}
