package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/backlogq/backlog/core/contract"
	"github.com/backlogq/backlog/core/storekit"

	"github.com/jackc/pgx/v5"

	"github.com/backlogq/backlog/store/internal/sqlq"
)

// Claim moves up to p.Limit due jobs of p.Queue to running for p.WorkerID
// and returns them in claim order (priority, run_at, id). A paused queue
// yields no jobs and a nil error. With contract.StrategySkipLocked it is one
// statement; with contract.StrategyOptimistic a candidate read and a
// compare-and-set, repeated a few times when other claimers win races.
func (s *Store) Claim(ctx context.Context, p contract.ClaimParams) ([]*contract.Job, error) {
	if p.Limit < 1 {
		return nil, fmt.Errorf("postgres: claim limit %d is below 1: %w", p.Limit, contract.ErrInvalidArgument)
	}
	now, lease := contract.UTC(p.Now), contract.UTC(p.LeaseUntil)
	hint := s.LimitedHint(p.Queue)
	if hint {
		// Limited at the last claim: go straight to the limited path,
		// whose lock of the record says whether it still is.
		out, limited, err := s.claimIfLimited(ctx, p, false)
		if err != nil || limited {
			return out, err
		}
	}
	var out []*contract.Job
	err := s.retry(ctx, func() (err error) {
		if s.Strategy() == contract.StrategySkipLocked {
			out, err = scanJobs(s.db.Query(ctx, s.q.claimSkipLocked, p.Queue, now, p.Limit, p.WorkerID, lease, sqlq.TagsArg(p.Tags)))
			return err
		}
		out, err = s.claimOptimistic(ctx, p)
		return err
	})
	if err != nil {
		return nil, err
	}
	if len(out) == 0 && !hint {
		// Both claim reads pass over queues with limits: those take
		// claimLimited, asked for only when nothing was claimed.
		out, _, err := s.claimIfLimited(ctx, p, true)
		return out, err
	}
	storekit.SortClaimOrder(out)
	return out, nil
}

// claimOptimistic reads (id, version) candidates without locks and claims
// those whose version is unchanged. A candidate someone else took is
// skipped; the candidates are read again (at most four rounds) while races
// were lost and jobs are still wanted.
func (s *Store) claimOptimistic(ctx context.Context, p contract.ClaimParams) ([]*contract.Job, error) {
	now, lease := contract.UTC(p.Now), contract.UTC(p.LeaseUntil)
	want := p.Limit
	var out []*contract.Job
	for round := 0; round < 4 && want > 0; round++ {
		var ids, versions []int64
		rows, err := s.db.Query(ctx, s.q.claimCandidates, p.Queue, now, want+want/4+1, sqlq.TagsArg(p.Tags))
		err = scanInts(rows, err, 2, func(v []int64) {
			ids, versions = append(ids, v[0]), append(versions, v[1])
		})
		if err != nil {
			return claimedSoFar(out, err)
		}
		if len(ids) == 0 {
			break
		}
		lost := false
		for len(ids) > 0 && want > 0 {
			n := min(want, len(ids))
			got, err := scanJobs(s.db.Query(ctx, s.q.claimCAS, s.planEachCall(now, p.WorkerID, lease, ids[:n], versions[:n])...))
			if err != nil {
				return claimedSoFar(out, err)
			}
			ids, versions = ids[n:], versions[n:]
			out = append(out, got...)
			want -= len(got)
			if len(got) < n {
				lost = true
			}
		}
		if !lost {
			break // every candidate was ours: the queue has no more due jobs
		}
	}
	return out, nil
}

// scanJobs drains rows holding sqlq.JobColumns into jobs and closes them.
func scanJobs(r sqlq.Rows, err error) ([]*contract.Job, error) { return scanJobsExtra(r, err, 0) }

// scanJobsExtra is scanJobs for rows with extra trailing columns after
// sqlq.JobColumns, which are discarded.
func scanJobsExtra(r sqlq.Rows, err error, extra int) ([]*contract.Job, error) {
	if err != nil {
		return nil, err
	}
	defer r.Close()
	var out []*contract.Job
	if pr, ok := pgxRows(r); ok {
		for pr.Next() {
			j, err := scanJobPgx(pr, extra)
			if err != nil {
				return nil, err
			}
			out = append(out, j)
		}
		if err := pr.Err(); err != nil {
			return nil, err
		}
		return out, nil
	}
	for r.Next() {
		var sc sqlq.Scanner = r
		if extra > 0 {
			sc = padScanner{r, extra}
		}
		j, err := sqlq.ScanJob(sc)
		if err != nil {
			return nil, err
		}
		out = append(out, j)
	}
	if err := r.Err(); err != nil {
		return nil, err
	}
	return out, r.Close()
}

// scanInts drains rows of integer columns, calling fn with each row's
// values, and closes them.
func scanInts(r sqlq.Rows, err error, cols int, fn func(v []int64)) error {
	if err != nil {
		return err
	}
	defer r.Close()
	v := make([]int64, cols)
	dest := make([]any, cols)
	for i := range v {
		dest[i] = &v[i]
	}
	for r.Next() {
		if err := r.Scan(dest...); err != nil {
			return err
		}
		fn(v)
	}
	if err := r.Err(); err != nil {
		return err
	}
	return r.Close()
}

// padScanner scans the first columns into the destinations given and
// discards the extra trailing columns.
type padScanner struct {
	r     sqlq.Scanner
	extra int
}

func (p padScanner) Scan(dest ...any) error {
	var sink any
	for range p.extra {
		dest = append(dest, &sink)
	}
	return p.r.Scan(dest...)
}

// claimedSoFar ends an optimistic claim that failed part-way: compare-and-set
// statements that already ran committed their claims (each is autocommit),
// so those jobs must reach the caller or they would sit unworked until their
// lease expired. With nothing claimed yet the error is returned.
func claimedSoFar(out []*contract.Job, err error) ([]*contract.Job, error) {
	if len(out) > 0 {
		storekit.SortClaimOrder(out)
		return out, nil
	}
	return nil, err
}

// claimIfLimited claims from p.Queue under its concurrency limits when its
// record says it has some (and is not paused), and reports whether it
// did; otherwise it returns nothing. With probe it first asks the record
// without a lock (a claim of a queue not known to be limited); without,
// it goes straight to the limited path, where the lock of the record
// decides. It records what it found as the queue's LimitedHint, so the
// next claim of a limited queue goes straight there.
func (s *Store) claimIfLimited(ctx context.Context, p contract.ClaimParams, probe bool) ([]*contract.Job, bool, error) {
	if probe {
		var limited bool
		err := s.retry(ctx, func() (err error) {
			limited, err = s.QueueLimited(ctx, s.db, p.Queue)
			return err
		})
		if err != nil {
			return nil, false, err
		}
		s.SetLimitedHint(p.Queue, limited)
		if !limited {
			return nil, false, nil
		}
	}
	var (
		out     []*contract.Job
		limited bool
	)
	err := s.inTx(ctx, func(tx pgx.Tx) (err error) {
		out, limited, err = s.claimLimited(ctx, tx, p)
		return err
	})
	if err == nil {
		s.SetLimitedHint(p.Queue, limited)
	}
	return out, limited, err
}

// claimLimited is the claim of a queue with concurrency limits, in the
// transaction c: it locks the queue's record (SELECT … FOR UPDATE), so
// the limited claims of one queue, from every process, run one at a
// time; counts the queue's running jobs per kind and partition key
// (through jobs_lease); and takes due jobs in claim order within the room
// left (limitedCandidates, locked with SKIP LOCKED, then limitedClaim),
// leaving out kinds and partitions that are full. Both strategies take
// it: under the queue's lock no other claim of the queue competes, and
// SKIP LOCKED passes over the rare pending row another writer (a cancel,
// a retry) holds. The commit that ends the claim releases the record.
func (s *Store) claimLimited(ctx context.Context, tx pgx.Tx, p contract.ClaimParams) ([]*contract.Job, bool, error) {
	now, lease := contract.UTC(p.Now), contract.UTC(p.LeaseUntil)
	c := pgConn{tx}
	room, err := s.lockClaimRoom(ctx, tx, p.Queue, now)
	if err != nil || room == nil {
		return nil, false, err
	}
	// readQuery is the statement and arguments of one candidate read.
	readQuery := func(f storekit.CandidateFilter, n int) (string, []any) {
		fullKinds, fullParts := f.FullKinds, f.FullParts
		if fullKinds == nil {
			fullKinds = []string{}
		}
		if fullParts == nil {
			fullParts = []string{}
		}
		lo, hi := f.PriorityRange()
		if f.Partition != "" {
			return s.q.limitedCandidatesPart, []any{p.Queue, now, sqlq.TagsArg(p.Tags), fullKinds, fullParts, n, lo, hi, f.Partition}
		}
		return s.q.limitedCandidates, []any{p.Queue, now, sqlq.TagsArg(p.Tags), fullKinds, fullParts, n, lo, hi}
	}
	read := func(f storekit.CandidateFilter, n int) ([]storekit.LimitCandidate, error) {
		q, args := readQuery(f, n)
		return sqlq.ScanLimitCandidates(c.Query(ctx, q, args...))
	}
	// readMany pipelines the reads (one round trip for a fair claim's
	// partitions or an aging claim's priority levels).
	readMany := func(fs []storekit.CandidateFilter, ns []int) ([][]storekit.LimitCandidate, error) {
		b := &pgx.Batch{}
		for i, f := range fs {
			q, args := readQuery(f, ns[i])
			b.Queue(q, args...)
		}
		br := tx.SendBatch(ctx, b)
		out := make([][]storekit.LimitCandidate, len(fs))
		var err error
		for i := range fs {
			var r pgx.Rows
			if r, err = br.Query(); err != nil {
				break
			}
			if out[i], err = sqlq.ScanLimitCandidates(rows{r}, nil); err != nil {
				break
			}
		}
		if cerr := br.Close(); err == nil {
			err = cerr
		}
		return out, err
	}
	take := func(cands []storekit.LimitCandidate) ([]*contract.Job, error) {
		ids := make([]int64, len(cands))
		for i, lc := range cands {
			ids[i] = lc.ID
		}
		return scanJobs(c.Query(ctx, s.q.limitedClaim, now, p.WorkerID, lease, ids))
	}
	parts := func(after string, n int) ([]string, error) {
		return s.FairPartitions(ctx, c, p.Queue, "partition_key", "state IN "+pendingIn, after, n)
	}
	direct := func(n int) ([]*contract.Job, error) {
		return scanJobs(c.Query(ctx, s.q.limitedClaimDirect, p.Queue, now, n, p.WorkerID, lease, sqlq.TagsArg(p.Tags)))
	}
	out, err := storekit.ClaimLimited(p.Limit, room, storekit.LimitedReads{Read: read, ReadMany: readMany, Take: take, Partitions: parts, Direct: direct})
	if err != nil {
		return nil, true, err
	}
	return out, true, s.SaveClaimRoom(ctx, c, p.Queue, room, now)
}

// lockClaimRoom is sqlq.Store.LockClaimRoom in one round trip: the lock
// of the queue's record, the count of its running jobs and the read of
// its rate instants go to the server as one pipeline (the server runs
// them in order, each statement with its own snapshot, so the count sees
// every claim committed before the lock was granted). The pipeline first
// turns sorts, bitmap scans and sequential scans off for the transaction,
// as the claim functions do for theirs (so the generic plans the limited
// claim's prepared statements settle on are made without them too): the claim reads then walk an index in the
// order they want on a table without statistics too. (The search for a
// fair queue's next partition key orders by it, so only jobs_fair serves
// it; with sorts on, the planner may take jobs_claim there and walk the
// queue's whole backlog for each key: 6-12 ms a key, 32 keys a claim, on
// 20,000 jobs.)
func (s *Store) lockClaimRoom(ctx context.Context, tx pgx.Tx, queue string, now time.Time) (*storekit.ClaimRoom, error) {
	qs := s.ClaimRoomQueries(queue, now)
	b := &pgx.Batch{}
	b.Queue("SET LOCAL enable_sort = off")
	b.Queue("SET LOCAL enable_bitmapscan = off")
	b.Queue("SET LOCAL enable_seqscan = off")
	for _, q := range qs {
		b.Queue(q.SQL, q.Args...)
	}
	br := tx.SendBatch(ctx, b)
	room, err := func() (*storekit.ClaimRoom, error) {
		// A batch's answers are read in order, each to its end.
		for range 3 {
			if _, err := br.Exec(); err != nil {
				return nil, err
			}
		}
		lock, err := br.Query()
		if err != nil {
			return nil, err
		}
		rec, err := sqlq.ScanRoomRecord(queue, rows{lock})
		if err != nil || rec == nil {
			return nil, err
		}
		running, err := br.Query()
		if err != nil {
			return nil, err
		}
		room, err := rec.Room(now, rows{running}, nil)
		if err != nil {
			return nil, err
		}
		rates, err := br.Query()
		if err != nil {
			return nil, err
		}
		states, err := sqlq.ScanRates(rows{rates})
		if err != nil {
			return nil, err
		}
		for _, st := range states {
			room.LoadRate(st.Group, st.TAT)
		}
		return room, nil
	}()
	if cerr := br.Close(); err == nil && cerr != nil {
		return nil, cerr
	}
	return room, err
}
