package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/core/contract"
	"github.com/jmoiron/sqlx"
)

var t0 = time.Date(2030, 1, 2, 3, 4, 5, 123456000, time.UTC)

func openTest(t testing.TB, opts ...Option) *Store {
	t.Helper()
	s, err := Open(context.Background(), filepath.Join(t.TempDir(), "test.db"), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func job(queue, kind string) contract.InsertParams {
	return contract.InsertParams{Queue: queue, Kind: kind, Args: json.RawMessage(`{"n":1}`), Priority: 5, MaxAttempts: 3, RunAt: t0}
}

func insert(t testing.TB, s *Store, ps ...contract.InsertParams) []contract.InsertResult {
	t.Helper()
	res, err := s.Insert(context.Background(), t0, ps)
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != len(ps) {
		t.Fatalf("insert returned %d results for %d jobs", len(res), len(ps))
	}
	return res
}

func claim(t testing.TB, s *Store, queue, worker string, limit int, now time.Time) []*contract.Job {
	t.Helper()
	jobs, err := s.Claim(context.Background(), contract.ClaimParams{Queue: queue, WorkerID: worker, Limit: limit, Now: now, LeaseUntil: now.Add(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	return jobs
}

func ids(jobs []*contract.Job) []int64 {
	out := make([]int64, len(jobs))
	for i, j := range jobs {
		out[i] = j.ID
	}
	return out
}

func TestRoundTrip(t *testing.T) {
	s := openTest(t)
	ctx := context.Background()
	p := contract.InsertParams{
		Queue: "q:1", Kind: "email.send", Args: json.RawMessage(`{"to":"ü@example.com","n":[1,2]}`),
		Priority: 2, MaxAttempts: 7, RunAt: t0.Add(time.Hour), Deadline: time.Date(9999, 12, 31, 23, 59, 59, 999999000, time.UTC),
		UniqueKey: "k-ü", Tags: []string{"a", "β"}, Metadata: map[string]string{"trace": "x", "": "empty"},
	}
	res := insert(t, s, p, job("q:1", "plain"))
	j := res[0].Job
	if res[0].Duplicate || j.ID == 0 || j.State != contract.StateScheduled || j.Attempt != 0 || !j.CreatedAt.Equal(t0) {
		t.Fatalf("inserted %+v", j)
	}
	got, err := s.Get(ctx, j.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, j) {
		t.Fatalf("get = %+v\nwant %+v", got, j)
	}
	if got.Queue != p.Queue || got.Kind != p.Kind || string(got.Args) != string(p.Args) || got.Priority != 2 || got.MaxAttempts != 7 ||
		!got.RunAt.Equal(p.RunAt) || !got.Deadline.Equal(p.Deadline) || got.UniqueKey != p.UniqueKey ||
		!reflect.DeepEqual(got.Tags, p.Tags) || !reflect.DeepEqual(got.Metadata, p.Metadata) || got.RunAt.Location() != time.UTC {
		t.Fatalf("round trip lost data: %+v", got)
	}
	plain := res[1].Job
	if plain.State != contract.StateAvailable || plain.Tags != nil || plain.Metadata != nil || plain.Errors != nil || plain.Result != nil ||
		!plain.Deadline.IsZero() || !plain.AttemptedAt.IsZero() || plain.WorkerID != "" || plain.ID <= j.ID {
		t.Fatalf("plain job %+v", plain)
	}
	if _, err := s.Get(ctx, 999999); !errors.Is(err, contract.ErrNotFound) {
		t.Fatalf("get missing: %v", err)
	}
}

func TestClaimOrderDueAndLimit(t *testing.T) {
	s := openTest(t)
	var ps []contract.InsertParams
	for i, pr := range []int{5, 1, 5, 10, 1} {
		p := job("q", fmt.Sprint("k", i))
		p.Priority = pr
		p.RunAt = t0.Add(-time.Duration(i) * time.Second)
		ps = append(ps, p)
	}
	future := job("q", "future")
	future.RunAt = t0.Add(time.Second)
	other := job("other", "x")
	ps = append(ps, future, other)
	res := insert(t, s, ps...)
	got := claim(t, s, "q", "w1", 3, t0)
	want := []int64{res[4].Job.ID, res[1].Job.ID, res[2].Job.ID} // p1 older first, then p5 older first
	if !reflect.DeepEqual(ids(got), want) {
		t.Fatalf("claimed %v, want %v", ids(got), want)
	}
	for _, j := range got {
		if j.State != contract.StateRunning || j.Attempt != 1 || j.WorkerID != "w1" || !j.AttemptedAt.Equal(t0) || !j.LeaseUntil.Equal(t0.Add(time.Minute)) {
			t.Fatalf("claimed job %+v", j)
		}
	}
	got = claim(t, s, "q", "w2", 10, t0)
	if !reflect.DeepEqual(ids(got), []int64{res[0].Job.ID, res[3].Job.ID}) {
		t.Fatalf("second claim %v", ids(got))
	}
	if got := claim(t, s, "q", "w2", 10, t0); len(got) != 0 {
		t.Fatalf("claimed non-due %v", ids(got))
	}
	if got := claim(t, s, "q", "w2", 10, t0.Add(time.Second)); len(got) != 1 || got[0].ID != res[5].Job.ID {
		t.Fatalf("claim at run_at: %v", ids(got))
	}
}

func TestPause(t *testing.T) {
	s := openTest(t)
	ctx := context.Background()
	insert(t, s, job("q", "a"), job("q", "b"))
	for i := 0; i < 2; i++ {
		if err := s.PauseQueue(ctx, "q", t0); err != nil {
			t.Fatal(err)
		}
	}
	if got := claim(t, s, "q", "w", 10, t0); len(got) != 0 {
		t.Fatalf("claimed from paused queue: %v", ids(got))
	}
	st, err := s.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(st) != 1 || !st[0].Paused || st[0].Counts[contract.StateAvailable] != 2 {
		t.Fatalf("stats %+v", st)
	}
	if err := s.PauseQueue(ctx, "empty", t0); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		if err := s.ResumeQueue(ctx, "q", t0); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.ResumeQueue(ctx, "never", t0); err != nil {
		t.Fatal(err)
	}
	st, _ = s.Stats(ctx)
	if len(st) != 2 || st[0].Queue != "empty" || !st[0].Paused || st[1].Queue != "q" || st[1].Paused {
		t.Fatalf("stats %+v", st)
	}
	if got := claim(t, s, "q", "w", 10, t0); len(got) != 2 {
		t.Fatalf("claim after resume: %v", ids(got))
	}
}

func finish(t testing.TB, s *Store, os ...contract.Outcome) []contract.FinishResult {
	t.Helper()
	res, err := s.Finish(context.Background(), os)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func TestFinishOutcomes(t *testing.T) {
	s := openTest(t)
	ctx := context.Background()
	var ps []contract.InsertParams
	for i := 0; i < 7; i++ {
		ps = append(ps, job("q", fmt.Sprint("k", i)))
	}
	insert(t, s, ps...)
	js := claim(t, s, "q", "w", 10, t0)
	if len(js) != 7 {
		t.Fatalf("claimed %d", len(js))
	}
	at := t0.Add(time.Second)
	e := &contract.AttemptError{Attempt: 1, At: at, Error: "boom", Trace: "stack"}
	o := func(j *contract.Job, k contract.OutcomeKind) contract.Outcome {
		return contract.Outcome{JobID: j.ID, WorkerID: "w", ClaimSeq: j.ClaimSeq, Attempt: 1, Kind: k, At: at}
	}
	oc := o(js[0], contract.OutcomeComplete)
	oc.Result = []byte(`{"ok":true}`)
	od := o(js[1], contract.OutcomeComplete)
	od.Delete = true
	or := o(js[2], contract.OutcomeRetry)
	or.RunAt, or.Error = at.Add(time.Minute), e
	os := o(js[3], contract.OutcomeSnooze)
	os.RunAt = at.Add(time.Hour)
	on := o(js[4], contract.OutcomeContinue)
	on.RunAt, on.NextKind, on.NextArgs = at, "step2", json.RawMessage(`{"s":2}`)
	ox := o(js[5], contract.OutcomeCancel)
	ox.Error = e
	ods := o(js[6], contract.OutcomeDiscard)
	ods.Error = e
	stale := o(js[0], contract.OutcomeComplete)
	stale.WorkerID = "other"
	res := finish(t, s, oc, od, or, os, on, ox, ods, stale)
	for i, r := range res[:7] {
		if !r.Applied || r.JobID != js[i].ID {
			t.Fatalf("result %d: %+v", i, r)
		}
	}
	if res[7].Applied {
		t.Fatal("stale finish applied")
	}
	get := func(id int64) *contract.Job {
		j, err := s.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return j
	}
	if j := get(js[0].ID); j.State != contract.StateCompleted || !j.FinishedAt.Equal(at) || string(j.Result) != `{"ok":true}` || !j.LeaseUntil.IsZero() || j.WorkerID != "w" {
		t.Fatalf("complete: %+v", j)
	}
	if _, err := s.Get(ctx, js[1].ID); !errors.Is(err, contract.ErrNotFound) {
		t.Fatalf("complete+delete left the row: %v", err)
	}
	if j := get(js[2].ID); j.State != contract.StateRetryable || !j.RunAt.Equal(at.Add(time.Minute)) || j.Attempt != 1 || len(j.Errors) != 1 ||
		j.Errors[0] != *e || !j.FinishedAt.IsZero() {
		t.Fatalf("retry: %+v", j)
	}
	if j := get(js[3].ID); j.State != contract.StateScheduled || j.Attempt != 0 || !j.RunAt.Equal(at.Add(time.Hour)) || j.Errors != nil {
		t.Fatalf("snooze: %+v", j)
	}
	if j := get(js[4].ID); j.State != contract.StateAvailable || j.Attempt != 0 || j.Kind != "step2" || string(j.Args) != `{"s":2}` {
		t.Fatalf("continue: %+v", j)
	}
	if j := get(js[5].ID); j.State != contract.StateCancelled || !j.FinishedAt.Equal(at) || len(j.Errors) != 1 {
		t.Fatalf("cancel: %+v", j)
	}
	if j := get(js[6].ID); j.State != contract.StateDiscarded || !j.FinishedAt.Equal(at) || len(j.Errors) != 1 {
		t.Fatalf("discard: %+v", j)
	}
	// Second retry appends to the history.
	js2 := claim(t, s, "q", "w2", 10, at.Add(time.Minute))
	if len(js2) != 2 { // the retried job and the continued one
		t.Fatalf("reclaimed %v", ids(js2))
	}
	for _, j := range js2 {
		if j.ID == js[2].ID {
			o := contract.Outcome{JobID: j.ID, WorkerID: "w2", ClaimSeq: j.ClaimSeq, Attempt: 2, Kind: contract.OutcomeRetry, At: at, RunAt: at,
				Error: &contract.AttemptError{Attempt: 2, At: at, Error: "again"}}
			if r := finish(t, s, o, o); !r[0].Applied || r[1].Applied {
				t.Fatalf("duplicate outcome results %+v", r)
			}
			if j := get(j.ID); len(j.Errors) != 2 || j.Errors[1].Error != "again" || j.Attempt != 2 {
				t.Fatalf("history %+v", j.Errors)
			}
		}
	}
	if _, err := s.Finish(ctx, []contract.Outcome{{JobID: 1, Kind: "bogus"}}); err == nil {
		t.Fatal("unknown kind accepted")
	}
}

func TestUniqueKeys(t *testing.T) {
	s := openTest(t)
	ctx := context.Background()
	a := job("q", "a")
	a.UniqueKey = "K"
	b := job("q", "b")
	b.UniqueKey = "K"
	res := insert(t, s, a, job("q", "x"), b)
	if res[0].Duplicate || !res[2].Duplicate || res[2].Job.ID != res[0].Job.ID || res[1].Duplicate {
		t.Fatalf("in-batch duplicate: %+v %+v %+v", res[0], res[1], res[2])
	}
	res2 := insert(t, s, b, job("q", "y"))
	if !res2[0].Duplicate || res2[0].Job.ID != res[0].Job.ID || res2[0].Job.Kind != "a" || res2[1].Job.ID <= res[1].Job.ID {
		t.Fatalf("duplicate of existing: %+v", res2[0])
	}
	if _, err := s.Cancel(ctx, res[0].Job.ID, t0); err != nil {
		t.Fatal(err)
	}
	res3 := insert(t, s, b)
	if res3[0].Duplicate || res3[0].Job.ID == res[0].Job.ID {
		t.Fatalf("key not free after final state: %+v", res3[0])
	}
	// Retrying the cancelled one would make two live holders.
	if _, err := s.Retry(ctx, res[0].Job.ID, t0); !errors.Is(err, contract.ErrInvalidState) {
		t.Fatalf("retry with key held: %v", err)
	}
	// Concurrent inserts of one key yield one job.
	var wg sync.WaitGroup
	got := make([]int64, 8)
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := job("q", "c")
			p.UniqueKey = "concurrent"
			r, err := s.Insert(ctx, t0, []contract.InsertParams{p})
			if err != nil {
				t.Error(err)
				return
			}
			got[i] = r[0].Job.ID
		}()
	}
	wg.Wait()
	for _, id := range got {
		if id != got[0] {
			t.Fatalf("concurrent unique inserts gave ids %v", got)
		}
	}
}

func TestLeasesRescueDeadlines(t *testing.T) {
	s := openTest(t)
	ctx := context.Background()
	last := job("q", "last")
	last.MaxAttempts = 1
	dl := job("q", "deadline")
	dl.Deadline = t0.Add(30 * time.Second)
	insert(t, s, job("q", "a"), last, dl)
	js := claim(t, s, "q", "w", 10, t0) // lease until t0+1m
	if len(js) != 3 {
		t.Fatal(len(js))
	}
	held := make([]contract.Lease, len(js))
	for i, j := range js {
		held[i] = contract.Lease{JobID: j.ID, ClaimSeq: j.ClaimSeq}
	}
	if n, err := s.ExtendLeases(ctx, "w", held, t0.Add(2*time.Minute)); err != nil || n != 3 {
		t.Fatalf("extend: %d %v", n, err)
	}
	if n, _ := s.ExtendLeases(ctx, "nobody", held, t0.Add(time.Hour)); n != 0 {
		t.Fatalf("extend other worker touched %d", n)
	}
	decide := func(now time.Time) contract.RescueFunc {
		return func(j *contract.Job, seen time.Time) contract.Outcome {
			return core.DecideRescue(j, core.CauseLeaseExpired, seen, now)
		}
	}
	if r, err := s.Rescue(ctx, t0.Add(90*time.Second), 10, decide(t0.Add(90*time.Second))); err != nil || len(r) != 0 {
		t.Fatalf("rescued unexpired: %v %v", r, err)
	}
	now := t0.Add(3 * time.Minute)
	r, err := s.Rescue(ctx, now, 2, decide(now))
	if err != nil || len(r) != 2 {
		t.Fatalf("rescue limit: %v %v", ids(r), err)
	}
	r2, _ := s.Rescue(ctx, now, 10, decide(now))
	r = append(r, r2...)
	if len(r) != 3 {
		t.Fatalf("rescued %d", len(r))
	}
	for _, j := range r {
		if len(j.Errors) != 1 || j.Errors[0].Attempt != 1 || !j.LeaseUntil.IsZero() {
			t.Fatalf("rescued %+v", j)
		}
		switch j.Kind {
		case "a":
			if j.State != contract.StateRetryable || !j.RunAt.Equal(t0) || !j.FinishedAt.IsZero() {
				t.Fatalf("rescued a: %+v", j)
			}
		default:
			if j.State != contract.StateDiscarded || !j.FinishedAt.Equal(now) {
				t.Fatalf("rescued %s: %+v", j.Kind, j)
			}
		}
	}
	// Stale finish after the rescue fails its fence.
	if res := finish(t, s, contract.Outcome{JobID: r[0].ID, WorkerID: "w", ClaimSeq: 1, Attempt: 1, Kind: contract.OutcomeComplete, At: now}); res[0].Applied {
		t.Fatal("finish after rescue applied")
	}

	exp := job("q2", "exp")
	exp.Deadline = t0.Add(time.Second)
	exp.RunAt = t0.Add(time.Second)
	insert(t, s, exp, exp, job("q2", "nodeadline"))
	if n, err := s.DiscardExpired(ctx, t0.Add(time.Second), 10); err != nil || n != 0 {
		t.Fatalf("discarded at the deadline: %d %v", n, err)
	}
	if n, err := s.DiscardExpired(ctx, t0.Add(2*time.Second), 1); err != nil || n != 1 {
		t.Fatalf("discard expired limit: %d %v", n, err)
	}
	if n, _ := s.DiscardExpired(ctx, t0.Add(2*time.Second), 10); n != 1 {
		t.Fatalf("discard expired rest: %d", n)
	}
	list, _ := s.List(ctx, contract.ListParams{Queue: "q2", States: []contract.State{contract.StateDiscarded}})
	if len(list) != 2 || len(list[0].Errors) != 1 || list[0].Errors[0].Attempt != 0 {
		t.Fatalf("discarded %+v", list)
	}
}

func TestAdminAndPrune(t *testing.T) {
	s := openTest(t)
	ctx := context.Background()
	var ps []contract.InsertParams
	for i := 0; i < 10; i++ {
		ps = append(ps, job(fmt.Sprint("q", i%2), fmt.Sprint("k", i%3)))
	}
	res := insert(t, s, ps...)
	js := claim(t, s, "q0", "w", 1, t0)
	running := js[0]
	if err := s.Delete(ctx, running.ID); !errors.Is(err, contract.ErrInvalidState) {
		t.Fatalf("delete running: %v", err)
	}
	if _, err := s.Retry(ctx, running.ID, t0); !errors.Is(err, contract.ErrInvalidState) {
		t.Fatalf("retry running: %v", err)
	}
	c, err := s.Cancel(ctx, running.ID, t0.Add(time.Second))
	if err != nil || c.State != contract.StateCancelled || !c.FinishedAt.Equal(t0.Add(time.Second)) || !c.LeaseUntil.IsZero() {
		t.Fatalf("cancel running: %+v %v", c, err)
	}
	if _, err := s.Cancel(ctx, running.ID, t0); !errors.Is(err, contract.ErrInvalidState) {
		t.Fatalf("cancel final: %v", err)
	}
	if _, err := s.Cancel(ctx, 12345, t0); !errors.Is(err, contract.ErrNotFound) {
		t.Fatalf("cancel missing: %v", err)
	}
	if _, err := s.Retry(ctx, 12345, t0); !errors.Is(err, contract.ErrNotFound) {
		t.Fatalf("retry missing: %v", err)
	}
	if err := s.Delete(ctx, 12345); !errors.Is(err, contract.ErrNotFound) {
		t.Fatalf("delete missing: %v", err)
	}
	r, err := s.Retry(ctx, running.ID, t0.Add(2*time.Second))
	if err != nil || r.State != contract.StateAvailable || !r.FinishedAt.IsZero() || !r.RunAt.Equal(t0.Add(2*time.Second)) || r.MaxAttempts != 3 {
		t.Fatalf("retry: %+v %v", r, err)
	}
	if err := s.Delete(ctx, res[1].Job.ID); err != nil {
		t.Fatal(err)
	}
	// Keyset paging.
	var seen []int64
	after := int64(0)
	for {
		page, err := s.List(ctx, contract.ListParams{Limit: 3, AfterID: after})
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			break
		}
		seen = append(seen, ids(page)...)
		after = page[len(page)-1].ID
	}
	if len(seen) != 9 {
		t.Fatalf("paged %v", seen)
	}
	desc, _ := s.List(ctx, contract.ListParams{Desc: true, Limit: 2, AfterID: seen[5]})
	if !reflect.DeepEqual(ids(desc), []int64{seen[4], seen[3]}) {
		t.Fatalf("desc page %v", ids(desc))
	}
	filtered, _ := s.List(ctx, contract.ListParams{Queue: "q0", Kind: "k0", States: []contract.State{contract.StateAvailable}})
	for _, j := range filtered {
		if j.Queue != "q0" || j.Kind != "k0" || j.State != contract.StateAvailable {
			t.Fatalf("filter returned %+v", j)
		}
	}
	if len(filtered) != 2 {
		t.Fatalf("filtered %d", len(filtered))
	}
	// Prune in batches.
	all, _ := s.List(ctx, contract.ListParams{})
	var outs []contract.Outcome
	cl := claim(t, s, "q0", "w", 100, t0.Add(time.Hour))
	cl = append(cl, claim(t, s, "q1", "w", 100, t0.Add(time.Hour))...)
	for _, j := range cl {
		outs = append(outs, contract.Outcome{JobID: j.ID, WorkerID: "w", ClaimSeq: j.ClaimSeq, Attempt: j.Attempt, Kind: contract.OutcomeComplete, At: t0.Add(time.Duration(j.ID) * time.Second)})
	}
	finish(t, s, outs...)
	if len(cl) != len(all) {
		t.Fatalf("claimed %d of %d", len(cl), len(all))
	}
	total := 0
	for {
		n, err := s.Prune(ctx, contract.StateCompleted, t0.Add(time.Hour), 2)
		if err != nil {
			t.Fatal(err)
		}
		total += n
		if n < 2 {
			break
		}
	}
	if total != len(all) {
		t.Fatalf("pruned %d of %d", total, len(all))
	}
	if _, err := s.Prune(ctx, contract.StateRunning, t0, 10); !errors.Is(err, contract.ErrInvalidState) {
		t.Fatalf("prune running: %v", err)
	}
}

func TestWorkers(t *testing.T) {
	s := openTest(t)
	ctx := context.Background()
	w := contract.WorkerInfo{ID: "b", Host: "h", PID: 7, Queues: []string{"q1", "q2"}, Tags: []string{"t"}, Metadata: map[string]string{"v": "1"}, StartedAt: t0, HeartbeatAt: t0}
	if err := s.RegisterWorker(ctx, w); err != nil {
		t.Fatal(err)
	}
	w.HeartbeatAt = t0.Add(time.Minute)
	w.Queues = []string{"q3"}
	if err := s.RegisterWorker(ctx, w); err != nil {
		t.Fatal(err)
	}
	a := contract.WorkerInfo{ID: "a", Host: "h2", PID: 1, Queues: []string{}, StartedAt: t0, HeartbeatAt: t0}
	if err := s.RegisterWorker(ctx, a); err != nil {
		t.Fatal(err)
	}
	ws, err := s.Workers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(ws, []contract.WorkerInfo{a, w}) {
		t.Fatalf("workers %+v", ws)
	}
	if n, err := s.RemoveDeadWorkers(ctx, t0.Add(time.Second)); err != nil || n != 1 {
		t.Fatalf("remove dead: %d %v", n, err)
	}
	if err := s.DeregisterWorker(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	if err := s.DeregisterWorker(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	if ws, _ := s.Workers(ctx); len(ws) != 0 {
		t.Fatalf("workers left %+v", ws)
	}
}

func TestTransactions(t *testing.T) {
	s := openTest(t)
	ctx := context.Background()
	tx, err := s.DB().BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.InsertTx(ctx, tx, t0, []contract.InsertParams{job("q", "tx")})
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, res[0].Job.ID); !errors.Is(err, contract.ErrNotFound) {
		t.Fatalf("rolled-back insert visible: %v", err)
	}
	xtx, err := sqlx.NewDb(s.DB(), "sqlite").BeginTxx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err = s.InsertTx(ctx, xtx, t0, []contract.InsertParams{job("q", "tx")}); err != nil {
		t.Fatal(err)
	}
	if err := xtx.Commit(); err != nil {
		t.Fatal(err)
	}
	js := claim(t, s, "q", "w", 10, t0)
	if len(js) != 1 {
		t.Fatalf("committed insert: claimed %d", len(js))
	}
	o := contract.Outcome{JobID: js[0].ID, WorkerID: "w", ClaimSeq: js[0].ClaimSeq, Attempt: 1, Kind: contract.OutcomeComplete, At: t0}
	tx, _ = s.DB().BeginTx(ctx, nil)
	if err := s.CompleteTx(ctx, tx, o); err != nil {
		t.Fatal(err)
	}
	tx.Rollback()
	if j, _ := s.Get(ctx, js[0].ID); j.State != contract.StateRunning {
		t.Fatalf("rolled-back completion applied: %s", j.State)
	}
	tx, _ = s.DB().BeginTx(ctx, nil)
	bad := o
	bad.ClaimSeq = 2
	if err := s.CompleteTx(ctx, tx, bad); !errors.Is(err, contract.ErrLeaseLost) {
		t.Fatalf("stale CompleteTx: %v", err)
	}
	if err := s.CompleteTx(ctx, tx, o); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if j, _ := s.Get(ctx, js[0].ID); j.State != contract.StateCompleted {
		t.Fatalf("committed completion: %s", j.State)
	}
	for _, bogus := range []any{nil, "tx", (*sql.Tx)(nil), &sql.DB{}} {
		if _, err := s.InsertTx(ctx, bogus, t0, nil); !errors.Is(err, contract.ErrUnsupported) {
			t.Fatalf("InsertTx(%T): %v", bogus, err)
		}
		if err := s.CompleteTx(ctx, bogus, o); !errors.Is(err, contract.ErrUnsupported) {
			t.Fatalf("CompleteTx(%T): %v", bogus, err)
		}
	}
}

func TestOptionsAndClose(t *testing.T) {
	ctx := context.Background()
	for _, st := range []contract.ClaimStrategy{contract.StrategySkipLocked, contract.StrategyOptimistic} {
		if _, err := Open(ctx, ":memory:", WithStrategy(st)); !errors.Is(err, contract.ErrUnsupported) {
			t.Fatalf("%s: %v; want ErrUnsupported (SQLite claims serialized)", st, err)
		}
	}
	if _, err := Open(ctx, ":memory:", WithPrefix("bad-prefix")); err == nil {
		t.Fatal("bad prefix accepted")
	}
	s, err := Open(ctx, ":memory:", WithPrefix("x_"))
	if err != nil {
		t.Fatal(err)
	}
	// Repeated statements inside write transactions on the one connection
	// of ":memory:" (a statement cache once deadlocked here).
	for i := 0; i < 5; i++ {
		insert(t, s, job("q", "a"))
		claim(t, s, "q", "w", 1, t0)
	}
	var n int
	if err := s.DB().QueryRow("SELECT COUNT(*) FROM x_jobs").Scan(&n); err != nil || n != 5 {
		t.Fatalf("prefixed table: %d %v", n, err)
	}
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, 1); !errors.Is(err, contract.ErrClosed) {
		t.Fatalf("after close: %v", err)
	}
	if _, err := s.Claim(ctx, contract.ClaimParams{Queue: "q", WorkerID: "w", Limit: 1, Now: t0, LeaseUntil: t0}); !errors.Is(err, contract.ErrClosed) {
		t.Fatalf("claim after close: %v", err)
	}
	// Two prefixes side by side in one file, migrated without each other.
	path := filepath.Join(t.TempDir(), "two.db")
	a, err := Open(ctx, path, WithPrefix("a_"))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := Open(ctx, path, WithPrefix("b_"))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	insert(t, a, job("q", "a"))
	if got := claim(t, b, "q", "w", 10, t0); len(got) != 0 {
		t.Fatal("prefixes share jobs")
	}
	// New on a caller-owned handle; Close leaves it open.
	db, err := sql.Open("sqlite", DSN(path, time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	c, err := New(ctx, db, WithPrefix("a_"))
	if err != nil {
		t.Fatal(err)
	}
	if got := claim(t, c, "q", "w", 10, t0); len(got) != 1 {
		t.Fatalf("New store claimed %d", len(got))
	}
	c.Close()
	if err := db.Ping(); err != nil {
		t.Fatalf("Close closed a caller-owned db: %v", err)
	}
}
