package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"testing"

	"github.com/backlogq/backlog/adapters/httpapi/client"
	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/internal/teststores"
)

func TestBulk(t *testing.T) {
	s := startServer(t, teststores.SQLite(t), core.Config{}, false)
	ctx := context.Background()
	var ids []int64
	for _, args := range []string{`{"to":"ann"}`, `{"to":"bob"}`, `{"to":"ann","cc":"eve"}`} {
		res, err := s.producer.Submit(ctx, client.SubmitRequest{Kind: "mail", Args: json.RawMessage(args)})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, res.Job.ID)
	}
	page, err := s.producer.ListJobs(ctx, client.ListParams{Args: json.RawMessage(`{"to":"ann","cc":"eve"}`)})
	if err != nil || len(page.Jobs) != 1 || page.Jobs[0].ID != ids[2] {
		t.Fatalf("ListJobs by args = %+v, %v; want job %d", page, err, ids[2])
	}
	req := client.BulkRequest{Action: core.BulkCancel, Filter: client.BulkFilter{Args: json.RawMessage(`{"to":"ann"}`)}, DryRun: true}
	res, err := s.admin.Bulk(ctx, req)
	if err != nil || res.Matched != 2 || res.Applied != 0 || !slices.Equal(res.IDs, []int64{ids[0], ids[2]}) {
		t.Fatalf("dry run = %+v, %v; want jobs %d and %d", res, err, ids[0], ids[2])
	}
	req.DryRun = false
	if res, err = s.admin.Bulk(ctx, req); err != nil || res.Applied != 2 {
		t.Fatalf("cancel = %+v, %v", res, err)
	}
	if j := s.job(ids[2]); j.State != core.StateCancelled {
		t.Fatalf("job %d is %s", ids[2], j.State)
	}
	if _, err := s.admin.Bulk(ctx, client.BulkRequest{Action: core.BulkRetry}); !errors.Is(err, client.ErrInvalidRequest) {
		t.Fatalf("empty filter: err %v; want ErrInvalidRequest", err)
	}
	if _, err := s.producer.Bulk(ctx, client.BulkRequest{Action: core.BulkRetry, Filter: client.BulkFilter{Queue: "default"}}); !errors.Is(err, client.ErrForbidden) {
		t.Fatalf("producer token: err %v; want ErrForbidden", err)
	}
}
