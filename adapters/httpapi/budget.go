package httpapi

import (
	"context"
	"fmt"
	"time"

	"github.com/backlogq/backlog/core"
)

// Defaults of the memory bounds (Config.MaxPageBytes, Config.MaxHeavyRequests).
const (
	// DefaultMaxPageBytes is the byte budget of one list page or one claim
	// answer: it stops taking jobs once their args and results reach it.
	DefaultMaxPageBytes = 16 << 20
	// DefaultMaxHeavyRequests is how many list pages and claims may hold
	// jobs in memory at once.
	DefaultMaxHeavyRequests = 4
	// heavyWait is how long a list or claim waits for one of the
	// MaxHeavyRequests slots before it is answered 429 too-many-requests.
	heavyWait = 2 * time.Second
)

// heavySlots bounds how many requests that read many jobs (list pages,
// claims) hold them at once: a counting semaphore.
type heavySlots chan struct{}

// acquire takes a slot, waiting at most heavyWait. It returns a 429
// too-many-requests problem when none came free, and ctx's error when ctx
// ended first.
func (h heavySlots) acquire(ctx context.Context) error {
	select {
	case h <- struct{}{}:
		return nil
	default:
	}
	t := time.NewTimer(heavyWait)
	defer t.Stop()
	select {
	case h <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return newProblem(SlugTooManyRequests, fmt.Sprintf("the server is answering %d list pages and claims already; retry after the Retry-After delay", cap(h)))
	}
}

func (h heavySlots) release() { <-h }

// heavySlot is a slot that a request may take and give back more than
// once (a long-polling claim holds it only while it holds jobs).
type heavySlot struct {
	slots heavySlots
	held  bool
}

func (s *heavySlot) acquire(ctx context.Context) error {
	if s.held {
		return nil
	}
	if err := s.slots.acquire(ctx); err != nil {
		return err
	}
	s.held = true
	return nil
}

func (s *heavySlot) release() {
	if s.held {
		s.held = false
		s.slots.release()
	}
}

// jobBytes is what a job weighs against the page budget: its args and
// result, the parts that can be large.
func jobBytes(j *core.Job) int { return len(j.Args) + len(j.Result) }

// chunkSize is how many jobs one store call of a list page or claim may
// return, at most remaining: as many as fit MaxPageBytes if each had the
// largest args and result the client accepts, and at least one. So the
// jobs a page holds in memory at once stay within about twice the budget
// however large the jobs are.
func (s *Server) chunkSize(remaining int) int {
	per := max(s.ccfg.MaxArgsBytes, 0) + max(s.ccfg.MaxResultBytes, 0) + 1
	return max(1, min(remaining, s.cfg.MaxPageBytes/per))
}
