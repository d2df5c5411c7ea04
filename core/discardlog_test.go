package core_test

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/backlogq/backlog/core"
)

// levelRecorder is a slog.Handler that keeps the level and the outcome
// attribute of every "job attempt failed" record.
type levelRecorder struct {
	mu   sync.Mutex
	seen map[string]slog.Level // outcome -> level
}

func (r *levelRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (r *levelRecorder) WithAttrs([]slog.Attr) slog.Handler       { return r }
func (r *levelRecorder) WithGroup(string) slog.Handler            { return r }
func (r *levelRecorder) Handle(_ context.Context, rec slog.Record) error {
	if rec.Message != "backlog: job attempt failed" {
		return nil
	}
	rec.Attrs(func(a slog.Attr) bool {
		if a.Key == "outcome" {
			r.mu.Lock()
			r.seen[a.Value.String()] = rec.Level
			r.mu.Unlock()
		}
		return true
	})
	return nil
}

func (r *levelRecorder) levels() map[string]slog.Level {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]slog.Level, len(r.seen))
	for k, v := range r.seen {
		out[k] = v
	}
	return out
}

// A failed attempt that is retried is logged at INFO; the one that
// dead-letters the job (discards it) at WARN.
func TestDiscardLoggedAtWarn(t *testing.T) {
	rec := &levelRecorder{seen: map[string]slog.Level{}}
	h := core.NewHandlers()
	h.HandleRaw("flaky", func(context.Context, *core.Job) error {
		return errors.New("boom")
	}, core.WithRetry(core.DelayList{0}))
	c, st := newClient(t, h, func(c *core.Config) {
		c.PollInterval = 10 * time.Millisecond
		c.Logger = slog.New(rec)
	})
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	r, err := c.EnqueueRaw(context.Background(), "flaky", nil, &core.Options{MaxAttempts: 2})
	if err != nil {
		t.Fatal(err)
	}
	waitState(t, st, r.Job.ID, core.StateDiscarded)
	deadline := time.Now().Add(5 * time.Second)
	for {
		got := rec.levels()
		if len(got) == 2 {
			if got["retry"] != slog.LevelInfo || got["discard"] != slog.LevelWarn {
				t.Fatalf("levels by outcome: %v; want retry INFO, discard WARN", got)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("logged outcomes: %v; want retry and discard", got)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
