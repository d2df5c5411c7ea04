package core_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/store/memory"
)

// FuzzJobValidation: whatever a producer gives (kind, args, queue, times
// as RFC 3339 text, priority, attempts, delay), validation never panics;
// it either refuses with ErrInvalidJob or accepts a job whose times lie in
// [MinTime, MaxTime] and whose args are JSON in UTF-8, and that job, once
// inserted, reads back and encodes as valid JSON.
func FuzzJobValidation(f *testing.F) {
	f.Add("y10k", []byte(`{}`), "default", "9999-12-31T23:59:59-14:00", "", 0, 0, int64(0))
	f.Add("y10k", []byte(`{}`), "", "", "9999-12-31T23:59:59-14:00", 0, 0, int64(0))
	f.Add("edge", []byte(`[1,"ü"]`), "q", "9999-12-31T23:59:59.999999Z", "9999-12-31T23:59:59.999999Z", 10, 1, int64(0))
	f.Add("old", []byte(`{}`), "q", "0000-01-01T00:00:00+01:00", "", 1, 5, int64(0))
	f.Add("bytes", []byte("\"\xff\""), "q", "", "", 5, 3, int64(0))
	f.Add("late", []byte(`null`), "q", "", "", 5, 3, int64(1<<63-1))
	f.Add("early", []byte(`{}`), "q", "", "", 5, 3, int64(-1<<63))
	f.Add("", []byte(`{`), "a b", "tomorrow", "2030-01-01T00:00:00Z", 11, -1, int64(5))
	st := memory.New()
	defer st.Close()
	c, err := core.NewClient(st, core.Config{Logger: quietLogger(), MaintenanceInterval: -1})
	if err != nil {
		f.Fatal(err)
	}
	ctx := context.Background()
	f.Fuzz(func(t *testing.T, kind string, args []byte, queue, runAt, deadline string, priority, maxAttempts int, delay int64) {
		opts := &core.Options{Queue: queue, Priority: priority, MaxAttempts: maxAttempts, Delay: time.Duration(delay)}
		if tm, err := time.Parse(time.RFC3339Nano, runAt); err == nil {
			opts.RunAt = tm
		}
		if tm, err := time.Parse(time.RFC3339Nano, deadline); err == nil {
			opts.Deadline = tm
		}
		p, err := core.NewInsertRaw(kind, args, opts, time.Now())
		if err != nil {
			if !errors.Is(err, core.ErrInvalidJob) {
				t.Fatalf("refused with %v; want ErrInvalidJob", err)
			}
			return
		}
		if !core.InTimeRange(p.RunAt) || (!p.Deadline.IsZero() && !core.InTimeRange(p.Deadline)) {
			t.Fatalf("accepted run_at %s, deadline %s outside the range", p.RunAt, p.Deadline)
		}
		if !json.Valid(p.Args) || !utf8.Valid(p.Args) {
			t.Fatalf("accepted args %q that are not JSON in UTF-8", p.Args)
		}
		res, err := c.EnqueueMany(ctx, []core.InsertParams{p})
		if err != nil {
			t.Fatalf("NewInsertRaw accepted what EnqueueMany refuses: %v", err)
		}
		id := res[0].Job.ID
		j, err := st.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		b, err := json.Marshal(j)
		if err != nil || !json.Valid(b) || !utf8.Valid(b) {
			t.Fatalf("an accepted job does not encode as JSON: %v: %q", err, b)
		}
		if err := st.Delete(ctx, id); err != nil {
			t.Fatal(err)
		}
	})
}
