package core

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/backlogq/backlog/core/contract"
)

// statsStore answers Stats and Workers with the number of reads so far,
// each read waiting for gate when it is set. Other methods are not used.
type statsStore struct {
	contract.Store
	stats, workers atomic.Int32
	gate           chan struct{}
	fail           atomic.Bool
}

func (s *statsStore) Stats(ctx context.Context) ([]QueueStats, error) {
	n := s.stats.Add(1)
	if s.gate != nil {
		select {
		case <-s.gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if s.fail.Load() {
		return nil, errors.New("database down")
	}
	return []QueueStats{{Queue: "q", Counts: map[State]int{StateAvailable: int(n)}}}, nil
}

func (s *statsStore) Workers(ctx context.Context) ([]WorkerInfo, error) {
	n := s.workers.Add(1)
	return make([]WorkerInfo, n), nil
}

func newTestStatsCache(st contract.Store) (*StatsCache, *ManualClock) {
	clk := NewManualClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	c := NewStatsCache(st)
	c.stats.now, c.workers.now = clk.Now, clk.Now
	return c, clk
}

// availableOf returns a function giving the available count of a Stats
// answer, failing t on an error.
func availableOf(t *testing.T) func([]QueueStats, error) int {
	return func(qs []QueueStats, err error) int {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return qs[0].Counts[StateAvailable]
	}
}

// TestStatsCacheReusesAnswersYoungerThanMaxAge: an answer is reused while
// its read started less than maxAge ago, each caller choosing its maxAge;
// FreshStats always reads; failures are not kept.
func TestStatsCacheReusesAnswersYoungerThanMaxAge(t *testing.T) {
	st := &statsStore{}
	c, clk := newTestStatsCache(st)
	ctx := t.Context()
	available := availableOf(t)

	if n := available(c.Stats(ctx, 5*time.Second)); n != 1 {
		t.Fatalf("first read: %d", n)
	}
	clk.Add(4 * time.Second)
	if n := available(c.Stats(ctx, 5*time.Second)); n != 1 {
		t.Fatalf("a 4 s old answer with maxAge 5 s was not reused: read %d", n)
	}
	if n := available(c.Stats(ctx, time.Second)); n != 2 {
		t.Fatalf("a 4 s old answer was reused for maxAge 1 s: read %d", n)
	}
	if n := available(c.Stats(ctx, 0)); n != 3 {
		t.Fatalf("maxAge 0 reused an answer: read %d", n)
	}
	if n := available(c.FreshStats(ctx)); n != 4 {
		t.Fatalf("FreshStats reused an answer: read %d", n)
	}
	if n := available(c.Stats(ctx, time.Minute)); n != 4 {
		t.Fatalf("the fresh answer does not replace the cached one: got read %d", n)
	}

	clk.Add(time.Minute)
	st.fail.Store(true)
	if _, err := c.Stats(ctx, time.Second); err == nil {
		t.Fatal("a failed read reported no error")
	}
	st.fail.Store(false)
	if n := available(c.Stats(ctx, time.Second)); n != 6 {
		t.Fatalf("after a failed read the next caller got read %d; want a new read (6)", n)
	}

	if w, err := c.Workers(ctx, time.Minute); err != nil || len(w) != 1 {
		t.Fatalf("workers: %d %v", len(w), err)
	}
	if w, _ := c.Workers(ctx, time.Minute); len(w) != 1 || st.workers.Load() != 1 {
		t.Fatalf("workers were read %d times; want 1", st.workers.Load())
	}
}

// TestStatsCacheSharesTheReadInFlight: callers arriving during a read wait
// for it instead of starting their own, whatever their maxAge; a caller
// whose context ends stops waiting while the read goes on for the others.
func TestStatsCacheSharesTheReadInFlight(t *testing.T) {
	st := &statsStore{gate: make(chan struct{})}
	c, _ := newTestStatsCache(st)

	var wg sync.WaitGroup
	results := make(chan int, 20)
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			qs, err := c.Stats(context.Background(), time.Duration(i%3-1)*time.Second)
			if err != nil {
				t.Error(err)
				return
			}
			results <- qs[0].Counts[StateAvailable]
		}()
	}
	ctx, cancel := context.WithCancel(context.Background())
	gaveUp := make(chan error, 1)
	go func() {
		_, err := c.Stats(ctx, time.Second)
		gaveUp <- err
	}()
	deadline := time.Now().Add(10 * time.Second)
	for c.Waiting() != 21 {
		if time.Now().After(deadline) {
			t.Fatalf("%d callers waiting; want 21", c.Waiting())
		}
		time.Sleep(time.Millisecond)
	}
	cancel()
	if err := <-gaveUp; !errors.Is(err, context.Canceled) {
		t.Fatalf("a caller whose context ended got %v; want context.Canceled", err)
	}
	close(st.gate)
	wg.Wait()
	close(results)
	for n := range results {
		if n != 1 {
			t.Errorf("a caller got read %d; want the shared first read", n)
		}
	}
	if n := st.stats.Load(); n != 1 {
		t.Fatalf("21 concurrent callers caused %d reads; want 1", n)
	}
}

// TestStatsCacheKeepsTheNewerAnswer: a fresh read overtaking an older one
// in flight is not replaced by it when the older one ends last.
func TestStatsCacheKeepsTheNewerAnswer(t *testing.T) {
	st := &statsStore{}
	c, clk := newTestStatsCache(st)
	available := availableOf(t)
	older := make(chan struct{})
	release := make(chan struct{})
	c.stats.read = func(ctx context.Context) ([]QueueStats, error) {
		n := st.stats.Add(1)
		if n == 1 {
			close(older)
			<-release
		}
		return []QueueStats{{Queue: "q", Counts: map[State]int{StateAvailable: int(n)}}}, nil
	}
	first := make(chan int, 1)
	go func() {
		qs, _ := c.Stats(context.Background(), time.Second)
		first <- qs[0].Counts[StateAvailable]
	}()
	<-older
	clk.Add(time.Millisecond)
	if n := available(c.FreshStats(t.Context())); n != 2 {
		t.Fatalf("FreshStats joined the older read: got read %d", n)
	}
	close(release)
	if n := <-first; n != 1 {
		t.Fatalf("the first caller got read %d; want its own (1)", n)
	}
	if n := available(c.Stats(t.Context(), time.Hour)); n != 2 {
		t.Fatalf("cached answer is read %d; the older read replaced the newer one", n)
	}
}
