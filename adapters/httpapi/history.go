package httpapi

import (
	"fmt"
	"net/http"
	"time"

	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/core/contract"
)

// Bounds of GET /v1/queues/{name}/history: the window a request may ask
// for, and the one it gets without since or minutes.
const (
	// DefaultHistoryMinutes is the window of a history request that names
	// none: the last hour.
	DefaultHistoryMinutes = 60
	// MaxHistoryMinutes is the widest window: core.HistoryRetention (a
	// day), beyond which the store keeps nothing.
	MaxHistoryMinutes = int(core.HistoryRetention / time.Minute)
)

// QueueHistoryResponse answers GET /v1/queues/{name}/history: the
// queue's buckets (contract.QueueBucket) from Since on, oldest first, as
// every node wrote them to the store. Minutes in which no node wrote
// anything have no bucket (no completion, no failure, no gauge sample).
type QueueHistoryResponse struct {
	Queue string `json:"queue"`
	// Since is the start of the first minute asked for (UTC); Now is the
	// server's time when it read the history.
	Since time.Time `json:"since"`
	Now   time.Time `json:"now"`
	// BucketSeconds is the length of a bucket: 60.
	BucketSeconds int           `json:"bucket_seconds"`
	Buckets       []QueueMinute `json:"buckets"`
}

// QueueMinute is one bucket of a queue's history. Depth,
// OldestAgeSeconds and SampledAt are null when no node sampled the
// queue's due jobs in that minute.
type QueueMinute struct {
	Minute    time.Time `json:"minute"`    // start of the minute, UTC
	Completed int64     `json:"completed"` // jobs completed in the minute, on every node
	Failed    int64     `json:"failed"`    // failed attempts in the minute, on every node
	// Depth is the number of due jobs waiting at SampledAt.
	Depth *int64 `json:"depth"`
	// OldestAgeSeconds is how long the oldest of them had been due then.
	OldestAgeSeconds *float64   `json:"oldest_age_seconds"`
	SampledAt        *time.Time `json:"sampled_at"`
}

// historyWindow parses since (RFC 3339) or minutes (1..MaxHistoryMinutes)
// from the query; neither means the last DefaultHistoryMinutes.
func historyWindow(r *http.Request, now time.Time) (time.Time, error) {
	q := r.URL.Query()
	since, minutes := q.Get("since"), q.Get("minutes")
	switch {
	case since != "" && minutes != "":
		return time.Time{}, newProblem(SlugInvalidRequest, "give since or minutes, not both")
	case since != "":
		t, err := parseTime(since)
		if err != nil {
			return time.Time{}, newProblem(SlugInvalidRequest, "since is not an RFC 3339 time (like 2030-01-02T03:04:05Z): "+err.Error())
		}
		if now.Sub(t) > core.HistoryRetention {
			t = now.Add(-core.HistoryRetention)
		}
		return contract.HistoryMinute(t), nil
	case minutes != "":
		n, ok := parseDecimal(minutes, 1, int64(MaxHistoryMinutes))
		if !ok {
			return time.Time{}, newProblem(SlugInvalidRequest, fmt.Sprintf("minutes must be a whole number from 1 to %d", MaxHistoryMinutes))
		}
		return contract.HistoryMinute(now.Add(-time.Duration(n-1) * time.Minute)), nil
	}
	return contract.HistoryMinute(now.Add(-(DefaultHistoryMinutes - 1) * time.Minute)), nil
}

// queueHistory serves GET /v1/queues/{name}/history?since=…|minutes=….
// A store that is no contract.QueueHistory answers 501 not-supported.
func (s *Server) queueHistory(w http.ResponseWriter, r *http.Request) error {
	name, err := queueName(r)
	if err != nil {
		return err
	}
	now := s.clock.Now()
	since, err := historyWindow(r, now)
	if err != nil {
		return err
	}
	h, ok := s.st.(contract.QueueHistory)
	if !ok {
		return fmt.Errorf("backlog: queue history: %w", core.ErrUnsupported)
	}
	buckets, err := h.QueueHistory(r.Context(), name, since)
	if err != nil {
		return err
	}
	out := QueueHistoryResponse{Queue: name, Since: since, Now: now, BucketSeconds: 60, Buckets: make([]QueueMinute, 0, len(buckets))}
	for _, b := range buckets {
		m := QueueMinute{Minute: b.Minute, Completed: b.Completed, Failed: b.Failed}
		if b.Gauge {
			depth, age, at := b.Depth, b.OldestAge.Seconds(), b.GaugeAt
			m.Depth, m.OldestAgeSeconds, m.SampledAt = &depth, &age, &at
		}
		out.Buckets = append(out.Buckets, m)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}
