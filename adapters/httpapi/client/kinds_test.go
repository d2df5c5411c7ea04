package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/backlogq/backlog/adapters/httpapi"
	"github.com/backlogq/backlog/adapters/httpapi/client"
	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/internal/teststores"
)

// TestWorkerAnnouncesKinds: a worker's WorkerConfig.Kinds reach the
// server at registration, so a server that refuses unknown kinds (it
// handles "local" itself) accepts jobs of them, and the worker runs them.
func TestWorkerAnnouncesKinds(t *testing.T) {
	t.Parallel()
	h := core.NewHandlers()
	h.HandleRaw("local", func(context.Context, *core.Job) error { return nil })
	c, err := core.NewClient(teststores.Memory(t), core.Config{Logger: quiet(), MaintenanceInterval: -1, Handlers: h})
	if err != nil {
		t.Fatal(err)
	}
	api, err := httpapi.New(c, httpapi.Config{})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(api)
	t.Cleanup(func() { _ = api.Close(); hs.Close() })
	cl, err := client.New(hs.URL, client.WithLogger(quiet()))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	_, err = cl.Submit(ctx, client.SubmitRequest{Kind: "resize"})
	var p *client.Problem
	if !errors.As(err, &p) || p.Slug() != "unknown-kind" || p.Status != 422 {
		t.Fatalf("submit before any worker: err %v, want the unknown-kind problem", err)
	}
	if !errors.Is(err, core.ErrUnknownKind) || errors.Is(err, core.ErrInvalidJob) || errors.Is(err, client.ErrInvalidRequest) {
		t.Fatalf("the unknown-kind problem matches core.ErrUnknownKind %v, core.ErrInvalidJob %v, ErrInvalidRequest %v; want only the first",
			errors.Is(err, core.ErrUnknownKind), errors.Is(err, core.ErrInvalidJob), errors.Is(err, client.ErrInvalidRequest))
	}

	registered := make(chan *client.Registration, 4)
	w, err := client.NewWorker(cl, client.WorkerConfig{
		ID: "resizer", Queues: []string{"default"}, Kinds: []string{"resize"}, Logger: quiet(), WaitSeconds: 1,
		OnRegister: func(r *client.Registration) { registered <- r },
		Handler:    func(context.Context, *client.Job) (json.RawMessage, error) { return nil, nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	runWorker(t, w)
	select {
	case <-registered:
	case <-time.After(20 * time.Second):
		t.Fatal("the worker did not register")
	}
	r, err := cl.Submit(ctx, client.SubmitRequest{Kind: "resize"})
	if err != nil {
		t.Fatalf("submit of an announced kind: %v", err)
	}
	waitFor(t, 20*time.Second, "the job to be done", func() bool {
		j, err := cl.GetJob(ctx, r.Job.ID)
		return err == nil && j.State == core.StateCompleted
	})
	if _, err := cl.Submit(ctx, client.SubmitRequest{Kind: "other"}); !errors.As(err, &p) || p.Slug() != "unknown-kind" {
		t.Fatalf("submit of a kind no worker announced: err %v", err)
	}
}
