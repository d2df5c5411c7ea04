package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/backlogq/backlog/core"
)

// The progress protocol of shell handlers (docs/cli.md): the command
// appends lines of JSON to the file $BACKLOG_PROGRESS_FILE names, each an
// object with percent (0..100) and message, checkpoint (any JSON value),
// or both; the engine reads the lines while the command runs and once
// more when it exits, and the job's next attempt gets the checkpoint in
// $BACKLOG_JOB_CHECKPOINT.
const (
	progressFileEnv = "BACKLOG_PROGRESS_FILE"
	checkpointEnv   = "BACKLOG_JOB_CHECKPOINT"
	// progressPoll is how often the progress file is read while the
	// command runs.
	progressPoll = 500 * time.Millisecond
	// maxProgressLine bounds one line of the progress file: the largest
	// checkpoint plus room for the rest. A longer line is skipped.
	maxProgressLine = core.MaxCheckpointBytes + 4<<10
)

// progressLine is one line of the progress file.
type progressLine struct {
	Percent    *float64        `json:"percent"`
	Message    string          `json:"message"`
	Checkpoint json.RawMessage `json:"checkpoint"`
}

// progressReader applies the complete lines appended to a progress file
// since its last read, in order.
type progressReader struct {
	path    string
	kind    string
	jobID   int64
	log     *slog.Logger // nil: no warnings
	off     int64        // bytes of the file read so far
	partial []byte       // a line not yet ended by a newline
	skip    bool         // the current line is over maxProgressLine: drop it up to its newline
}

// watch reads the progress file every progressPoll until stop is closed,
// then once more, and returns when done.
func (r *progressReader) watch(ctx context.Context, stop <-chan struct{}, done *sync.WaitGroup) {
	defer done.Done()
	t := time.NewTicker(progressPoll)
	defer t.Stop()
	for {
		select {
		case <-stop:
			r.read(ctx, true)
			return
		case <-t.C:
			r.read(ctx, false)
		}
	}
}

// read applies the lines appended since the last read; final applies a
// last line without its newline too.
func (r *progressReader) read(ctx context.Context, final bool) {
	f, err := os.Open(r.path)
	if err != nil {
		r.warn("progress file unreadable", err)
		return
	}
	defer f.Close()
	if _, err := f.Seek(r.off, io.SeekStart); err != nil {
		r.warn("progress file unreadable", err)
		return
	}
	buf := make([]byte, 32<<10)
	for {
		n, err := f.Read(buf)
		r.off += int64(n)
		r.feed(ctx, buf[:n])
		if err != nil {
			if !errors.Is(err, io.EOF) {
				r.warn("progress file unreadable", err)
			}
			break
		}
	}
	if final && len(r.partial) > 0 && !r.skip {
		r.apply(ctx, r.partial)
		r.partial = nil
	}
}

// feed splits b into lines and applies each complete one.
func (r *progressReader) feed(ctx context.Context, b []byte) {
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			if !r.skip {
				r.partial = append(r.partial, b...)
				if len(r.partial) > maxProgressLine {
					r.warn("progress line skipped", fmt.Errorf("it is over %d bytes", maxProgressLine))
					r.partial, r.skip = nil, true
				}
			}
			return
		}
		if !r.skip {
			line := append(r.partial, b[:i]...)
			if len(line) > maxProgressLine {
				r.warn("progress line skipped", fmt.Errorf("it is over %d bytes", maxProgressLine))
			} else {
				r.apply(ctx, line)
			}
		}
		r.partial, r.skip = nil, false
		b = b[i+1:]
	}
}

// apply writes one line's progress and checkpoint through the engine.
func (r *progressReader) apply(ctx context.Context, line []byte) {
	line = bytes.TrimSpace(line)
	if len(line) == 0 {
		return
	}
	var pl progressLine
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&pl); err != nil {
		r.warn("progress line skipped", fmt.Errorf("not a JSON object of percent, message and checkpoint: %v", err))
		return
	}
	if pl.Percent == nil && pl.Checkpoint == nil {
		r.warn("progress line skipped", errors.New("it has neither percent nor checkpoint"))
		return
	}
	if pl.Checkpoint != nil {
		if err := core.SaveCheckpoint(ctx, pl.Checkpoint); err != nil {
			r.warn("checkpoint not saved", err)
		}
	}
	if pl.Percent != nil {
		if err := core.ReportProgress(ctx, *pl.Percent, pl.Message); err != nil {
			r.warn("progress not recorded", err)
		}
	}
}

func (r *progressReader) warn(msg string, err error) {
	if r.log != nil {
		r.log.Warn("shell handler: "+msg, "kind", r.kind, "job_id", r.jobID, "err", err)
	}
}
