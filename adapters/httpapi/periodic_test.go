package httpapi

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/core/contract"
	"github.com/backlogq/backlog/internal/teststores"
)

// periodicConfig lists two schedules: "hourly" on queue "reports" that
// skips missed occurrences, and "nightly" with the defaults.
func periodicConfig(clock core.Clock) core.Config {
	return core.Config{
		Clock: clock,
		Periodic: []core.PeriodicJob{
			{Name: "nightly", Schedule: "0 3 * * *", Kind: "cleanup", Args: []byte(`{"days":30}`)},
			{Name: "hourly", Schedule: "@every 1h", Kind: "report", Options: core.Options{Queue: "reports"}, Missed: core.MissedSkip},
		},
	}
}

// TestPeriodicList: GET /v1/periodic lists the server's schedules in name
// order with their settings, next run (UTC) and, once an occurrence was
// enqueued, its time and job.
func TestPeriodicList(t *testing.T) {
	teststores.Run(t, func(t *testing.T, st contract.Store) {
		clock := &fakeClock{t: time.Date(2026, 3, 1, 10, 30, 0, 0, time.UTC)}
		h := newHarness(t, st, periodicConfig(clock), Config{})
		var out PeriodicList
		h.must(http.StatusOK, "GET", "/v1/periodic", nil, &out)
		if len(out.Periodic) != 2 || out.Periodic[0].Name != "hourly" || out.Periodic[1].Name != "nightly" {
			t.Fatalf("GET /v1/periodic = %+v, want hourly then nightly", out.Periodic)
		}
		hr, ni := out.Periodic[0], out.Periodic[1]
		if hr.Schedule != "@every 1h" || hr.Kind != "report" || hr.Queue != "reports" || hr.Missed != core.MissedSkip || hr.Paused {
			t.Errorf("hourly = %+v", hr)
		}
		if !hr.NextRunAt.Equal(time.Date(2026, 3, 1, 11, 0, 0, 0, time.UTC)) || !hr.LastRunAt.IsZero() || hr.LastJobID != 0 {
			t.Errorf("hourly next %v last %v job %d, want next 11:00 and no last run", hr.NextRunAt, hr.LastRunAt, hr.LastJobID)
		}
		if ni.Queue != core.DefaultQueue || ni.Missed != core.MissedRunOnce || !ni.NextRunAt.Equal(time.Date(2026, 3, 2, 3, 0, 0, 0, time.UTC)) {
			t.Errorf("nightly = %+v", ni)
		}
		// Times are written in UTC; an unknown last run is left out.
		raw := string(h.do("GET", "/v1/periodic", nil).body)
		if !strings.Contains(raw, `"next_run_at":"2026-03-01T11:00:00Z"`) || strings.Contains(raw, "last_run_at") {
			t.Errorf("GET /v1/periodic body %s", raw)
		}

		// An occurrence comes due and is enqueued: the list shows it.
		clock.Advance(30 * time.Minute)
		if n, err := h.c.EnqueuePeriodic(context.Background()); err != nil || n != 1 {
			t.Fatalf("EnqueuePeriodic = %d, %v; want 1 job", n, err)
		}
		h.must(http.StatusOK, "GET", "/v1/periodic", nil, &out)
		hr = out.Periodic[0]
		if !hr.LastRunAt.Equal(time.Date(2026, 3, 1, 11, 0, 0, 0, time.UTC)) || hr.LastJobID == 0 {
			t.Fatalf("hourly after its run = %+v", hr)
		}
		var job JobResponse
		h.must(http.StatusOK, "GET", "/v1/jobs/"+itoa(hr.LastJobID), nil, &job)
		if job.Job.Kind != "report" || job.Job.Queue != "reports" || job.Job.Metadata[core.PeriodicMetadataName] != "hourly" {
			t.Errorf("last job %+v", job.Job)
		}
	})
}

// TestPeriodicListEmpty: a server without periodic jobs lists none, as an
// empty array.
func TestPeriodicListEmpty(t *testing.T) {
	h := newHarness(t, teststores.Memory(t), core.Config{}, Config{})
	if r := h.must(http.StatusOK, "GET", "/v1/periodic", nil, nil); strings.TrimSpace(string(r.body)) != `{"periodic":[]}` {
		t.Fatalf("GET /v1/periodic = %s", r.body)
	}
}

// TestPeriodicPauseResume: pause and resume answer the schedule's status
// after the change, are idempotent, and stop and restart its occurrences.
func TestPeriodicPauseResume(t *testing.T) {
	teststores.Run(t, func(t *testing.T, st contract.Store) {
		clock := &fakeClock{t: time.Date(2026, 3, 1, 10, 30, 0, 0, time.UTC)}
		h := newHarness(t, st, periodicConfig(clock), Config{})
		var out PeriodicResponse
		for range 2 {
			h.must(http.StatusOK, "POST", "/v1/periodic/hourly/pause", nil, &out)
			if out.PeriodicJob.Name != "hourly" || !out.PeriodicJob.Paused || !out.PeriodicJob.NextRunAt.IsZero() {
				t.Fatalf("pause answered %+v", out.PeriodicJob)
			}
		}
		var list PeriodicList
		h.must(http.StatusOK, "GET", "/v1/periodic", nil, &list)
		if !list.Periodic[0].Paused || list.Periodic[1].Paused {
			t.Fatalf("after pausing hourly: %+v", list.Periodic)
		}
		clock.Advance(30 * time.Minute)
		if n, err := h.c.EnqueuePeriodic(context.Background()); err != nil || n != 0 {
			t.Fatalf("EnqueuePeriodic while paused = %d, %v; want nothing", n, err)
		}
		for range 2 {
			h.must(http.StatusOK, "POST", "/v1/periodic/hourly/resume", nil, &out)
			if out.PeriodicJob.Paused || !out.PeriodicJob.NextRunAt.Equal(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)) {
				t.Fatalf("resume answered %+v", out.PeriodicJob)
			}
		}
		clock.Advance(time.Hour)
		if n, err := h.c.EnqueuePeriodic(context.Background()); err != nil || n != 1 {
			t.Fatalf("EnqueuePeriodic after resume = %d, %v; want 1", n, err)
		}
	})
}

// TestPeriodicRunNow: run enqueues one job of the schedule per call, due
// now, answered as a submission is (201, the job, not a duplicate).
func TestPeriodicRunNow(t *testing.T) {
	teststores.Run(t, func(t *testing.T, st contract.Store) {
		h := newHarness(t, st, periodicConfig(nil), Config{})
		seen := map[int64]bool{}
		for range 2 {
			var out SubmitResponse
			h.must(http.StatusCreated, "POST", "/v1/periodic/nightly/run", nil, &out)
			j := out.Job
			if j == nil || out.Duplicate || j.Kind != "cleanup" || j.Queue != core.DefaultQueue || j.State != core.StateAvailable ||
				string(j.Args) != `{"days":30}` || j.Metadata[core.PeriodicMetadataName] != "nightly" || j.UniqueKey != "" {
				t.Fatalf("run answered %+v", out)
			}
			seen[j.ID] = true
		}
		if len(seen) != 2 {
			t.Fatalf("two runs made %d jobs", len(seen))
		}
		// A paused schedule still runs on demand.
		h.must(http.StatusOK, "POST", "/v1/periodic/nightly/pause", nil, nil)
		h.must(http.StatusCreated, "POST", "/v1/periodic/nightly/run", nil, nil)
	})
}

// TestPeriodicNotFound: every periodic route answers 404
// periodic-not-found for a name the server does not list, and changes
// nothing.
func TestPeriodicNotFound(t *testing.T) {
	h := newHarness(t, teststores.Memory(t), periodicConfig(nil), Config{})
	for _, path := range []string{
		"/v1/periodic/weekly/pause", "/v1/periodic/weekly/resume", "/v1/periodic/weekly/run",
		"/v1/periodic/HOURLY/pause", "/v1/periodic/hourly%2Fx/run",
	} {
		before := h.state()
		p := wantProblem(t, h.do("POST", path, nil), SlugPeriodicNotFound)
		if !strings.Contains(p.Detail, "no periodic job is named") {
			t.Errorf("%s: detail %q", path, p.Detail)
		}
		if h.state() != before {
			t.Errorf("%s changed the store", path)
		}
	}
	// A name with an escaped slash reaches the handler whole.
	p := wantProblem(t, h.do("POST", "/v1/periodic/a%2Fb/pause", nil), SlugPeriodicNotFound)
	if !strings.Contains(p.Detail, `"a/b"`) {
		t.Errorf("detail %q does not name a/b", p.Detail)
	}
	wantProblem(t, h.do("GET", "/v1/periodic/hourly/pause", nil), SlugMethodNotAllowed)
}

// TestPeriodicWithoutSettings: on a store that keeps no settings the list
// still answers (without stored state) and pause says why it cannot, with
// 501 not-supported, not a server error.
func TestPeriodicWithoutSettings(t *testing.T) {
	h := newHarness(t, noSettings{teststores.Memory(t)}, periodicConfig(nil), Config{})
	var list PeriodicList
	h.must(http.StatusOK, "GET", "/v1/periodic", nil, &list)
	if len(list.Periodic) != 2 {
		t.Fatalf("list %+v", list.Periodic)
	}
	p := wantProblem(t, h.do("POST", "/v1/periodic/hourly/pause", nil), SlugNotSupported)
	if !strings.Contains(p.Detail, "settings") {
		t.Errorf("detail %q does not say the store keeps no settings", p.Detail)
	}
	h.must(http.StatusCreated, "POST", "/v1/periodic/hourly/run", nil, nil)
}
