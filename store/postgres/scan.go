package postgres

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/backlogq/backlog/core/contract"
	"github.com/backlogq/backlog/store/internal/sqlq"
	"github.com/jackc/pgx/v5"
)

// pgxRows exposes the pgx.Rows under a sqlq.Rows made by pgConn, so the hot
// paths scan with pgx's typed decoders instead of database/sql scanners.
func pgxRows(r sqlq.Rows) (pgx.Rows, bool) {
	pr, ok := r.(rows)
	return pr.Rows, ok
}

// scanJobPgx scans one row holding sqlq.JobColumns with pgx's native
// decoders (about half the allocations of sqlq.ScanJob's sql.Scanner path).
// extra trailing columns are discarded.
func scanJobPgx(r pgx.Rows, extra int) (*contract.Job, error) {
	var (
		j                                    contract.Job
		args, tags, meta, errs               []byte
		state                                string
		priority                             int16
		attempt, maxAtt                      int32
		deadline, attempted, finished, lease *time.Time
		uniqueKey, workerID, part            *string
		progress, checkpoint                 []byte
		deps                                 sqlq.DepFields
	)
	dest := append([]any{&j.ID, &j.Queue, &j.Kind, &args, &priority, &state, &attempt, &maxAtt,
		&j.RunAt, &deadline, &uniqueKey, &tags, &meta, &errs, &j.Result, &j.CreatedAt, &attempted, &finished, &workerID, &lease, &j.ClaimSeq, &part,
		&progress, &checkpoint}, deps.Dest()...)
	var sink any
	for range extra {
		dest = append(dest, &sink)
	}
	if err := r.Scan(dest...); err != nil {
		return nil, err
	}
	deps.Set(&j)
	j.Args = args
	j.Priority, j.Attempt, j.MaxAttempts = int(priority), int(attempt), int(maxAtt)
	j.State = contract.State(state)
	j.RunAt, j.CreatedAt = contract.UTC(j.RunAt), contract.UTC(j.CreatedAt)
	j.Deadline, j.AttemptedAt, j.FinishedAt, j.LeaseUntil = utcPtr(deadline), utcPtr(attempted), utcPtr(finished), utcPtr(lease)
	if err := sqlq.DecodeProgress(&j, progress, checkpoint); err != nil {
		return nil, err
	}
	if uniqueKey != nil {
		j.UniqueKey = *uniqueKey
	}
	if workerID != nil {
		j.WorkerID = *workerID
	}
	if part != nil {
		j.PartitionKey = *part
	}
	if tags != nil {
		if err := json.Unmarshal(tags, &j.Tags); err != nil {
			return nil, fmt.Errorf("postgres: job %d: decode tags: %w", j.ID, err)
		}
	}
	if meta != nil {
		if err := json.Unmarshal(meta, &j.Metadata); err != nil {
			return nil, fmt.Errorf("postgres: job %d: decode metadata: %w", j.ID, err)
		}
	}
	if len(errs) > 2 { // "[]" is the empty history
		if err := json.Unmarshal(errs, &j.Errors); err != nil {
			return nil, fmt.Errorf("postgres: job %d: decode errors: %w", j.ID, err)
		}
		if len(j.Errors) == 0 {
			j.Errors = nil
		}
	}
	return &j, nil
}

func utcPtr(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return contract.UTC(*t)
}
