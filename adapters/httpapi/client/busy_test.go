package client

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"
)

// TestTooManyRequestsIsRetriedAfterRetryAfter: a 429 too-many-requests
// promises nothing was done, so every call is retried, and it matches
// ErrUnavailable when the retries run out.
func TestTooManyRequestsIsRetriedAfterRetryAfter(t *testing.T) {
	var calls atomic.Int32
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) <= 2 {
			w.Header().Set("Content-Type", "application/problem+json")
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusTooManyRequests)
			_, _ = w.Write([]byte(`{"type":"https://backlog.dev/problems/too-many-requests","title":"Too many requests","status":429}`))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"jobs":[]}`))
	}))
	defer hs.Close()
	c, err := New(hs.URL, WithRetry(RetryPolicy{MaxAttempts: 3, BaseDelay: time.Millisecond, MaxDelay: time.Millisecond}))
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, err := c.ListJobs(context.Background(), ListParams{}); err != nil {
		t.Fatalf("list after two 429s: %v", err)
	}
	if calls.Load() != 3 || time.Since(start) < 2*time.Second {
		t.Fatalf("%d calls in %s; want 3, waiting out Retry-After: 1 twice", calls.Load(), time.Since(start))
	}
	calls.Store(-10)
	c, _ = New(hs.URL, WithRetry(RetryPolicy{MaxAttempts: 1}))
	if _, err := c.ListJobs(context.Background(), ListParams{}); !errors.Is(err, ErrUnavailable) || !IsRetryable(err) {
		t.Fatalf("429: %v; want ErrUnavailable, retryable", err)
	}
}
