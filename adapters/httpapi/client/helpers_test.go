package client_test

import (
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/backlogq/backlog/adapters/httpapi"
	"github.com/backlogq/backlog/adapters/httpapi/client"
	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/core/contract"
)

// Tokens of the test servers.
const (
	producerToken = "producer-token"
	workerToken   = "worker-token"
	adminToken    = "admin-token"
	teamAToken    = "team-a-token" // per-worker tokens
	teamBToken    = "team-b-token"
)

// quiet discards logs; set BACKLOG_TEST_LOGS=1 to see them on stderr.
func quiet() *slog.Logger {
	if os.Getenv("BACKLOG_TEST_LOGS") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// testServer is a real API server on loopback over a core.Client on one
// store, with one API client per role.
type testServer struct {
	t        *testing.T
	st       contract.Store
	core     *core.Client
	api      *httpapi.Server
	hs       *httptest.Server
	URL      string
	producer *client.Client
	worker   *client.Client
	admin    *client.Client
}

// startServer serves the API over st. With maintenance set the core client
// is started (no queues: it only runs maintenance); otherwise maintenance
// is off.
func startServer(t *testing.T, st contract.Store, ccfg core.Config, maintenance bool) *testServer {
	t.Helper()
	if !maintenance {
		ccfg.MaintenanceInterval = -1
	}
	if ccfg.Logger == nil {
		ccfg.Logger = quiet()
	}
	c, err := core.NewClient(st, ccfg)
	if err != nil {
		t.Fatal(err)
	}
	if maintenance {
		if err := c.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	api, err := httpapi.New(c, httpapi.Config{
		Tokens:       httpapi.Tokens{Producer: producerToken, Worker: workerToken, Admin: adminToken},
		WorkerTokens: map[string]string{"team-a": teamAToken, "team-b": teamBToken},
	})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(api)
	t.Cleanup(func() {
		_ = api.Close() // ends long polls, so the listener can close
		hs.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = c.Stop(ctx)
	})
	s := &testServer{t: t, st: st, core: c, api: api, hs: hs, URL: hs.URL}
	s.producer = s.client(producerToken)
	s.worker = s.client(workerToken)
	s.admin = s.client(adminToken)
	return s
}

// client returns an API client with token and fast retries.
func (s *testServer) client(token string, opts ...client.Option) *client.Client {
	s.t.Helper()
	opts = append([]client.Option{
		client.WithToken(token), client.WithLogger(quiet()),
		client.WithRetry(client.RetryPolicy{BaseDelay: 5 * time.Millisecond, MaxDelay: 50 * time.Millisecond}),
	}, opts...)
	c, err := client.New(s.URL, opts...)
	if err != nil {
		s.t.Fatal(err)
	}
	return c
}

// counts sums job counts per state over all queues, through the API.
func (s *testServer) counts() map[core.State]int {
	s.t.Helper()
	qs, err := s.producer.Queues(context.Background())
	if err != nil {
		s.t.Fatal(err)
	}
	out := map[core.State]int{}
	for _, q := range qs {
		for st, n := range q.Counts {
			out[st] += n
		}
	}
	return out
}

// allJobs lists every job through the API.
func (s *testServer) allJobs() []*client.Job {
	s.t.Helper()
	var out []*client.Job
	for j, err := range s.producer.AllJobs(context.Background(), client.ListParams{Limit: 1000}) {
		if err != nil {
			s.t.Fatal(err)
		}
		out = append(out, j)
	}
	return out
}

// job gets one job through the API.
func (s *testServer) job(id int64) *client.Job {
	s.t.Helper()
	j, err := s.producer.GetJob(context.Background(), id)
	if err != nil {
		s.t.Fatal(err)
	}
	return j
}

// waitFor polls cond every 10 ms until it holds or timeout passes.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// runWorker runs w until the test ends (or stop is called) and returns a
// stop function that cancels it and waits for Run to return.
func runWorker(t *testing.T, w *client.Worker) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	stopped := false
	stop = func() {
		t.Helper()
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("worker %s: Run: %v", w.ID(), err)
			}
		case <-time.After(60 * time.Second):
			t.Errorf("worker %s did not stop", w.ID())
		}
	}
	t.Cleanup(stop)
	return stop
}

// newWorker builds a worker on the server's worker client.
func (s *testServer) newWorker(cfg client.WorkerConfig) *client.Worker {
	s.t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = quiet()
	}
	if len(cfg.Queues) == 0 {
		cfg.Queues = []string{"default"}
	}
	w, err := client.NewWorker(s.worker, cfg)
	if err != nil {
		s.t.Fatal(err)
	}
	return w
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }
