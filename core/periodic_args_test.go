package core_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/store/memory"
)

// reportArgs are typed args a periodic job builds at each occurrence.
type reportArgs struct {
	Day string `json:"day"`
}

func (reportArgs) Kind() string { return "report" }

// reportHandlers handles the kind "report".
func reportHandlers() *core.Handlers {
	h := core.NewHandlers()
	core.Handle(h, func(context.Context, *core.TypedJob[reportArgs]) error { return nil })
	return h
}

// A periodic job with ArgsFunc takes its kind from the typed args, and
// builds the args of each occurrence from the occurrence's instant (the
// current time for a run now).
func TestPeriodicArgsFuncBuildsEachOccurrence(t *testing.T) {
	ctx := context.Background()
	st := memory.New()
	clock := core.NewManualClock(time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC))
	var calls []time.Time
	c, err := core.NewClient(st, core.Config{
		Logger: quietLogger(), Clock: clock, MaintenanceInterval: -1, Handlers: reportHandlers(),
		Periodic: []core.PeriodicJob{{
			Name: "daily-report", Schedule: "@daily",
			ArgsFunc: func(at time.Time) (core.Args, error) {
				calls = append(calls, at)
				return reportArgs{Day: at.AddDate(0, 0, -1).Format(time.DateOnly)}, nil
			},
			Options: core.Options{Queue: "reports"},
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	// NewClient called it once, with the next occurrence.
	if len(calls) != 1 || !calls[0].Equal(time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)) {
		t.Fatalf("calls at NewClient: %v", calls)
	}
	list, err := c.PeriodicJobs(ctx)
	if err != nil || len(list) != 1 || list[0].Kind != "report" || list[0].Queue != "reports" {
		t.Fatalf("status: %+v %v", list, err)
	}
	for day := range 3 {
		if n, err := c.EnqueuePeriodic(ctx); err != nil || n != 1 {
			t.Fatalf("day %d: enqueued %d, %v", day, n, err)
		}
		clock.Add(24 * time.Hour)
	}
	jobs, err := st.List(ctx, core.ListParams{Kind: "report", Limit: 10})
	if err != nil || len(jobs) != 3 {
		t.Fatalf("%d jobs, %v", len(jobs), err)
	}
	days := map[string]bool{}
	for _, j := range jobs {
		var a reportArgs
		if err := json.Unmarshal(j.Args, &a); err != nil {
			t.Fatal(err)
		}
		at, _ := time.Parse(time.RFC3339, j.Metadata[core.PeriodicMetadataAt])
		if want := at.AddDate(0, 0, -1).Format(time.DateOnly); a.Day != want || j.Queue != "reports" {
			t.Fatalf("job %d: args %s queue %s, want day %s in reports", j.ID, j.Args, j.Queue, want)
		}
		days[a.Day] = true
	}
	if len(days) != 3 {
		t.Fatalf("days %v", days)
	}
	r, err := c.RunPeriodicNow(ctx, "daily-report")
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"day":"` + clock.Now().AddDate(0, 0, -1).Format(time.DateOnly) + `"}`; string(r.Job.Args) != want || r.Job.Kind != "report" {
		t.Fatalf("run now: %s %s, want %s", r.Job.Kind, r.Job.Args, want)
	}
}

// NewClient refuses an ArgsFunc with Args, one that fails or returns
// nil, args of a kind other than Kind, and (on a client with handlers) a
// kind it has no handler for, as it refuses such a Kind.
func TestPeriodicArgsFuncConfigErrors(t *testing.T) {
	st := memory.New()
	report := func(time.Time) (core.Args, error) { return reportArgs{}, nil }
	boom := errors.New("boom")
	for _, tc := range []struct {
		name string
		pj   core.PeriodicJob
		h    *core.Handlers
		is   error
		msg  string
	}{
		{"args too", core.PeriodicJob{Name: "x", Schedule: "@daily", ArgsFunc: report, Args: json.RawMessage(`{}`)}, nil, nil, "Args and ArgsFunc are both set"},
		{"kind differs", core.PeriodicJob{Name: "x", Schedule: "@daily", Kind: "other", ArgsFunc: report}, nil, core.ErrInvalidJob, `ArgsFunc built args of kind "report"`},
		{"fails", core.PeriodicJob{Name: "x", Schedule: "@daily", ArgsFunc: func(time.Time) (core.Args, error) { return nil, boom }}, nil, boom, "ArgsFunc for"},
		{"nil args", core.PeriodicJob{Name: "x", Schedule: "@daily", ArgsFunc: func(time.Time) (core.Args, error) { return nil, nil }}, nil, core.ErrInvalidJob, "nil args"},
		{"no handler", core.PeriodicJob{Name: "x", Schedule: "@daily", ArgsFunc: func(time.Time) (core.Args, error) { return otherArgs{}, nil }}, reportHandlers(), core.ErrUnknownKind, `"other"`},
	} {
		_, err := core.NewClient(st, core.Config{Logger: quietLogger(), Handlers: tc.h, Periodic: []core.PeriodicJob{tc.pj}})
		if err == nil || (tc.is != nil && !errors.Is(err, tc.is)) || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
	// The same kind given and built, and a handled kind, are fine.
	if _, err := core.NewClient(st, core.Config{Logger: quietLogger(), Handlers: reportHandlers(), Periodic: []core.PeriodicJob{
		{Name: "x", Schedule: "@daily", Kind: "report", ArgsFunc: report},
	}}); err != nil {
		t.Fatal(err)
	}
}

// An occurrence whose ArgsFunc fails, or builds args of another kind, is
// not enqueued: the round says why, and the next round enqueues it.
func TestPeriodicArgsFuncFailedOccurrenceIsRetried(t *testing.T) {
	ctx := context.Background()
	st := memory.New()
	clock := core.NewManualClock(time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC))
	var fail error
	var wrongKind bool
	c, err := core.NewClient(st, core.Config{
		Logger: quietLogger(), Clock: clock, MaintenanceInterval: -1,
		Periodic: []core.PeriodicJob{{
			Name: "m", Schedule: "* * * * *",
			ArgsFunc: func(at time.Time) (core.Args, error) {
				if wrongKind {
					return otherArgs{}, nil
				}
				return reportArgs{Day: at.Format(time.RFC3339)}, fail
			},
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	fail = errors.New("not ready")
	if n, err := c.EnqueuePeriodic(ctx); n != 0 || !errors.Is(err, fail) || !strings.Contains(err.Error(), `periodic job "m"`) {
		t.Fatalf("failing ArgsFunc: enqueued %d, %v", n, err)
	}
	fail, wrongKind = nil, true
	if n, err := c.EnqueuePeriodic(ctx); n != 0 || !errors.Is(err, core.ErrInvalidJob) {
		t.Fatalf("ArgsFunc of another kind: enqueued %d, %v", n, err)
	}
	wrongKind = false
	clock.Add(10 * time.Second)
	if n, err := c.EnqueuePeriodic(ctx); n != 1 || err != nil {
		t.Fatalf("next round: enqueued %d, %v", n, err)
	}
	jobs, err := st.List(ctx, core.ListParams{Kind: "report", Limit: 10})
	if err != nil || len(jobs) != 1 || string(jobs[0].Args) != `{"day":"2026-03-01T10:00:00Z"}` {
		t.Fatalf("jobs %+v, %v", jobs, err)
	}
}
