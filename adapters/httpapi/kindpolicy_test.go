package httpapi

import (
	"context"
	"net/http"
	"reflect"
	"testing"
	"time"

	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/store/memory"
)

// TestKindPolicies: GET /v1/kinds shows each kind's defaults as Go gave
// them (WithRetries, WithMaxAttempts, WithRetry, WithTimeout), for kinds
// handled here and declared ones, and what any other kind gets; a job
// submitted over HTTP without max_attempts gets the kind's attempts.
func TestKindPolicies(t *testing.T) {
	hs := core.NewHandlers()
	hs.HandleRaw("resize", func(ctx context.Context, j *core.Job) error { return nil },
		core.WithRetries(time.Second, 30*time.Second), core.WithTimeout(5*time.Second))
	hs.Declare("remote_render", core.WithMaxAttempts(3), core.WithRetry(core.ExponentialBackoff{Base: 2 * time.Second, Jitter: -1}))
	h := newHarness(t, memory.New(), core.Config{Handlers: hs, Retry: core.DelayList{time.Minute}}, Config{})
	var out KindList
	h.must(http.StatusOK, "GET", "/v1/kinds", nil, &out)
	want := []core.KindPolicy{
		{Kind: "remote_render", MaxAttempts: 3, Retry: core.RetryDescription{Policy: "exponential", BaseSeconds: 2, MaxSeconds: 86400}},
		{Kind: "resize", Handled: true, MaxAttempts: 3, Retry: core.RetryDescription{Policy: "delays", DelaysSeconds: []float64{1, 30}}, TimeoutSeconds: 5},
	}
	if !reflect.DeepEqual(out.Kinds, want) {
		t.Fatalf("GET /v1/kinds kinds = %+v\nwant %+v", out.Kinds, want)
	}
	if u := out.Unknown; u.Kind != "" || u.MaxAttempts != core.DefaultMaxAttempts || u.Retry.Policy != "delays" || !reflect.DeepEqual(u.Retry.DelaysSeconds, []float64{60}) {
		t.Fatalf("GET /v1/kinds unknown = %+v", u)
	}
	j := h.submit(map[string]any{"kind": "remote_render", "args": map[string]any{}})
	if j.MaxAttempts != 3 {
		t.Fatalf("a remote_render job submitted without max_attempts got %d; want the kind's 3", j.MaxAttempts)
	}
}
