package mysql

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"

	"github.com/backlogq/backlog/core/contract"
	"github.com/backlogq/backlog/core/storekit"
	"github.com/backlogq/backlog/store/internal/sqlq"
)

// claimDueSQL is the FROM … LIMIT of both claims' reads ({due}): the due
// jobs of one queue, read through claim_idx (queue, pending, priority,
// run_at, id). Equality on queue and pending makes index order claim order,
// so the read stops after LIMIT rows. A job is due when its run_at has come
// and it is untagged or every one of its tags is among the worker's (the
// JSON array bound third), unless the queue is paused or has concurrency
// limits (those take claimLimited); the subquery reads queues by primary
// key and takes no lock, even under FOR UPDATE.
//
// Arguments: queue, now, worker tags (JSON array), queue, limit.
const claimDueSQL = `
FROM {jobs} FORCE INDEX (claim_idx)
WHERE queue = ? AND pending = 1 AND run_at <= ?
  AND (tags IS NULL OR JSON_CONTAINS(?, tags))
  AND NOT EXISTS (SELECT 1 FROM {queues} WHERE name = ? AND (paused = TRUE OR limited = TRUE))
ORDER BY priority, run_at, id
LIMIT ?`

// claimSkipLockedSQL reads and locks the due jobs for the SKIP LOCKED
// claim: rows other claimers hold are passed over, not waited for. At READ
// COMMITTED it locks only the rows it returns (no gap locks).
//
// Arguments: those of claimDueSQL.
const claimSkipLockedSQL = `
SELECT {columns}
{due}
FOR UPDATE SKIP LOCKED`

// limitedClaimSQL moves the candidates a limited claim took to running,
// by primary key, those still pending, stamping a version token on them
// (stampedSQL tells which, when not all were).
//
// Arguments: token, worker_id, attempted_at, lease_until, then the ids (%s).
const limitedClaimSQL = `
UPDATE {jobs}
SET state = 'running', attempt = attempt + 1, claim_seq = claim_seq + 1, version = ?,
    worker_id = ?, attempted_at = ?, lease_until = ?, progress = NULL
WHERE id IN (%s) AND pending = 1`

// claimLockedSQL moves the jobs claimSkipLockedSQL locked to running, by
// primary key.
//
// Arguments: worker_id, attempted_at, lease_until, then the ids (%s).
const claimLockedSQL = `
UPDATE {jobs}
SET state = 'running', attempt = attempt + 1, claim_seq = claim_seq + 1, version = version + 1,
    worker_id = ?, attempted_at = ?, lease_until = ?, progress = NULL
WHERE id IN (%s)`

// claimCandidatesSQL reads the optimistic claim's candidates, with their
// versions, without locks.
//
// Arguments: those of claimDueSQL.
const claimCandidatesSQL = `
SELECT {columns}, version
{due}`

// claimCASSQL is the optimistic claim's compare-and-set: by primary key, it
// moves to running the candidates whose version is still the one read
// (%[2]s binds each id's) and that are still due, and stamps a random
// version token on them, so that stampedSQL can tell which it won.
//
// Arguments: token, worker_id, attempted_at, lease_until, the ids (%[1]s),
// (id, version) per candidate (%[2]s), now.
const claimCASSQL = `
UPDATE {jobs}
SET state = 'running', attempt = attempt + 1, claim_seq = claim_seq + 1, version = ?,
    worker_id = ?, attempted_at = ?, lease_until = ?, progress = NULL
WHERE id IN (%[1]s)
  AND version = CASE id %[2]s END
  AND pending = 1 AND run_at <= ?`

// stampedSQL reads which of the named rows carry a version token a
// compare-and-set (claimCASSQL, finishUpdateSQL) stamped, by primary key.
//
// Arguments: token, then the ids (%s).
const stampedSQL = `SELECT id FROM {jobs} WHERE version = ? AND id IN (%s)`

// limitedCandidatesSQL reads, under the queue's lock, the due jobs a
// claim of a queue with limits may take, in claim order, leaving out the
// kinds and partition keys whose limit is reached ({full}: "AND kind NOT
// IN (…)" and "AND (partition_key IS NULL OR partition_key NOT IN (…))"
// when there are any). The last %s is a locking clause, empty: see
// claimLimited.
//
// The first %s adds a column after the job's (ReadMany's read number,
// or nothing). The next two pick the index and the rows: "claim_idx" and
// "pending = 1", or, for one partition key of a fair queue, "fair_idx"
// and "fair_key = ?" (the pending jobs with that key).
//
// Arguments: queue, [partition key,] now, worker tags (JSON array), the
// full kinds, the full partition keys, lowest and highest priority,
// limit.
const limitedCandidatesSQL = `
SELECT {columns}%s
FROM {jobs} FORCE INDEX (%s)
WHERE queue = ? AND %s AND run_at <= ?
  AND (tags IS NULL OR JSON_CONTAINS(?, tags)) %s%s
LIMIT ?%s`

// Priorities and order of a limited claim's candidate read: every
// priority in claim order, or one (an aging claim's level) in run_at
// order. MariaDB turns "priority BETWEEN 5 AND 5" into an equality yet
// still sorts the whole range for ORDER BY priority, run_at, id ("Using
// filesort": 12 ms a read of 100 among 20,000 due jobs); with the
// equality spelt out and ORDER BY run_at, id it walks the index.
const (
	limitedAllPriorities = " AND priority BETWEEN ? AND ?\nORDER BY priority, run_at, id"
	limitedOnePriority   = " AND priority = ?\nORDER BY run_at, id"
)

// claimArgs are the arguments of claimDueSQL.
func (s *Store) claimArgs(p contract.ClaimParams, limit int) []any {
	return []any{p.Queue, s.d.Time(p.Now), sqlq.TagsArg(p.Tags), p.Queue, limit}
}

// Claim moves up to p.Limit due jobs of p.Queue to running for p.WorkerID
// with the configured strategy and returns them in claim order (priority,
// run_at, id). A paused queue yields no jobs and a nil error. Deadlocks and
// lock wait timeouts are retried inside.
func (s *Store) Claim(ctx context.Context, p contract.ClaimParams) ([]*contract.Job, error) {
	if p.Limit < 1 {
		return nil, fmt.Errorf("mysql: claim limit %d is below 1: %w", p.Limit, contract.ErrInvalidArgument)
	}
	var out []*contract.Job
	err := s.retry(ctx, func() (err error) {
		if s.strategy == contract.StrategySkipLocked {
			err = s.sdb.InTx(ctx, func(c sqlq.Conn) (err error) {
				if s.LimitedHint(p.Queue) {
					// Limited at the last claim: straight to the limited
					// path, whose lock of the record says whether it
					// still is.
					var limited bool
					if out, limited, err = s.claimLimited(ctx, c, p); err != nil || limited {
						return err
					}
					s.SetLimitedHint(p.Queue, false) // limits lifted since
					out, err = s.claimSkipLocked(ctx, c, p)
					return err
				}
				out, err = s.claimSkipLocked(ctx, c, p)
				if err != nil || len(out) > 0 {
					return err
				}
				// Nothing claimed: the queue may have limits, which
				// claimDueSQL leaves to claimLimited.
				limited, err := s.QueueLimited(ctx, c, p.Queue)
				if err != nil {
					return err
				}
				s.SetLimitedHint(p.Queue, limited)
				if limited {
					out, _, err = s.claimLimited(ctx, c, p)
				}
				return err
			})
			return err
		}
		if !s.LimitedHint(p.Queue) {
			out, err = s.claimOptimistic(ctx, p)
			if err != nil || len(out) > 0 {
				return err
			}
			limited, err := s.QueueLimited(ctx, s.sdb, p.Queue)
			if err != nil || !limited {
				return err
			}
			s.SetLimitedHint(p.Queue, true)
		}
		// Limited (at the last claim, or just now): the limited path,
		// whose lock of the record says whether it still is.
		limited := false
		err = s.sdb.InTx(ctx, func(c sqlq.Conn) (err error) {
			out, limited, err = s.claimLimited(ctx, c, p)
			return err
		})
		if err != nil || limited {
			return err
		}
		s.SetLimitedHint(p.Queue, false) // limits lifted since
		out, err = s.claimOptimistic(ctx, p)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// claimLimited is the claim of a queue with concurrency limits, in the
// READ COMMITTED transaction c, for both strategies: it locks the queue's
// record (SELECT … FOR UPDATE), so the limited claims of one queue, from
// every process, run one at a time; counts the queue's running jobs per
// kind and partition key (through lease_idx); and takes due jobs in claim order
// within the room left (limitedCandidatesSQL, then limitedClaimSQL by
// primary key), leaving out kinds and partitions that are full. Under the
// queue's lock no other claim of the queue competes for its rows, so the
// candidates are read without locks (locking them cost a limited claim
// of 100 about a fifth of its time) and claimed with a version token,
// which tells the rare row an admin write changed meanwhile. On a Galera
// node a claim that took jobs also writes the record (touchQueueSQL), since
// the lock holds on this node only. The commit releases the record.
func (s *Store) claimLimited(ctx context.Context, c sqlq.Conn, p contract.ClaimParams) ([]*contract.Job, bool, error) {
	room, err := s.LockClaimRoom(ctx, c, p.Queue, contract.UTC(p.Now))
	if err != nil || room == nil {
		return nil, false, err
	}
	lock := "" // under the queue's lock no other claim competes: see take
	// readQuery is one candidate read; with tag ≥ 0 its rows carry the
	// number tag after the job's columns (ReadMany's UNION ALL).
	readQuery := func(f storekit.CandidateFilter, n, tag int) (string, []any) {
		fullKinds, fullParts := f.FullKinds, f.FullParts
		index, rows, args := "claim_idx", "pending = 1", []any{p.Queue}
		if f.Partition != "" {
			index, rows, args = "fair_idx", "fair_key = ?", append(args, f.Partition)
		}
		args = append(args, s.d.Time(p.Now), sqlq.TagsArg(p.Tags))
		full := ""
		if len(fullKinds) > 0 {
			full += " AND kind NOT IN (" + marks(len(fullKinds)) + ")"
			for _, k := range fullKinds {
				args = append(args, k)
			}
		}
		if len(fullParts) > 0 {
			full += " AND (partition_key IS NULL OR partition_key NOT IN (" + marks(len(fullParts)) + "))"
			for _, k := range fullParts {
				args = append(args, k)
			}
		}
		order := limitedAllPriorities
		if f.Priority != 0 {
			order, args = limitedOnePriority, append(args, f.Priority)
		} else {
			lo, hi := f.PriorityRange()
			args = append(args, lo, hi)
		}
		args = append(args, n)
		extra := ""
		if tag >= 0 {
			extra = ", " + strconv.Itoa(tag) + " AS read_no"
		}
		return fmt.Sprintf(s.q.limitedCandidates, extra, index, rows, full, order, lock), args
	}
	candidate := func(j *contract.Job) storekit.LimitCandidate {
		return storekit.LimitCandidate{ClaimCandidate: storekit.ClaimCandidate{ID: j.ID, Kind: j.Kind, Partition: j.PartitionKey, Priority: j.Priority, RunAt: j.RunAt}, Job: j}
	}
	read := func(f storekit.CandidateFilter, n int) ([]storekit.LimitCandidate, error) {
		q, args := readQuery(f, n, -1)
		jobs, err := sqlq.ScanJobs(c.Query(ctx, q, args...))
		if err != nil {
			return nil, err
		}
		out := make([]storekit.LimitCandidate, len(jobs))
		for i, j := range jobs {
			out[i] = candidate(j)
		}
		return out, nil
	}
	// readMany runs the reads as one UNION ALL of them, each
	// parenthesized with its own ORDER BY, LIMIT and lock, its rows
	// numbered (the driver cannot pipeline statements).
	readMany := func(fs []storekit.CandidateFilter, ns []int) ([][]storekit.LimitCandidate, error) {
		var (
			b    strings.Builder
			args []any
		)
		for i, f := range fs {
			q, a := readQuery(f, ns[i], i)
			if i > 0 {
				b.WriteString(" UNION ALL ")
			}
			b.WriteString("(" + q + ")")
			args = append(args, a...)
		}
		rows, err := c.Query(ctx, b.String(), args...)
		if err != nil {
			return nil, err
		}
		defer rows.Close()
		out := make([][]storekit.LimitCandidate, len(fs))
		for rows.Next() {
			var no int64
			j, err := sqlq.ScanJob(numbered{rows, &no})
			if err != nil {
				return nil, err
			}
			if no < 0 || int(no) >= len(fs) {
				return nil, fmt.Errorf("mysql: limited claim read number %d of %d", no, len(fs))
			}
			out[no] = append(out[no], candidate(j))
		}
		if err := rows.Err(); err != nil {
			return nil, err
		}
		return out, rows.Close()
	}
	take := func(cands []storekit.LimitCandidate) ([]*contract.Job, error) {
		// The candidates were read without locks: a row an admin write
		// (a cancel, a delete) changed since is left alone by the
		// pending = 1 test, and the version token tells which were
		// claimed when not all were.
		token := versionToken()
		args := make([]any, 0, 4+len(cands))
		args = append(args, token, p.WorkerID, s.d.Time(p.Now), s.d.Time(p.LeaseUntil))
		ids := make([]int64, len(cands))
		for i, lc := range cands {
			args, ids[i] = append(args, lc.ID), lc.ID
		}
		res, err := c.Exec(ctx, fmt.Sprintf(s.q.limitedClaim, marks(len(cands))), args...)
		if err != nil {
			return nil, err
		}
		n, err := res.RowsAffected()
		if err != nil {
			return nil, err
		}
		won, err := s.stamped(ctx, c, token, ids, n)
		if err != nil {
			return nil, err
		}
		out := make([]*contract.Job, 0, len(cands))
		for _, lc := range cands {
			if won[lc.ID] {
				claimed(lc.Job, p)
				out = append(out, lc.Job)
			}
		}
		return out, nil
	}
	parts := func(after string, n int) ([]string, error) {
		return s.FairPartitions(ctx, c, p.Queue, "fair_key", "", after, n)
	}
	out, err := storekit.ClaimLimited(p.Limit, room, storekit.LimitedReads{Read: read, ReadMany: readMany, Take: take, Partitions: parts})
	if err != nil {
		return nil, true, err
	}
	if s.server.galera && len(out) > 0 {
		// The lock above is this node's alone: writing the record makes
		// the limits hold across the cluster (touchQueueSQL).
		now := s.d.Time(p.Now)
		if _, err := c.Exec(ctx, s.q.touchQueue, now, now, p.Queue); err != nil {
			return nil, true, err
		}
	}
	return out, true, s.SaveClaimRoom(ctx, c, p.Queue, room, contract.UTC(p.Now))
}

// claimSkipLocked reads and locks up to p.Limit due jobs
// (claimSkipLockedSQL), moves them to running (claimLockedSQL) and returns
// them as they now are, in the caller's READ COMMITTED transaction.
func (s *Store) claimSkipLocked(ctx context.Context, c sqlq.Conn, p contract.ClaimParams) ([]*contract.Job, error) {
	jobs, err := sqlq.ScanJobs(c.Query(ctx, s.q.claimSkipLocked, s.claimArgs(p, p.Limit)...))
	if err != nil || len(jobs) == 0 {
		return nil, err
	}
	args := make([]any, 0, 3+len(jobs))
	args = append(args, p.WorkerID, s.d.Time(p.Now), s.d.Time(p.LeaseUntil))
	for _, j := range jobs {
		args = append(args, j.ID)
	}
	res, err := c.Exec(ctx, fmt.Sprintf(s.q.claimLocked, marks(len(jobs))), args...)
	if err != nil {
		return nil, err
	}
	if n, err := res.RowsAffected(); err != nil {
		return nil, err
	} else if int(n) != len(jobs) {
		return nil, fmt.Errorf("mysql: claim updated %d of %d locked rows", n, len(jobs))
	}
	for _, j := range jobs {
		claimed(j, p)
	}
	return jobs, nil
}

// claimed sets on j what a claim wrote.
func claimed(j *contract.Job, p contract.ClaimParams) {
	j.State = contract.StateRunning
	j.Attempt++
	j.ClaimSeq++
	j.WorkerID = p.WorkerID
	j.AttemptedAt = contract.UTC(p.Now)
	j.LeaseUntil = contract.UTC(p.LeaseUntil)
	j.Progress = nil
}

// candidate is a job read by the optimistic claim with its version.
type candidate struct {
	job     *contract.Job
	version int64
}

// claimOptimistic reads candidates without locks (claimCandidatesSQL), then
// claims them with one compare-and-set UPDATE per round in autocommit
// (claimCASSQL): a row whose version moved was taken (or changed) by
// someone else and is skipped. Candidates are read again at most a few
// times while races are lost and jobs are still wanted.
func (s *Store) claimOptimistic(ctx context.Context, p contract.ClaimParams) ([]*contract.Job, error) {
	want := p.Limit
	var out []*contract.Job
	for round := 0; round < 4 && want > 0; round++ {
		fetch := want + want/4 + 1 // over-fetch a little to absorb lost races
		cands, err := s.candidates(ctx, p, fetch)
		if err != nil {
			if len(out) > 0 {
				break
			}
			return nil, err
		}
		lost := false
		for len(cands) > 0 && want > 0 {
			take := cands[:min(want, len(cands))]
			cands = cands[len(take):]
			got, err := s.casClaim(ctx, p, take)
			if err != nil {
				if len(out) > 0 {
					// Keep what we won (those claims committed); the update
					// that failed took no effect and the next claim will
					// meet its cause again.
					storekit.SortClaimOrder(out)
					return out, nil
				}
				return nil, err
			}
			out = append(out, got...)
			want -= len(got)
			if len(got) < len(take) {
				lost = true
			}
		}
		if !lost {
			break // every candidate was ours: the queue has no more due jobs
		}
	}
	storekit.SortClaimOrder(out)
	return out, nil
}

// candidates reads up to fetch due jobs, with their versions, in claim
// order, without locks (claimCandidatesSQL).
func (s *Store) candidates(ctx context.Context, p contract.ClaimParams, fetch int) ([]candidate, error) {
	rows, err := s.sdb.Query(ctx, s.q.claimCandidates, s.claimArgs(p, fetch)...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []candidate
	for rows.Next() {
		var cd candidate
		j, err := sqlq.ScanJob(withExtra{rows, []any{&cd.version}})
		if err != nil {
			return nil, err
		}
		cd.job = j
		out = append(out, cd)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return out, rows.Close()
}

// casClaim claims the candidates whose version is unchanged and that are
// still due (claimCASSQL), and returns them as they now are. When the
// update touched fewer rows than it was given, the token it stamped says
// which it won (stampedSQL): no other writer can have moved a row just
// claimed, it is running under this claim's lease.
func (s *Store) casClaim(ctx context.Context, p contract.ClaimParams, take []candidate) ([]*contract.Job, error) {
	token := versionToken()
	args := make([]any, 0, 5+3*len(take))
	args = append(args, token, p.WorkerID, s.d.Time(p.Now), s.d.Time(p.LeaseUntil))
	ids := make([]int64, len(take))
	for k, cd := range take {
		ids[k] = cd.job.ID
		args = append(args, cd.job.ID)
	}
	for _, cd := range take {
		args = append(args, cd.job.ID, cd.version)
	}
	args = append(args, s.d.Time(p.Now))
	res, err := s.sdb.Exec(ctx, fmt.Sprintf(s.q.claimCAS, marks(len(take)), whens(len(take))), args...)
	if err != nil {
		return nil, err
	}
	n, err := res.RowsAffected()
	if err != nil || n == 0 {
		return nil, err
	}
	won, err := s.stamped(ctx, s.sdb, token, ids, n)
	if err != nil {
		return nil, err
	}
	var out []*contract.Job
	for _, cd := range take {
		if won[cd.job.ID] {
			claimed(cd.job, p)
			out = append(out, cd.job)
		}
	}
	return out, nil
}

// versionToken is a random version for a compare-and-set to stamp on the
// rows it changes, far from any count version + 1 reaches.
func versionToken() int64 { return rand.Int64() | 1<<62 }

// stamped returns which of ids an update that stamped token on n of them
// changed: none or all when n says so, else those stampedSQL finds
// carrying it, read on c.
func (s *Store) stamped(ctx context.Context, c sqlq.Conn, token int64, ids []int64, n int64) (map[int64]bool, error) {
	won := make(map[int64]bool, len(ids))
	switch {
	case n == 0:
		return won, nil
	case int(n) == len(ids):
		for _, id := range ids {
			won[id] = true
		}
		return won, nil
	}
	args := make([]any, 0, 1+len(ids))
	args = append(args, token)
	for _, id := range ids {
		args = append(args, id)
	}
	got, err := sqlq.ScanIDs(c.Query(ctx, fmt.Sprintf(s.q.stamped, marks(len(ids))), args...))
	if err != nil {
		return nil, err
	}
	for _, id := range got {
		won[id] = true
	}
	return won, nil
}

// numbered scans a row of job columns followed by a read number into the
// job's destinations and no.
type numbered struct {
	sqlq.Rows
	no *int64
}

func (n numbered) Scan(dest ...any) error { return n.Rows.Scan(append(dest, n.no)...) }
