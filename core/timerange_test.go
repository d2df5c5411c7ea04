package core_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/backlogq/backlog/core"
)

// y10k is 9999-12-31T23:59:59-14:00: a four-digit year whose UTC instant
// is in year 10000, which encoding/json cannot write.
var y10k = time.Date(9999, 12, 31, 23, 59, 59, 0, time.FixedZone("-14:00", -14*3600))

func TestTimeRangeBoundsEncodeAsJSON(t *testing.T) {
	for _, tm := range []time.Time{core.MinTime, core.MaxTime} {
		if _, err := json.Marshal(tm); err != nil {
			t.Fatalf("%s does not encode as JSON: %v", tm, err)
		}
		if !core.InTimeRange(tm) || core.ValidateTime("t", tm) != nil {
			t.Fatalf("%s is not in its own range", tm)
		}
	}
	if _, err := json.Marshal(y10k.UTC()); err == nil {
		t.Fatal("year 10000 encodes as JSON; the range's reason is gone")
	}
	for _, tc := range []struct {
		in, want time.Time
	}{
		{y10k, core.MaxTime},
		{core.MaxTime.Add(time.Microsecond), core.MaxTime},
		{core.MinTime.Add(-time.Microsecond), core.MinTime},
		{time.Date(1, 1, 1, 0, 0, 0, 1, time.UTC), core.MinTime},
		{time.Date(2030, 1, 2, 3, 4, 5, 6789, time.UTC), time.Date(2030, 1, 2, 3, 4, 5, 6000, time.UTC)},
		{time.Time{}, time.Time{}},
	} {
		if got := core.ClampTime(tc.in); !got.Equal(tc.want) {
			t.Errorf("ClampTime(%s) = %s; want %s", tc.in, got, tc.want)
		}
	}
	// A nanosecond past MaxTime truncates to MaxTime: in range.
	if err := core.ValidateTime("run_at", core.MaxTime.Add(999)); err != nil {
		t.Fatalf("MaxTime + 999ns: %v", err)
	}
	if err := core.ValidateTime("run_at", time.Time{}); err != nil {
		t.Fatalf("the zero time (unset): %v", err)
	}
	err := core.ValidateTime("deadline", y10k)
	if !errors.Is(err, core.ErrInvalidJob) || !strings.Contains(err.Error(), "deadline 9999-12-31T23:59:59-14:00 (10000-01-01T13:59:59Z) is outside") {
		t.Fatalf("ValidateTime(deadline, y10k) = %v", err)
	}
}

// TestEnqueueRejectsTimesOutOfRange: a job time outside MinTime..MaxTime
// (in UTC) is ErrInvalidJob, whatever way the time was given.
func TestEnqueueRejectsTimesOutOfRange(t *testing.T) {
	c, st := newClient(t, nil, func(c *core.Config) { c.Queues = nil })
	ctx := context.Background()
	now := time.Now()
	cases := []struct {
		name string
		opts core.Options
		want string
	}{
		{"run_at in year 10000", core.Options{RunAt: y10k}, "run_at 10000-01-01T13:59:59Z is outside"},
		{"run_at past MaxTime", core.Options{RunAt: core.MaxTime.Add(time.Microsecond)}, "run_at 10000-01-01T00:00:00Z is outside"},
		{"run_at before MinTime", core.Options{RunAt: core.MinTime.Add(-time.Second)}, "run_at 1969-12-31T23:59:59Z is outside"},
		{"run_at in year 1", core.Options{RunAt: time.Date(1, 1, 1, 0, 0, 0, 1000, time.UTC)}, "run_at 0001-01-01"},
		{"deadline in year 10000", core.Options{Deadline: y10k}, "deadline 10000-01-01T13:59:59Z is outside"},
		{"delay back before MinTime", core.Options{Delay: -time.Duration(1<<63 - 1)}, "run_at "},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.EnqueueRaw(ctx, "k", nil, &tc.opts)
			if !errors.Is(err, core.ErrInvalidJob) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "outside the supported range") {
				t.Fatalf("want ErrInvalidJob mentioning %q, got %v", tc.want, err)
			}
			if _, err := core.NewInsertRaw("k", nil, &tc.opts, now); !errors.Is(err, core.ErrInvalidJob) {
				t.Fatalf("NewInsertRaw: want ErrInvalidJob, got %v", err)
			}
			if tc.opts.Delay != 0 {
				return
			}
			if _, err := c.EnqueueMany(ctx, []core.InsertParams{{Kind: "k", RunAt: tc.opts.RunAt, Deadline: tc.opts.Deadline}}); !errors.Is(err, core.ErrInvalidJob) {
				t.Fatalf("EnqueueMany: want ErrInvalidJob, got %v", err)
			}
		})
	}
	// The bounds themselves are accepted and read back as given.
	r, err := c.EnqueueRaw(ctx, "k", nil, &core.Options{RunAt: core.MaxTime, Deadline: core.MaxTime})
	if err != nil {
		t.Fatal(err)
	}
	j, err := st.Get(ctx, r.Job.ID)
	if err != nil || !j.RunAt.Equal(core.MaxTime) || !j.Deadline.Equal(core.MaxTime) {
		t.Fatalf("MaxTime round trip: %+v, %v", j, err)
	}
	if _, err := json.Marshal(j); err != nil {
		t.Fatalf("a job at MaxTime does not encode: %v", err)
	}
	if _, err := c.EnqueueRaw(ctx, "k", nil, &core.Options{RunAt: core.MinTime}); err != nil {
		t.Fatalf("MinTime: %v", err)
	}
	list, _ := st.List(ctx, core.ListParams{})
	if len(list) != 2 {
		t.Fatalf("%d jobs stored; want the 2 within range", len(list))
	}
}

// TestEnqueueRejectsInvalidUTF8Args: JSON text must be UTF-8; json.Valid
// alone lets invalid bytes inside strings through.
func TestEnqueueRejectsInvalidUTF8Args(t *testing.T) {
	c, st := newClient(t, nil, func(c *core.Config) { c.Queues = nil })
	ctx := context.Background()
	bad := []byte("{\"s\":\"\xff\xfe\"}")
	if !json.Valid(bad) {
		t.Fatal("the test's args must be valid JSON apart from their encoding")
	}
	if _, err := c.EnqueueRaw(ctx, "k", bad, nil); !errors.Is(err, core.ErrInvalidJob) || !strings.Contains(err.Error(), "UTF-8") {
		t.Fatalf("want ErrInvalidJob about UTF-8, got %v", err)
	}
	if _, err := core.NewInsertRaw("k", bad, nil, time.Now()); !errors.Is(err, core.ErrInvalidJob) {
		t.Fatalf("NewInsertRaw: want ErrInvalidJob, got %v", err)
	}
	if list, _ := st.List(ctx, core.ListParams{}); len(list) != 0 {
		t.Fatalf("%d jobs stored", len(list))
	}
}

// TestContinueOutOfRangeFailsTheAttempt: a continuation due outside the
// time range, or with args that are not UTF-8, is not applied: the
// attempt fails with a message that says why.
func TestContinueOutOfRangeFailsTheAttempt(t *testing.T) {
	h := core.NewHandlers()
	h.HandleRaw("far", func(ctx context.Context, j *core.Job) error {
		return core.Continue("next", []byte(`{}`), y10k)
	})
	h.HandleRaw("bytes", func(ctx context.Context, j *core.Job) error {
		return core.Continue("next", []byte("\"\xff\""), time.Time{})
	})
	h.HandleRaw("next", func(ctx context.Context, j *core.Job) error { return nil })
	c, st := newClient(t, h, func(c *core.Config) { c.PollInterval = 10 * time.Millisecond })
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for kind, want := range map[string]string{"far": "run_at 9999-12-31T23:59:59-14:00", "bytes": "not valid UTF-8"} {
		r, err := c.EnqueueRaw(ctx, kind, nil, &core.Options{MaxAttempts: 1})
		if err != nil {
			t.Fatal(err)
		}
		j := waitState(t, st, r.Job.ID, core.StateDiscarded)
		if j.Kind != kind || len(j.Errors) != 1 || !strings.Contains(j.Errors[0].Error, "invalid continuation") || !strings.Contains(j.Errors[0].Error, want) {
			t.Fatalf("%s: kind %s, errors %+v; want the attempt failed naming %q", kind, j.Kind, j.Errors, want)
		}
		if _, err := json.Marshal(j); err != nil {
			t.Fatalf("%s: the job does not encode: %v", kind, err)
		}
	}
}
