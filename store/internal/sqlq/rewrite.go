package sqlq

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/backlogq/backlog/core/contract"
)

// rewriteRead is one job of a RewriteSealed batch with the fence its write
// must pass.
type rewriteRead struct {
	job      *contract.Job // handed to fn, which may change it
	id       int64
	state    contract.State
	claimSeq int64
	version  int64
	errors   []contract.AttemptError // as stored; fn may change job
}

// rewriteWrite is one row RewriteSealed writes.
type rewriteWrite struct {
	read   rewriteRead
	args   string
	result []byte
	errors string
}

// RewriteSealed implements contract.SealedRewriter. It reads the batch with
// its version column (no lock, no transaction), calls fn for each job, and
// then, in one write transaction, updates each row fn changed with
//
//	UPDATE jobs SET args = …, result = …, errors = …, version = version + 1
//	WHERE id = ? AND version = ? AND state = ? AND claim_seq = ?
//
// Every change of a row increments its version (claims, finishes, lease
// extensions, cancels, retries, rescues and this), so an unchanged version
// means an unchanged state, claim_seq, kind and args: the compare-and-set
// the contract asks for, without sending the args back to be compared.
// A row that fails it matches nothing and is skipped.
func (s *Store) RewriteSealed(ctx context.Context, afterID int64, limit int, fn func(j *contract.Job) (*contract.Job, bool, error)) (int64, int, error) {
	if limit < 1 {
		return afterID, 0, fmt.Errorf("sqlq: RewriteSealed: limit %d must be at least 1", limit)
	}
	var read []rewriteRead
	err := s.retry(ctx, func() (err error) {
		read, err = s.readRewrite(ctx, afterID, limit)
		return err
	})
	if err != nil {
		return afterID, 0, err
	}

	var writes []rewriteWrite
	lastID := afterID
	for _, r := range read {
		next, changed, err := fn(r.job)
		if err != nil {
			return afterID, 0, err
		}
		lastID = r.id
		if !changed {
			continue
		}
		w, err := rewriteValues(r, next)
		if err != nil {
			return afterID, 0, err
		}
		writes = append(writes, w)
	}
	if len(writes) == 0 {
		return lastID, 0, nil
	}

	n := 0
	err = s.tx(ctx, func(c Conn) error {
		n = 0
		for _, w := range writes {
			b := newBuilder(s.d, 7)
			var result any
			if w.result != nil {
				result = w.result
			}
			b.w("UPDATE ", s.t.Jobs, " SET args = ", b.argT(w.args, TypeJSON), ", result = ", b.argT(result, TypeBytes),
				", errors = ", b.argT(w.errors, TypeJSON), ", version = version + 1 WHERE id = ", b.arg(w.read.id),
				" AND version = ", b.arg(w.read.version), " AND state = ", b.arg(string(w.read.state)),
				" AND claim_seq = ", b.arg(w.read.claimSeq))
			res, err := c.Exec(ctx, b.String(), b.args...)
			if err != nil {
				return err
			}
			k, err := res.RowsAffected()
			if err != nil {
				return err
			}
			n += int(k)
		}
		return nil
	})
	if err != nil {
		return afterID, 0, err
	}
	return lastID, n, nil
}

// readRewrite reads up to limit jobs above afterID that are not running,
// by id, with their versions.
func (s *Store) readRewrite(ctx context.Context, afterID int64, limit int) ([]rewriteRead, error) {
	b := newBuilder(s.d, 2)
	b.w("SELECT ", JobColumns, ", version FROM ", s.t.Jobs, " WHERE id > ", b.arg(afterID),
		" AND state <> 'running' ORDER BY id LIMIT ", b.arg(limit))
	rows, err := s.db.Query(ctx, b.String(), b.args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []rewriteRead
	for rows.Next() {
		var version int64
		j, err := ScanJob(withVersion{rows, &version})
		if err != nil {
			return nil, err
		}
		out = append(out, rewriteRead{job: j, id: j.ID, state: j.State, claimSeq: j.ClaimSeq, version: version, errors: slices.Clone(j.Errors)})
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return out, rows.Close()
}

// withVersion scans JobColumns followed by the version column.
type withVersion struct {
	rows    Rows
	version *int64
}

func (w withVersion) Scan(dest ...any) error {
	return w.rows.Scan(append(dest, w.version)...)
}

// rewriteValues checks what fn returned for the job read and encodes the
// columns to write.
func rewriteValues(r rewriteRead, next *contract.Job) (rewriteWrite, error) {
	id := r.id
	switch {
	case next == nil:
		return rewriteWrite{}, fmt.Errorf("sqlq: RewriteSealed: job %d: changed, but no job returned", id)
	case !json.Valid(next.Args):
		return rewriteWrite{}, fmt.Errorf("sqlq: RewriteSealed: job %d: the new args are not valid JSON", id)
	case len(next.Errors) != len(r.errors):
		return rewriteWrite{}, fmt.Errorf("sqlq: RewriteSealed: job %d: %d error entries returned for %d stored; entries are rewritten, never added or dropped", id, len(next.Errors), len(r.errors))
	}
	// Only the text is fn's: the rest of each entry is written back as it
	// was read (the fence makes sure it still is).
	var errs strings.Builder
	errs.WriteByte('[')
	for i, e := range r.errors {
		e.Error, e.Trace = next.Errors[i].Error, next.Errors[i].Trace
		enc, err := EncodeError(e)
		if err != nil {
			return rewriteWrite{}, fmt.Errorf("sqlq: RewriteSealed: job %d: encode error entry %d: %w", id, i, err)
		}
		if i > 0 {
			errs.WriteByte(',')
		}
		errs.WriteString(enc)
	}
	errs.WriteByte(']')
	return rewriteWrite{read: r, args: string(next.Args), result: next.Result, errors: errs.String()}, nil
}
