package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/store/memory"
)

// FuzzEnqueueJSONL: any JSON Lines input to enqueue --from (with or
// without a KIND) never panics; a refusal names the input and a line;
// exactly the jobs counted as inserted are stored, and each has its times
// within core's range and encodes as valid JSON.
func FuzzEnqueueJSONL(f *testing.F) {
	for _, s := range []struct{ in, kind string }{
		{"{\"kind\":\"ok\"}\n{\"kind\":\"y10k\",\"run_at\":\"9999-12-31T23:59:59-14:00\"}\n", ""},
		{`{"kind":"y10k","deadline":"9999-12-31T23:59:59-14:00"}`, ""},
		{`{"kind":"edge","run_at":"9999-12-31T23:59:59.999999Z","deadline":"9999-12-31T23:59:59.999999Z"}`, ""},
		{"{\"a\":1}\n\n[1,2]\r\n\"s\"", "kind"},
		{"{\"kind\":\"x\",\"args\":\"\xc3\"}\n", ""},
		{`{"kind":"a","unique_key":"u"}` + "\n" + `{"kind":"b","unique_key":"u"}`, ""},
		{`{"kind":"a","queue":"q","priority":3,"max_attempts":2,"tags":["t"],"metadata":{"k":"v"}}`, ""},
		{"not json\n", ""},
	} {
		f.Add([]byte(s.in), s.kind)
	}
	ctx := context.Background()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	f.Fuzz(func(t *testing.T, data []byte, kind string) {
		st := memory.New()
		defer st.Close()
		cl, err := core.NewClient(st, core.Config{Logger: log, MaintenanceInterval: -1})
		if err != nil {
			t.Fatal(err)
		}
		stats, err := bulkInsert(ctx, storeOps{cl}, bytes.NewReader(data), "in.jsonl", kind, &core.Options{}, 2, nil)
		if err != nil && !strings.HasPrefix(err.Error(), "in.jsonl") {
			t.Fatalf("error %q does not name the input", err)
		}
		jobs, lerr := st.List(ctx, core.ListParams{Limit: 1000})
		if lerr != nil {
			t.Fatal(lerr)
		}
		if len(jobs) != stats.Inserted {
			t.Fatalf("%d jobs stored; the run counted %d inserted (err %v)", len(jobs), stats.Inserted, err)
		}
		for _, j := range jobs {
			if !core.InTimeRange(j.RunAt) || (!j.Deadline.IsZero() && !core.InTimeRange(j.Deadline)) {
				t.Fatalf("stored run_at %s, deadline %s", j.RunAt, j.Deadline)
			}
			b, err := json.Marshal(j)
			if err != nil || !json.Valid(b) || !utf8.Valid(b) {
				t.Fatalf("stored job does not encode as JSON: %v: %q", err, b)
			}
		}
	})
}
