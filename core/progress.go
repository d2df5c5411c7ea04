package core

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/backlogq/backlog/core/contract"
)

// Progress is how far a running attempt says it got (contract.Progress):
// Percent 0..100, a Message of at most MaxProgressMessageLen bytes, At
// when it was recorded.
type Progress = contract.Progress

// Bounds of progress reports and checkpoints.
const (
	MaxProgressMessageLen = contract.MaxProgressMessageLen // bytes of UTF-8 in a progress message
	MaxCheckpointBytes    = contract.MaxCheckpointBytes    // bytes of JSON in a checkpoint
)

// ProgressInterval is the most often ReportProgress writes one job's
// progress to the store: a report that comes sooner after the last write
// is held back, and written by a timer once the interval has passed (wall
// time), by SaveCheckpoint, or when the handler returns (whichever comes
// first), so the latest report is always written.
const ProgressInterval = time.Second

// ProgressSink writes, for the attempt a runner outside the engine runs
// (a remote worker), its progress (nil: leave it) and checkpoint (nil:
// leave it; the JSON null clears it), fenced by that attempt's lease: an
// error wrapping ErrLeaseLost when the attempt no longer holds the job.
type ProgressSink func(ctx context.Context, progress *Progress, checkpoint json.RawMessage) error

// progressReporter throttles the progress reports of one attempt and
// writes them, and its checkpoints, through sink.
type progressReporter struct {
	sink  ProgressSink
	clock Clock

	mu      sync.Mutex
	last    time.Time   // when a progress report was last written; zero: never
	pending *Progress   // a report held back, written by flush
	timer   *time.Timer // flushes pending after the interval; nil: none armed
}

type progressKey struct{}

// WithProgressSink returns ctx in which ReportProgress and SaveCheckpoint
// write through sink, throttled as for the engine's own handlers (see
// ProgressInterval), and flush, which the runner calls once the handler
// has returned to write the report the throttle held back (nil when
// there was none). clock stamps the reports; nil means the wall clock.
// Remote workers (adapters/httpapi/client) use it so that their handlers
// call the same functions as in-process ones.
func WithProgressSink(ctx context.Context, clock Clock, sink ProgressSink) (context.Context, func(context.Context) error) {
	if clock == nil {
		clock = SystemClock{}
	}
	r := &progressReporter{sink: sink, clock: clock}
	return context.WithValue(ctx, progressKey{}, r), r.flush
}

// reporterFrom returns the progress reporter of the handler's context, or
// nil outside a handler.
func reporterFrom(ctx context.Context) *progressReporter {
	r, _ := ctx.Value(progressKey{}).(*progressReporter)
	return r
}

// ReportProgress records how far the running attempt got: percent (0 to
// 100) and a short message (at most MaxProgressMessageLen bytes of
// UTF-8), shown by the HTTP API, the CLI and the dashboard until the
// job's next claim. Reports of one job are written at most once per
// ProgressInterval; one held back is written later (see
// ProgressInterval), so ReportProgress is cheap to call in a loop. It
// returns an error outside a handler, for out-of-bounds values (wrapping
// ErrInvalidArgument), wrapping ErrUnsupported when the store cannot
// record progress (contract.ProgressRecorder), and wrapping ErrLeaseLost
// when the attempt no longer holds the job.
func ReportProgress(ctx context.Context, percent float64, message string) error {
	r := reporterFrom(ctx)
	if r == nil {
		return errors.New("backlog: ReportProgress called outside a job handler")
	}
	p := &Progress{Percent: percent, Message: message, At: contract.UTC(r.clock.Now())}
	if err := p.Validate(); err != nil {
		return fmt.Errorf("backlog: report progress: %w", err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if since := p.At.Sub(r.last); !r.last.IsZero() && since >= 0 && since < ProgressInterval {
		r.pending = p
		if r.timer == nil {
			r.timer = time.AfterFunc(ProgressInterval-since, func() { _ = r.flush(ctx) })
		}
		return nil
	}
	return r.writeLocked(ctx, p, nil)
}

// SaveCheckpoint stores v's JSON encoding (at most MaxCheckpointBytes) as
// the job's checkpoint: the next attempt of the job receives it in
// Job.Checkpoint (read it with LoadCheckpoint) after a failure, a
// rescue, a snooze or a hand-back, until a continuation starts the
// job's next step; nil clears it. It is written before SaveCheckpoint
// returns, with a progress report held back, if any. The errors are
// those of ReportProgress.
func SaveCheckpoint(ctx context.Context, v any) error {
	r := reporterFrom(ctx)
	if r == nil {
		return errors.New("backlog: SaveCheckpoint called outside a job handler")
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("backlog: encode checkpoint: %w", err)
	}
	if err := contract.ValidateCheckpoint(raw); err != nil {
		return fmt.Errorf("backlog: save checkpoint: %w", err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.writeLocked(ctx, r.pending, raw)
}

// LoadCheckpoint decodes the checkpoint job's attempt received (the one
// an earlier attempt of the same step saved with SaveCheckpoint) into v
// and reports whether there was one; without one, v is left as it is.
func LoadCheckpoint(job *Job, v any) (bool, error) {
	if job.Checkpoint == nil || contract.IsNullJSON(job.Checkpoint) {
		return false, nil
	}
	if err := json.Unmarshal(job.Checkpoint, v); err != nil {
		return true, fmt.Errorf("backlog: job %d: decode checkpoint: %w", job.ID, err)
	}
	return true, nil
}

// writeLocked writes p (nil: none) and checkpoint (nil: none) through
// the sink; r.mu is held.
func (r *progressReporter) writeLocked(ctx context.Context, p *Progress, checkpoint json.RawMessage) error {
	if r.timer != nil {
		r.timer.Stop()
		r.timer = nil
	}
	if p == nil && checkpoint == nil {
		return nil
	}
	if err := r.sink(ctx, p, checkpoint); err != nil {
		if p != nil && r.pending == p {
			r.pending = nil // not retried: the attempt lost its lease or the store failed
		}
		return err
	}
	if p != nil {
		r.last, r.pending = p.At, nil
	}
	return nil
}

// flush writes the progress report the throttle held back, if any.
func (r *progressReporter) flush(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.writeLocked(ctx, r.pending, nil)
}

// storeProgressSink is the sink of an attempt the engine runs: the
// store's RecordProgress, fenced by the attempt's worker id and claim.
func storeProgressSink(st contract.Store, job *Job, workerID string) ProgressSink {
	return func(ctx context.Context, p *Progress, checkpoint json.RawMessage) error {
		rec, ok := st.(contract.ProgressRecorder)
		if !ok {
			return fmt.Errorf("backlog: record progress: %w", ErrUnsupported)
		}
		return rec.RecordProgress(ctx, contract.ProgressUpdate{JobID: job.ID, WorkerID: workerID, ClaimSeq: job.ClaimSeq,
			Progress: p, Checkpoint: checkpoint})
	}
}
