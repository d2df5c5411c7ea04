package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/backlogq/backlog/adapters/httpapi/client"
	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/store/memory"
)

// TestWorkerWithPerWorkerToken: a Worker runs jobs with a per-worker token
// (its signed lease tokens opaque to it), and a Worker with another
// credential cannot take over its id while it runs.
func TestWorkerWithPerWorkerToken(t *testing.T) {
	st := memory.New()
	t.Cleanup(func() { st.Close() })
	s := startServer(t, st, core.Config{}, false)
	ran := make(chan int64, 10)
	w, err := client.NewWorker(s.client(teamAToken), client.WorkerConfig{
		ID: "team-a-1", Queues: []string{"default"}, WaitSeconds: 1, Logger: quiet(),
		Handler: func(ctx context.Context, j *client.Job) (json.RawMessage, error) {
			ran <- j.ID
			return json.RawMessage(`"done"`), nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	res, err := s.producer.Submit(context.Background(), client.SubmitRequest{Kind: "k"})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case id := <-ran:
		if id != res.Job.ID {
			t.Fatalf("ran job %d; want %d", id, res.Job.ID)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the job did not run")
	}
	waitFor(t, 20*time.Second, "the job to complete", func() bool {
		j, err := s.producer.GetJob(context.Background(), res.Job.ID)
		return err == nil && j.State == core.StateCompleted
	})

	other := s.client(teamBToken)
	if _, err := other.RegisterWorker(context.Background(), "team-a-1", client.RegisterRequest{Queues: []string{"default"}}); !errors.Is(err, client.ErrForbidden) {
		t.Fatalf("registering team a's worker id with team b's token: %v; want ErrForbidden", err)
	}
	if _, err := other.Heartbeat(context.Background(), "team-a-1", nil); !errors.Is(err, client.ErrForbidden) {
		t.Fatalf("heartbeating team a's worker with team b's token: %v; want ErrForbidden", err)
	}
}
