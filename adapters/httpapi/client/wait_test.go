package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/backlogq/backlog/adapters/httpapi/client"
	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/core/contract"
	"github.com/backlogq/backlog/internal/teststores"
)

// Wait returns the final job once a remote worker finished it; WaitJob
// answers with the job as it is when its wait passes; a missing job is
// core.ErrNotFound and ctx's end is ctx's error.
func TestWait(t *testing.T) {
	teststores.Run(t, func(t *testing.T, st contract.Store) {
		s := startServer(t, st, core.Config{}, false)
		ctx := context.Background()
		ok, err := s.producer.Submit(ctx, client.SubmitRequest{Kind: "ok", Args: []byte(`{"n":1}`)})
		if err != nil {
			t.Fatal(err)
		}
		pending, err := s.producer.Submit(ctx, client.SubmitRequest{Kind: "later", Queue: "idle"})
		if err != nil {
			t.Fatal(err)
		}

		j, final, err := s.producer.WaitJob(ctx, pending.Job.ID, 100*time.Millisecond)
		if err != nil || final || j.State != core.StateAvailable {
			t.Fatalf("WaitJob of a pending job: %+v, %v, %v", j, final, err)
		}
		tctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		_, err = s.producer.Wait(tctx, pending.Job.ID)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Wait past ctx's deadline: %v", err)
		}
		if _, err := s.producer.Wait(ctx, pending.Job.ID+1000); !errors.Is(err, core.ErrNotFound) {
			t.Fatalf("Wait of a missing job: %v", err)
		}

		done := make(chan *client.Job, 1)
		go func() {
			j, err := s.producer.Wait(ctx, ok.Job.ID)
			if err != nil {
				t.Errorf("Wait: %v", err)
			}
			done <- j
		}()
		w := s.newWorker(client.WorkerConfig{Handler: func(ctx context.Context, j *client.Job) (json.RawMessage, error) {
			return json.RawMessage(`{"got":1}`), nil
		}})
		runWorker(t, w)
		select {
		case j := <-done:
			if j == nil || j.State != core.StateCompleted || (string(j.Result) != `{"got":1}` && string(j.Result) != `{"got": 1}`) {
				t.Fatalf("Wait returned %+v", j)
			}
		case <-time.After(20 * time.Second):
			t.Fatal("Wait did not return")
		}
	})
}

// A server that answers a long-poll early, not final (as one shutting
// down does), is asked again after a pause, not in a busy loop.
func TestWaitPausesAfterAnEarlyAnswer(t *testing.T) {
	var hits atomic.Int64
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		if r.URL.Query().Get("wait") == "" {
			t.Errorf("request without wait: %s", r.URL)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusAccepted)
		_, _ = w.Write([]byte(`{"job":{"id":1,"state":"available"}}`))
	}))
	defer hs.Close()
	c, err := client.New(hs.URL, client.WithLogger(quiet()))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2500*time.Millisecond)
	defer cancel()
	if _, err := c.Wait(ctx, 1); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait: %v", err)
	}
	if n := hits.Load(); n < 2 || n > 4 {
		t.Fatalf("%d long-polls in 2.5 s of early answers, want about one a second", n)
	}
}
