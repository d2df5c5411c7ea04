package client_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/core/contract"
	"github.com/backlogq/backlog/internal/teststores"
)

// TestQueuesReadsEveryPage: the server answers GET /v1/queues a page at a
// time; Client.Queues reads page after page and returns every queue once,
// by name.
func TestQueuesReadsEveryPage(t *testing.T) {
	st := teststores.Memory(t)
	now := contract.UTC(time.Now())
	var ps []core.InsertParams
	for i := range 2345 {
		ps = append(ps, core.InsertParams{Queue: fmt.Sprintf("q%05d", i), Kind: "k", Args: []byte(`{}`), Priority: 5, MaxAttempts: 1, RunAt: now})
	}
	if _, err := st.Insert(t.Context(), now, ps); err != nil {
		t.Fatal(err)
	}
	s := startServer(t, st, core.Config{}, false)
	qs, err := s.producer.Queues(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(qs) != 2345 {
		t.Fatalf("%d queues, want 2345", len(qs))
	}
	for i, q := range qs {
		if want := fmt.Sprintf("q%05d", i); q.Queue != want {
			t.Fatalf("queue %d is %q, want %q", i, q.Queue, want)
		}
	}
	empty := startServer(t, teststores.Memory(t), core.Config{}, false)
	if qs, err := empty.producer.Queues(t.Context()); err != nil || qs == nil || len(qs) != 0 {
		t.Fatalf("no queues: %v %v", qs, err)
	}
}
