package cli

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/backlogq/backlog/adapters/httpapi/client"
	"github.com/backlogq/backlog/core"
)

// TestServeRetryByKindForRemoteWorkers: serve started with a config file
// whose retry_by_kind has a policy for kind "resize" schedules the retry
// of a remote worker's failure of that kind by that policy, and of any
// other kind by the file's default retry; the failures keep the cause the
// worker reported (a panic is a panic, in the job and in /metrics).
func TestServeRetryByKindForRemoteWorkers(t *testing.T) {
	db := tempDB(t)
	cfg := writeFile(t, t.TempDir(), "serve.json", `{
	  "retry": ["1h"],
	  "retry_by_kind": {"resize": ["7s", "1m"]}
	}`)
	_, base := startServe(t, db, nil, "--config", cfg, "--allow-unknown-kinds")

	var ids = map[string]int64{}
	for _, kind := range []string{"resize", "other"} {
		code, body := call(t, "POST", base+"/v1/jobs", "", `{"kind":"`+kind+`","max_attempts":5}`)
		if code != http.StatusCreated {
			t.Fatalf("submit %s: %d %s", kind, code, body)
		}
		var sub struct{ Job struct{ ID int64 } }
		if err := json.Unmarshal([]byte(body), &sub); err != nil || sub.Job.ID == 0 {
			t.Fatalf("submit answer %s: %v", body, err)
		}
		ids[kind] = sub.Job.ID
	}

	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	wc, err := client.New(base, client.WithLogger(log))
	if err != nil {
		t.Fatal(err)
	}
	w, err := client.NewWorker(wc, client.WorkerConfig{Queues: []string{"default"}, WaitSeconds: 1, Logger: log,
		Handler: func(_ context.Context, j *client.Job) (json.RawMessage, error) {
			if j.Kind == "resize" {
				panic("image too large")
			}
			return nil, errors.New("boom")
		}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Error("the remote worker did not stop")
		}
	})

	st := openStore(t, db)
	get := func(id int64) *core.Job {
		j, err := st.Get(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		return j
	}
	for kind, id := range ids {
		waitFor(t, 20*time.Second, kind+" to fail once", func() bool { return get(id).State == core.StateRetryable })
	}
	cancel()

	for kind, want := range map[string]struct {
		wait  time.Duration
		cause string
	}{
		"resize": {7 * time.Second, core.CausePanic},
		"other":  {time.Hour, core.CauseHandlerError},
	} {
		j := get(ids[kind])
		if len(j.Errors) != 1 {
			t.Fatalf("%s: errors %+v", kind, j.Errors)
		}
		e := j.Errors[0]
		if wait := j.RunAt.Sub(e.At); wait != want.wait {
			t.Errorf("%s: due %s after its failure, want %s", kind, wait, want.wait)
		}
		if e.Cause != want.cause {
			t.Errorf("%s: cause %q, want %q", kind, e.Cause, want.cause)
		}
	}
	if e := get(ids["resize"]).Errors[0]; !strings.Contains(e.Error, "image too large") || !strings.Contains(e.Trace, "goroutine") {
		t.Errorf("resize: error entry %+v", e)
	}

	code, body := call(t, "GET", base+"/metrics", "", "")
	for _, want := range []string{
		`backlog_jobs_failed_total{cause="panic",kind="resize",queue="default"} 1`,
		`backlog_jobs_failed_total{cause="handler_error",kind="other",queue="default"} 1`,
	} {
		if code != http.StatusOK || !strings.Contains(body, want) {
			t.Errorf("/metrics (%d) lacks %q", code, want)
		}
	}
}

// TestServeKindMaxAttempts: a kind's attempts in retry_by_kind
// ({"retries": [...]}: N delays, N retries; or max_attempts beside a
// policy) are what its jobs submitted to serve's HTTP API get when they
// name none; a job's own max_attempts wins and other kinds keep the
// default.
func TestServeKindMaxAttempts(t *testing.T) {
	db := tempDB(t)
	cfg := writeFile(t, t.TempDir(), "serve.json", `{
	  "retry_by_kind": {"exact": {"retries": ["1s", "2s"]}, "capped": {"base": "1s", "max_attempts": 4}}
	}`)
	_, base := startServe(t, db, nil, "--config", cfg, "--allow-unknown-kinds")
	for _, c := range []struct {
		body string
		want int
	}{
		{`{"kind":"exact"}`, 3},
		{`{"kind":"capped"}`, 4},
		{`{"kind":"exact","max_attempts":9}`, 9},
		{`{"kind":"other"}`, core.DefaultMaxAttempts},
	} {
		code, body := call(t, "POST", base+"/v1/jobs", "", c.body)
		if code != http.StatusCreated {
			t.Fatalf("submit %s: %d %s", c.body, code, body)
		}
		var sub struct {
			Job struct {
				MaxAttempts int `json:"max_attempts"`
			}
		}
		if err := json.Unmarshal([]byte(body), &sub); err != nil || sub.Job.MaxAttempts != c.want {
			t.Errorf("submit %s: max_attempts %d (%v), want %d", c.body, sub.Job.MaxAttempts, err, c.want)
		}
	}
	// backlog kinds shows the same defaults, read from the server.
	r := cliServer(t, base, "", "kinds")
	for _, want := range []string{
		"capped       no         4             exponential 1s..24h0m0s ±25%",
		"exact        no         3             delays 1s, 2s (last repeats)",
		"(any other)  -          20            exponential 1s..24h0m0s ±25%",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("kinds lacks %q:\n%s", want, r.stdout)
		}
	}
	r = cliServer(t, base, "", "-o", "json", "kinds")
	var list struct {
		Kinds []core.KindPolicy `json:"kinds"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &list); err != nil || len(list.Kinds) != 2 || list.Kinds[1].Kind != "exact" || list.Kinds[1].MaxAttempts != 3 {
		t.Errorf("kinds -o json: %v %s", err, r.stdout)
	}
	if r := cliIn(t, "", "", "--db", db, "kinds"); r.code != 2 || !strings.Contains(r.stderr, "--server") {
		t.Errorf("kinds without --server: exit %d, stderr %q; want 2 and a hint to give --server", r.code, r.stderr)
	}
}
