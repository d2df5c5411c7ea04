package sqlq

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/backlogq/backlog/core/contract"
)

// JobColumns is the column list every job SELECT and RETURNING uses, in the
// order ScanJob expects.
const JobColumns = "id, queue, kind, args, priority, state, attempt, max_attempts, run_at, deadline, unique_key, tags, metadata, errors, result, created_at, attempted_at, finished_at, worker_id, lease_until, claim_seq, partition_key, progress, checkpoint, " + DepColumns

// DepColumns are the dependency columns of a job (contract.Dependencies),
// the last of JobColumns: workflow_id, step, on_dependency_failure,
// dep_count, waiting_for and the DependencyEnds counters. dep_count > 0
// says Job.DependsOn is in the dependency table (LoadDependsOn).
const DepColumns = "workflow_id, step, on_dependency_failure, dep_count, waiting_for, deps_completed, deps_cancelled, deps_discarded"

// Scanner is one row of a result: *sql.Rows, *sql.Row and pgx.Rows all
// implement it.
type Scanner interface {
	Scan(dest ...any) error
}

// timeDest decodes a time column: NULL → zero, int64 → unix µs, time.Time,
// or RFC 3339 text; always UTC.
type timeDest struct{ t *time.Time }

func (d timeDest) Scan(src any) error {
	switch v := src.(type) {
	case nil:
		*d.t = time.Time{}
	case int64:
		*d.t = time.UnixMicro(v).UTC()
	case time.Time:
		*d.t = contract.UTC(v)
	case []byte:
		return d.parse(string(v))
	case string:
		return d.parse(v)
	default:
		return fmt.Errorf("sqlq: cannot decode %T as a time", src)
	}
	return nil
}

func (d timeDest) parse(s string) error {
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		*d.t = time.UnixMicro(n).UTC()
		return nil
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02 15:04:05.999999999", "2006-01-02 15:04:05.999999999-07:00"} {
		if t, err := time.Parse(layout, s); err == nil {
			*d.t = contract.UTC(t)
			return nil
		}
	}
	return fmt.Errorf("sqlq: cannot parse time %q", s)
}

// TimeDest returns a scan destination that decodes a time column into *t
// (NULL → zero time; int64 unix µs, time.Time or text → UTC).
func TimeDest(t *time.Time) sql.Scanner { return timeDest{t} }

// bytesDest copies a nullable text or blob column; NULL → nil.
type bytesDest struct{ b *[]byte }

func (d bytesDest) Scan(src any) error {
	switch v := src.(type) {
	case nil:
		*d.b = nil
	case []byte:
		*d.b = append(make([]byte, 0, len(v)), v...)
	case string:
		*d.b = []byte(v)
	default:
		return fmt.Errorf("sqlq: cannot decode %T as bytes", src)
	}
	return nil
}

// ScanJob scans one row holding JobColumns into a Job.
func ScanJob(s Scanner) (*contract.Job, error) {
	var (
		j                          contract.Job
		args, tags, meta, errs     []byte
		result                     []byte
		state                      string
		uniqueKey, workerID, part  sql.NullString
		priority, attempt, maxAtts int64
		progress, checkpoint       []byte
		deps                       DepFields
	)
	err := s.Scan(append([]any{&j.ID, &j.Queue, &j.Kind, bytesDest{&args}, &priority, &state, &attempt, &maxAtts,
		timeDest{&j.RunAt}, timeDest{&j.Deadline}, &uniqueKey, bytesDest{&tags}, bytesDest{&meta}, bytesDest{&errs},
		bytesDest{&result}, timeDest{&j.CreatedAt}, timeDest{&j.AttemptedAt}, timeDest{&j.FinishedAt}, &workerID,
		timeDest{&j.LeaseUntil}, &j.ClaimSeq, &part, bytesDest{&progress}, bytesDest{&checkpoint}}, deps.Dest()...)...)
	if err != nil {
		return nil, err
	}
	deps.Set(&j)
	if err := DecodeProgress(&j, progress, checkpoint); err != nil {
		return nil, err
	}
	j.Args = args
	j.Priority, j.Attempt, j.MaxAttempts = int(priority), int(attempt), int(maxAtts)
	j.State = contract.State(state)
	j.UniqueKey = uniqueKey.String
	j.WorkerID = workerID.String
	j.PartitionKey = part.String
	j.Result = result
	if err := decodeJSONColumns(&j, tags, meta, errs); err != nil {
		return nil, err
	}
	return &j, nil
}

// decodeJSONColumns decodes the tags, metadata and errors columns (JSON
// text; NULL tags or metadata, and the empty history "[]", leave the
// field nil) into j.
func decodeJSONColumns(j *contract.Job, tags, meta, errs []byte) error {
	if tags != nil {
		if err := json.Unmarshal(tags, &j.Tags); err != nil {
			return fmt.Errorf("sqlq: job %d: decode tags: %w", j.ID, err)
		}
	}
	if meta != nil {
		if err := json.Unmarshal(meta, &j.Metadata); err != nil {
			return fmt.Errorf("sqlq: job %d: decode metadata: %w", j.ID, err)
		}
	}
	if len(errs) > 2 { // "[]" is the empty history
		if err := json.Unmarshal(errs, &j.Errors); err != nil {
			return fmt.Errorf("sqlq: job %d: decode errors: %w", j.ID, err)
		}
		if len(j.Errors) == 0 {
			j.Errors = nil
		}
	}
	return nil
}

// DecodeProgress sets j's Progress and Checkpoint from the progress and
// checkpoint columns (JSON text; NULL leaves them nil).
func DecodeProgress(j *contract.Job, progress, checkpoint []byte) error {
	if progress != nil {
		var p contract.Progress
		if err := json.Unmarshal(progress, &p); err != nil {
			return fmt.Errorf("sqlq: job %d: decode progress: %w", j.ID, err)
		}
		p.At = contract.UTC(p.At)
		j.Progress = &p
	}
	if checkpoint != nil {
		j.Checkpoint = checkpoint
	}
	return nil
}

// ClaimedColumns is the column list a claim's RETURNING needs when the
// claim itself sets the rest (ScanClaimed): JobColumns without queue,
// state, attempted_at, worker_id, lease_until and progress (which a
// claim clears). Every column it leaves out costs the single writer of
// SQLite a conversion per claimed job.
const ClaimedColumns = "id, kind, args, priority, attempt, max_attempts, run_at, deadline, unique_key, tags, metadata, errors, result, created_at, finished_at, claim_seq, partition_key, checkpoint, " + DepColumns

// ScanClaimed returns a function that drains rows holding
// ClaimedColumns, the jobs a claim of p.Queue for p.WorkerID at p.Now
// moved to running with lease p.LeaseUntil, and closes them (called as
// ScanClaimed(&p)(c.Query(…))). The columns the claim set are filled from
// p as a read of the row would return them: state running, the times in
// microseconds (the resolution stored) and UTC, a zero time as zero.
func ScanClaimed(p *contract.ClaimParams) func(rows Rows, err error) ([]*contract.Job, error) {
	return func(rows Rows, err error) ([]*contract.Job, error) { return scanClaimed(p, rows, err) }
}

func scanClaimed(p *contract.ClaimParams, rows Rows, err error) ([]*contract.Job, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	attempted, lease := storedTime(p.Now), storedTime(p.LeaseUntil)
	var out []*contract.Job
	for rows.Next() {
		var (
			j                          contract.Job
			args, tags, meta, errs     []byte
			result                     []byte
			uniqueKey, part            sql.NullString
			priority, attempt, maxAtts int64
			checkpoint                 []byte
			deps                       DepFields
		)
		err := rows.Scan(append([]any{&j.ID, &j.Kind, bytesDest{&args}, &priority, &attempt, &maxAtts,
			timeDest{&j.RunAt}, timeDest{&j.Deadline}, &uniqueKey, bytesDest{&tags}, bytesDest{&meta}, bytesDest{&errs},
			bytesDest{&result}, timeDest{&j.CreatedAt}, timeDest{&j.FinishedAt}, &j.ClaimSeq, &part, bytesDest{&checkpoint}}, deps.Dest()...)...)
		if err != nil {
			return nil, err
		}
		deps.Set(&j)
		if checkpoint != nil {
			j.Checkpoint = checkpoint
		}
		j.Queue, j.State, j.WorkerID = p.Queue, contract.StateRunning, p.WorkerID
		j.AttemptedAt, j.LeaseUntil = attempted, lease
		j.Args, j.Result = args, result
		j.Priority, j.Attempt, j.MaxAttempts = int(priority), int(attempt), int(maxAtts)
		j.UniqueKey, j.PartitionKey = uniqueKey.String, part.String
		if err := decodeJSONColumns(&j, tags, meta, errs); err != nil {
			return nil, err
		}
		out = append(out, &j)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return out, rows.Close()
}

// storedTime is t as a store that keeps unix microseconds reads it back:
// truncated to the microsecond, UTC; the zero time stays zero (NULL).
func storedTime(t time.Time) time.Time {
	if t.IsZero() {
		return time.Time{}
	}
	return time.UnixMicro(t.UnixMicro()).UTC()
}

// InsertedJob is the job a fresh insert of p at now stored under id, as a
// read of its row returns it from a store that keeps times in unix
// microseconds (SQLite): what an INSERT … RETURNING of every column would
// give, built without reading the row back. Args, tags and metadata are
// copies; tags and metadata keep their nil-ness (NULL), and their JSON
// round trip is the identity on the UTF-8 text the client admits.
func InsertedJob(id int64, p *contract.InsertParams, now time.Time) *contract.Job {
	return &contract.Job{
		ID:           id,
		Queue:        p.Queue,
		Kind:         p.Kind,
		Args:         append(make([]byte, 0, len(p.Args)), p.Args...),
		Priority:     p.Priority,
		State:        InsertState(p, now),
		MaxAttempts:  p.MaxAttempts,
		RunAt:        storedTime(p.RunAt),
		Deadline:     storedTime(p.Deadline),
		UniqueKey:    p.UniqueKey,
		PartitionKey: p.PartitionKey,
		Tags:         slices.Clone(p.Tags),
		Metadata:     maps.Clone(p.Metadata),
		CreatedAt:    storedTime(now),
	}
}

// ScanJobs drains rows into jobs and closes them.
func ScanJobs(rows Rows, err error) ([]*contract.Job, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*contract.Job
	for rows.Next() {
		j, err := ScanJob(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, j)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return out, rows.Close()
}

// ScanIDs drains rows of one integer column and closes them.
func ScanIDs(rows Rows, err error) ([]int64, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		out = append(out, id)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return out, rows.Close()
}

// jsonOrNil encodes v as JSON text, or nil (NULL) when isNil.
func jsonOrNil(v any, isNil bool) (any, error) {
	if isNil {
		return nil, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return string(b), nil
}

// EncodeTags encodes tags as JSON text; nil stays NULL so it round-trips.
func EncodeTags(tags []string) (any, error) { return jsonOrNil(tags, tags == nil) }

// TagsArg encodes a claim's worker tags as the JSON array text every
// store's claim binds for capability routing (a job is due to the worker
// when each of its tags is in this array); nil is the empty array.
func TagsArg(tags []string) string {
	if len(tags) == 0 {
		return "[]"
	}
	b, _ := json.Marshal(tags) // []string always marshals
	return string(b)
}

// LeaseArgs returns the arguments of a lease extension that names its
// jobs in an IN list and fences each one's claim_seq with a CASE id … END
// (SQLite, MySQL/MariaDB): until (already encoded), the job ids, workerID,
// then (id, claim_seq) per lease.
func LeaseArgs(until any, workerID string, leases []contract.Lease) []any {
	args := make([]any, 0, 2+3*len(leases))
	args = append(args, until)
	for _, l := range leases {
		args = append(args, l.JobID)
	}
	args = append(args, workerID)
	for _, l := range leases {
		args = append(args, l.JobID, l.ClaimSeq)
	}
	return args
}

// EncodeMetadata encodes metadata as JSON text; nil stays NULL.
func EncodeMetadata(m map[string]string) (any, error) { return jsonOrNil(m, m == nil) }

// EncodeError encodes one error-history entry as JSON text.
func EncodeError(e contract.AttemptError) (string, error) {
	e.At, e.StartedAt = contract.UTC(e.At), contract.UTC(e.StartedAt)
	b, err := json.Marshal(e)
	return string(b), err
}

// builder accumulates SQL text and bind arguments with dialect placeholders.
type builder struct {
	d    Dialect
	sb   strings.Builder
	args []any
}

func newBuilder(d Dialect, capArgs int) *builder {
	return &builder{d: d, args: make([]any, 0, capArgs)}
}

// arg binds v and returns its placeholder.
func (b *builder) arg(v any) string {
	b.args = append(b.args, v)
	return b.d.Placeholder(len(b.args))
}

// argT binds v and returns its placeholder cast to t.
func (b *builder) argT(v any, t Type) string { return b.d.Cast(b.arg(v), t) }

func (b *builder) w(s ...string) *builder {
	for _, x := range s {
		b.sb.WriteString(x)
	}
	return b
}

func (b *builder) String() string { return b.sb.String() }

// in binds ids and writes their placeholders, comma-separated and
// parenthesised: the list of an IN condition.
func (b *builder) in(ids []int64) *builder {
	b.w("(")
	for i, id := range ids {
		if i > 0 {
			b.w(",")
		}
		b.w(b.arg(id))
	}
	return b.w(")")
}

// pendingIn is the SQL list of states a claim may take due jobs from. It is
// spelt literally so partial indexes on it match.
const pendingIn = "('scheduled','available','retryable')"

// PendingSpeller is implemented by a Dialect whose partial indexes on
// pending jobs spell the pending states otherwise than
// "state IN ('scheduled','available','retryable')": a database uses such
// an index only for a query that spells its condition the same way, so
// the statements here that read those indexes (DueJobs, DiscardExpired)
// use the dialect's spelling. SQLite's: an OR of equalities (see its
// schema version 12).
type PendingSpeller interface {
	// Pending returns the condition, on the unqualified column state,
	// that a job is pending (scheduled, available or retryable).
	Pending() string
}

// pending is the condition that a job is pending in the spelling of the
// store's dialect (PendingSpeller), by default state IN pendingIn.
func (s *Store) pending() string {
	if p, ok := s.d.(PendingSpeller); ok {
		return p.Pending()
	}
	return "state IN " + pendingIn
}

// finalIn is the SQL list of final states.
const finalIn = "('completed','cancelled','discarded')"

// DepFields receives DepColumns (Dest) and sets a job's dependency fields
// from them (Set). DepCount is dep_count: above 0, the job's DependsOn is
// read from the dependency table (LoadDependsOn).
type DepFields struct {
	WorkflowID                      sql.NullInt64
	Step                            sql.NullString
	Policy                          string
	DepCount, WaitingFor            int64
	Completed, Cancelled, Discarded int64
}

// Dest returns the scan destinations of DepColumns, in order.
func (d *DepFields) Dest() []any {
	return []any{&d.WorkflowID, &d.Step, &d.Policy, &d.DepCount, &d.WaitingFor, &d.Completed, &d.Cancelled, &d.Discarded}
}

// Set copies the fields into j; a job with dependencies gets a non-nil,
// empty DependsOn until LoadDependsOn fills it.
func (d *DepFields) Set(j *contract.Job) {
	j.WorkflowID, j.Step = d.WorkflowID.Int64, d.Step.String
	j.OnDependencyFailure = contract.DependencyPolicy(d.Policy)
	j.WaitingFor = int(d.WaitingFor)
	j.DependencyEnds = contract.DependencyEnds{Completed: int(d.Completed), Cancelled: int(d.Cancelled), Discarded: int(d.Discarded)}
	if d.DepCount > 0 {
		j.DependsOn = make([]int64, 0, d.DepCount)
	}
}
