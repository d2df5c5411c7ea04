package client_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/backlogq/backlog/adapters/httpapi/client"
	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/internal/syncbuf"
	"github.com/backlogq/backlog/internal/teststores"
)

// TestWorkerReadsBackAnOutcomeWhoseAnswerWasLost: the server commits a
// worker's outcome and its answer is lost (the server or the connection
// died before answering); the retry is refused as lease-lost. The worker
// reads the job back and says the outcome applied, instead of warning
// that it did not (or guessing that it most likely did).
func TestWorkerReadsBackAnOutcomeWhoseAnswerWasLost(t *testing.T) {
	t.Parallel()
	s := startServer(t, teststores.Memory(t), core.Config{}, false)
	ctx := context.Background()
	u, _ := url.Parse(s.URL)
	rp := httputil.NewSingleHostReverseProxy(u)
	var lost atomic.Int32
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		isOutcome := strings.HasSuffix(r.URL.Path, "/outcomes") || strings.HasSuffix(r.URL.Path, "/complete")
		if isOutcome && lost.Add(1) == 1 {
			rp.ServeHTTP(httptest.NewRecorder(), r) // applied, answer lost
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		rp.ServeHTTP(w, r)
	}))
	defer proxy.Close()
	c, err := client.New(proxy.URL, client.WithToken(workerToken), client.WithLogger(quiet()),
		client.WithRetry(client.RetryPolicy{BaseDelay: time.Millisecond}))
	if err != nil {
		t.Fatal(err)
	}
	r, _ := s.producer.Submit(ctx, client.SubmitRequest{Kind: "k"})
	var logs syncbuf.Buffer
	w, err := client.NewWorker(c, client.WorkerConfig{Queues: []string{"default"}, WaitSeconds: 1,
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo})),
		Handler: func(ctx context.Context, j *client.Job) (json.RawMessage, error) {
			return json.RawMessage(`"done"`), nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	runWorker(t, w)
	waitFor(t, 20*time.Second, "the job to complete", func() bool { return s.job(r.Job.ID).State == core.StateCompleted })
	waitFor(t, 20*time.Second, "the outcome's fate to be logged", func() bool {
		return strings.Contains(logs.String(), "lease") || strings.Contains(logs.String(), "earlier try")
	})
	out := logs.String()
	if !strings.Contains(out, "outcome applied by an earlier try whose answer was lost") || strings.Contains(out, "did not apply") || strings.Contains(out, "most likely") {
		t.Fatalf("worker logs after a lost answer:\n%s", out)
	}
}
