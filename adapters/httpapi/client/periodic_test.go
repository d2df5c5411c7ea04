package client_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/backlogq/backlog/adapters/httpapi/client"
	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/internal/teststores"
)

// TestPeriodicJobs: the periodic job calls against a server over SQLite
// with two schedules: list, pause, resume, run now, the roles they need
// and the sentinel of an unknown name.
func TestPeriodicJobs(t *testing.T) {
	t.Parallel()
	s := startServer(t, teststores.SQLite(t), core.Config{Periodic: []core.PeriodicJob{
		{Name: "nightly report", Schedule: "0 3 * * *", Kind: "report", Options: core.Options{Queue: "reports"}},
		{Name: "cleanup", Schedule: "@every 10m", Kind: "cleanup", Missed: core.MissedSkip},
	}}, false)
	ctx := context.Background()

	list, err := s.producer.PeriodicJobs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || list[0].Name != "cleanup" || list[1].Name != "nightly report" {
		t.Fatalf("PeriodicJobs = %+v", list)
	}
	if c := list[0]; c.Schedule != "@every 10m" || c.Kind != "cleanup" || c.Queue != core.DefaultQueue || c.Missed != core.MissedSkip ||
		c.Paused || c.NextRunAt.IsZero() || c.NextRunAt.Location() != time.UTC {
		t.Errorf("cleanup = %+v", c)
	}

	// A name with a space is escaped into the path and back.
	st, err := s.admin.PausePeriodic(ctx, "nightly report")
	if err != nil {
		t.Fatal(err)
	}
	if st.Name != "nightly report" || !st.Paused || !st.NextRunAt.IsZero() || st.Queue != "reports" {
		t.Fatalf("PausePeriodic = %+v", st)
	}
	if list, err = s.producer.PeriodicJobs(ctx); err != nil || !list[1].Paused || list[0].Paused {
		t.Fatalf("after pause: %+v, %v", list, err)
	}
	if st, err = s.admin.ResumePeriodic(ctx, "nightly report"); err != nil || st.Paused || st.NextRunAt.IsZero() {
		t.Fatalf("ResumePeriodic = %+v, %v", st, err)
	}

	res, err := s.admin.RunPeriodicNow(ctx, "nightly report")
	if err != nil {
		t.Fatal(err)
	}
	if res.Duplicate || res.Job == nil || res.Job.Kind != "report" || res.Job.Queue != "reports" ||
		res.Job.Metadata[core.PeriodicMetadataName] != "nightly report" {
		t.Fatalf("RunPeriodicNow = %+v", res)
	}
	if got := s.job(res.Job.ID); got.State != core.StateAvailable {
		t.Errorf("the job run now is %s", got.State)
	}

	// Unknown names match core.ErrUnknownPeriodic.
	_, err = s.admin.PausePeriodic(ctx, "weekly")
	var p *client.Problem
	if !errors.Is(err, core.ErrUnknownPeriodic) || !errors.As(err, &p) || p.Status != 404 || p.Slug() != "periodic-not-found" {
		t.Fatalf("pause of an unknown name: %v", err)
	}
	if _, err := s.admin.ResumePeriodic(ctx, "weekly"); !errors.Is(err, core.ErrUnknownPeriodic) {
		t.Fatalf("resume of an unknown name: %v", err)
	}
	if _, err := s.admin.RunPeriodicNow(ctx, "weekly"); !errors.Is(err, core.ErrUnknownPeriodic) || errors.Is(err, core.ErrNotFound) {
		t.Fatalf("run of an unknown name: %v", err)
	}

	// Pause, resume and run are the admin's; listing is the producer's too.
	if _, err := s.producer.PausePeriodic(ctx, "cleanup"); !errors.Is(err, client.ErrForbidden) {
		t.Fatalf("producer pause: %v", err)
	}
	if _, err := s.producer.RunPeriodicNow(ctx, "cleanup"); !errors.Is(err, client.ErrForbidden) {
		t.Fatalf("producer run: %v", err)
	}
	if _, err := s.worker.PeriodicJobs(ctx); !errors.Is(err, client.ErrForbidden) {
		t.Fatalf("worker list: %v", err)
	}
}
