package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/backlogq/backlog/core"
)

// Defaults of the memory bounds (Config.MaxPageBytes, Config.MaxHeavyRequests).
const (
	// DefaultMaxPageBytes is the byte budget of one list page or one claim
	// answer: it stops taking jobs once their args and results reach it.
	DefaultMaxPageBytes = 8 << 20
	// DefaultMaxHeavyRequests is how many list pages and claims may hold
	// jobs in memory at once.
	DefaultMaxHeavyRequests = 4
	// heavyWait is how long a list or claim waits for one of the
	// MaxHeavyRequests slots before it is answered 429 too-many-requests.
	heavyWait = 5 * time.Second
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

// chunkSize is how many jobs the next store call of a list page or claim
// may return, at most remaining, when the jobs read so far weigh used
// bytes: as many as still fit MaxPageBytes if each had the largest args
// and result the client accepts, and at least one. So the jobs a page or
// claim holds stay within the budget plus one job, however large they
// are.
func (s *Server) chunkSize(remaining, used int) int {
	per := max(s.ccfg.MaxArgsBytes, 0) + max(s.ccfg.MaxResultBytes, 0) + 1
	return max(1, min(remaining, (s.cfg.MaxPageBytes-used)/per))
}

// jobStream writes the answer {"jobs":[…]…} one job at a time: each job is
// encoded straight into the response (through a pooled encoder buffer, no
// copy of the whole answer), and nothing is written, not even the status,
// until the first job has been encoded, so a page whose first job cannot
// be encoded can still be answered with a problem.
type jobStream struct {
	w       http.ResponseWriter
	enc     *json.Encoder
	n       int  // jobs written
	started bool // status and `{"jobs":[` written
}

func newJobStream(w http.ResponseWriter) *jobStream {
	s := &jobStream{w: w}
	s.enc = json.NewEncoder(s)
	s.enc.SetEscapeHTML(false)
	return s
}

// start writes the status and the start of the answer, once.
func (s *jobStream) start() {
	if s.started {
		return
	}
	s.started = true
	h := s.w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	s.w.WriteHeader(http.StatusOK)
	_, _ = io.WriteString(s.w, `{"jobs":[`)
}

// Write receives one encoded job from enc (json.Encoder writes each value
// with one Write) and appends it to the array.
func (s *jobStream) Write(p []byte) (int, error) {
	s.start()
	if s.n > 0 {
		if _, err := io.WriteString(s.w, ","); err != nil {
			return 0, err
		}
	}
	s.n++
	return s.w.Write(p)
}

// add writes j; on an error nothing of j was written.
func (s *jobStream) add(j *Job) error { return s.enc.Encode(j) }

// end closes the array and the object, with next_after when after > 0,
// and next_after_run_at too when afterRunAt is set (a list by run_at).
func (s *jobStream) end(after int64, afterRunAt *time.Time) {
	s.start()
	switch {
	case after > 0 && afterRunAt != nil:
		_, _ = fmt.Fprintf(s.w, `],"next_after":%d,"next_after_run_at":%q}`+"\n", after, afterRunAt.UTC().Format(time.RFC3339Nano))
	case after > 0:
		_, _ = fmt.Fprintf(s.w, `],"next_after":%d}`+"\n", after)
	default:
		_, _ = io.WriteString(s.w, "]}\n")
	}
}
