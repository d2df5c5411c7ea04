package contract

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"time"
	"unicode/utf8"
)

// Bounds of what a running job records about itself (ProgressRecorder).
const (
	// MaxProgressMessageLen is the most bytes of UTF-8 in a
	// Progress.Message.
	MaxProgressMessageLen = 256
	// MaxCheckpointBytes is the most bytes of JSON in a job's Checkpoint.
	MaxCheckpointBytes = 64 << 10
)

// Progress is how far a running attempt says it got: a percentage and a
// short message for people, stamped with the time it was recorded.
type Progress struct {
	// Percent is 0 to 100 (inclusive); fractions are kept.
	Percent float64 `json:"percent"`
	// Message is at most MaxProgressMessageLen bytes of UTF-8; may be empty.
	Message string `json:"message,omitempty"`
	// At is when it was recorded (UTC, microseconds).
	At time.Time `json:"at"`
}

// Validate returns an error wrapping ErrInvalidArgument when p's Percent
// is not a number within 0..100, its Message is longer than
// MaxProgressMessageLen bytes or not UTF-8, or its At is zero.
func (p *Progress) Validate() error {
	if math.IsNaN(p.Percent) || p.Percent < 0 || p.Percent > 100 {
		return fmt.Errorf("progress percent %v is not within 0..100: %w", p.Percent, ErrInvalidArgument)
	}
	if len(p.Message) > MaxProgressMessageLen {
		return fmt.Errorf("progress message of %d bytes is longer than %d: %w", len(p.Message), MaxProgressMessageLen, ErrInvalidArgument)
	}
	if !utf8.ValidString(p.Message) {
		return fmt.Errorf("progress message is not UTF-8: %w", ErrInvalidArgument)
	}
	if p.At.IsZero() {
		return fmt.Errorf("progress has no time: %w", ErrInvalidArgument)
	}
	return nil
}

// ValidateCheckpoint returns an error wrapping ErrInvalidArgument when cp
// is not one valid JSON value or is longer than MaxCheckpointBytes.
func ValidateCheckpoint(cp json.RawMessage) error {
	if len(cp) > MaxCheckpointBytes {
		return fmt.Errorf("checkpoint of %d bytes is larger than %d: %w", len(cp), MaxCheckpointBytes, ErrInvalidArgument)
	}
	if !json.Valid(cp) {
		return fmt.Errorf("checkpoint is not valid JSON: %w", ErrInvalidArgument)
	}
	return nil
}

// IsNullJSON reports whether raw is the JSON literal null (whitespace
// around it allowed): a checkpoint of null clears the job's checkpoint.
func IsNullJSON(raw json.RawMessage) bool {
	return bytes.Equal(bytes.TrimSpace(raw), []byte("null"))
}

// ProgressUpdate is one write a running execution makes about itself.
// JobID, WorkerID and ClaimSeq are the fence, as for an Outcome.
type ProgressUpdate struct {
	JobID    int64
	WorkerID string // fence: the worker that claimed the job
	ClaimSeq int64  // fence: the job's ClaimSeq as that claim returned it
	// Progress replaces the job's progress; nil leaves it as it is.
	Progress *Progress
	// Checkpoint replaces the job's checkpoint (valid JSON, at most
	// MaxCheckpointBytes); nil leaves it as it is and the JSON literal
	// null clears it (Job.Checkpoint nil).
	Checkpoint json.RawMessage
}

// Validate returns an error wrapping ErrInvalidArgument when u sets
// neither Progress nor Checkpoint, or sets one out of its bounds
// (Progress.Validate, ValidateCheckpoint).
func (u *ProgressUpdate) Validate() error {
	if u.Progress == nil && u.Checkpoint == nil {
		return fmt.Errorf("job %d: progress update sets neither progress nor checkpoint: %w", u.JobID, ErrInvalidArgument)
	}
	if u.Progress != nil {
		if err := u.Progress.Validate(); err != nil {
			return fmt.Errorf("job %d: %w", u.JobID, err)
		}
	}
	if u.Checkpoint != nil {
		if err := ValidateCheckpoint(u.Checkpoint); err != nil {
			return fmt.Errorf("job %d: %w", u.JobID, err)
		}
	}
	return nil
}

// ProgressRecorder is the capability to record, for a running job, its
// progress and a checkpoint its next attempt receives.
//
// RecordProgress writes u.Progress (when set) and u.Checkpoint (when set;
// null clears it) on job u.JobID, fenced like Finish: only when the job
// is still running, held by u.WorkerID at u.ClaimSeq. When the fence
// fails it changes nothing and returns an error wrapping ErrLeaseLost
// (storetest rules progress/stale-claim-seq-is-lease-lost,
// progress/other-worker-is-lease-lost, progress/not-running-is-lease-lost),
// for a missing job too. An update out of its bounds (ProgressUpdate.Validate)
// returns an error wrapping ErrInvalidArgument and changes nothing
// (progress/bounds-are-checked). A store keeps Progress.At's instant
// (UTC, microseconds) and returns the stored values from Get, List and
// Claim (progress/get-and-list-return-them).
//
// Progress belongs to one attempt: every claim clears it
// (progress/cleared-at-claim). The checkpoint belongs to the job's step:
// it survives every outcome but a continuation (a retry, a snooze, a
// rescue, a hand-back, a completion, a cancel, a manual retry), so the
// next claim returns it (progress/checkpoint-survives-retry-and-rescue),
// and OutcomeContinue, which starts the job's next step, clears it
// (progress/continue-clears-checkpoint).
type ProgressRecorder interface {
	RecordProgress(ctx context.Context, u ProgressUpdate) error
}
