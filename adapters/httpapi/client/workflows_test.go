package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/backlogq/backlog/adapters/httpapi/client"
	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/core/contract"
	"github.com/backlogq/backlog/internal/teststores"
)

// A workflow goes through the client: submitted with its steps' options,
// read back with its steps, listed, its jobs listed by workflow id, and
// cancelled whole by the admin.
func TestWorkflowClient(t *testing.T) {
	s := startServer(t, teststores.Memory(t), core.Config{AllowUnknownKinds: true}, false)
	ctx := context.Background()
	res, err := s.producer.SubmitWorkflow(ctx, []client.WorkflowStep{
		{Name: "extract", SubmitRequest: client.SubmitRequest{Kind: "x", Args: json.RawMessage(`{"n":1}`), Queue: "etl", Priority: 2}},
		{Name: "load", SubmitRequest: client.SubmitRequest{Kind: "x"}, After: []string{"extract"}, OnDependencyFailure: core.DependencyRun},
	})
	if err != nil {
		t.Fatal(err)
	}
	ex, lo := res.Steps["extract"], res.Steps["load"]
	if ex == nil || lo == nil || res.ID != ex.ID || ex.Queue != "etl" || ex.Priority != 2 || string(ex.Args) != `{"n":1}` ||
		lo.State != core.StateWaiting || !slices.Equal(lo.DependsOn, []int64{ex.ID}) || lo.OnDependencyFailure != core.DependencyRun {
		t.Fatalf("SubmitWorkflow = %+v (extract %+v, load %+v)", res, ex, lo)
	}
	d, err := s.producer.GetWorkflow(ctx, res.ID)
	if err != nil || d.ID != res.ID || d.Batch || d.Jobs != 2 || len(d.Steps) != 2 || d.Steps[1].Name != "load" || d.Steps[1].WaitingFor != 1 {
		t.Fatalf("GetWorkflow = %+v, %v", d, err)
	}
	if _, err := s.producer.GetBatch(ctx, res.ID); !errors.Is(err, core.ErrNotFound) {
		t.Fatalf("GetBatch of a workflow: err %v; want ErrNotFound", err)
	}
	page, err := s.producer.ListWorkflows(ctx, client.WorkflowListParams{})
	if err != nil || len(page.Workflows) != 1 || page.Workflows[0].ID != res.ID || page.NextAfter != 0 {
		t.Fatalf("ListWorkflows = %+v, %v", page, err)
	}
	jobs, err := s.producer.ListJobs(ctx, client.ListParams{WorkflowID: res.ID})
	if err != nil || len(jobs.Jobs) != 2 {
		t.Fatalf("ListJobs by workflow = %+v, %v", jobs, err)
	}
	if _, err := s.producer.CancelWorkflow(ctx, res.ID); !errors.Is(err, client.ErrForbidden) {
		t.Fatalf("CancelWorkflow with the producer token: err %v; want ErrForbidden", err)
	}
	c, err := s.admin.CancelWorkflow(ctx, res.ID)
	if err != nil || c.Applied != 2 {
		t.Fatalf("CancelWorkflow = %+v, %v", c, err)
	}
	_, err = s.producer.SubmitWorkflow(ctx, []client.WorkflowStep{
		{Name: "a", SubmitRequest: client.SubmitRequest{Kind: "x"}, After: []string{"b"}},
		{Name: "b", SubmitRequest: client.SubmitRequest{Kind: "x"}, After: []string{"a"}},
	})
	if !errors.Is(err, client.ErrInvalidRequest) || !strings.Contains(err.Error(), "cycle") {
		t.Fatalf("a cycle: err %v; want ErrInvalidRequest naming the cycle", err)
	}
}

// A batch goes through the client with its callbacks; the callback of a
// finished batch carries the counts of how it went.
func TestBatchClient(t *testing.T) {
	s := startServer(t, teststores.Memory(t), core.Config{AllowUnknownKinds: true}, false)
	ctx := context.Background()
	res, err := s.producer.CreateBatch(ctx, client.BatchCreateRequest{
		Jobs:      []client.SubmitRequest{{Kind: "part"}, {Kind: "part"}},
		OnSuccess: &client.SubmitRequest{Kind: "done"},
		Metadata:  map[string]string{"batch": "b1"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Jobs) != 2 || res.OnFinish != nil || res.OnSuccess == nil || res.OnSuccess.Metadata["batch"] != "b1" || res.ID != res.Jobs[0].ID {
		t.Fatalf("CreateBatch = %+v", res)
	}
	if _, err := s.worker.RegisterWorker(ctx, "w1", client.RegisterRequest{Queues: []string{"default"}}); err != nil {
		t.Fatal(err)
	}
	claimed, err := s.worker.Claim(ctx, "w1", client.ClaimRequest{Limit: 10})
	if err != nil || len(claimed) != 2 {
		t.Fatalf("Claim = %d jobs, %v; want the batch's 2", len(claimed), err)
	}
	for _, j := range claimed {
		if _, err := s.worker.Complete(ctx, j.ID, client.CompleteRequest{LeaseToken: j.LeaseToken}); err != nil {
			t.Fatal(err)
		}
	}
	d, err := s.producer.GetBatch(ctx, res.ID)
	if err != nil || !d.Batch || len(d.Callbacks) != 1 || d.Callbacks[0].DependencyEnds != (core.DependencyEnds{Completed: 2}) ||
		d.Callbacks[0].State != core.StateAvailable {
		t.Fatalf("GetBatch = %+v, %v", d, err)
	}
	page, err := s.producer.ListBatches(ctx, client.WorkflowListParams{Limit: 1})
	if err != nil || len(page.Workflows) != 1 || !page.Workflows[0].Batch {
		t.Fatalf("ListBatches = %+v, %v", page, err)
	}
	if _, err := s.producer.GetWorkflow(ctx, res.ID); !errors.Is(err, core.ErrNotFound) {
		t.Fatalf("GetWorkflow of a batch: err %v; want ErrNotFound", err)
	}
	c, err := s.admin.CancelBatch(ctx, res.ID)
	if err != nil || c.Applied != 1 || !slices.Equal(c.IDs, []int64{res.OnSuccess.ID}) {
		t.Fatalf("CancelBatch = %+v, %v", c, err)
	}
	if _, err := s.producer.CreateBatch(ctx, client.BatchCreateRequest{}); !errors.Is(err, client.ErrInvalidRequest) {
		t.Fatalf("an empty batch: err %v; want ErrInvalidRequest", err)
	}
}

// A server whose store has no job dependencies answers ErrUnsupported.
func TestWorkflowClientUnsupported(t *testing.T) {
	s := startServer(t, struct{ contract.Store }{teststores.Memory(t)}, core.Config{AllowUnknownKinds: true}, false)
	ctx := context.Background()
	_, err := s.producer.SubmitWorkflow(ctx, []client.WorkflowStep{{Name: "a", SubmitRequest: client.SubmitRequest{Kind: "x"}}})
	if !errors.Is(err, core.ErrUnsupported) {
		t.Fatalf("SubmitWorkflow: err %v; want ErrUnsupported", err)
	}
	if _, err := s.producer.ListBatches(ctx, client.WorkflowListParams{}); !errors.Is(err, core.ErrUnsupported) {
		t.Fatalf("ListBatches: err %v; want ErrUnsupported", err)
	}
}
