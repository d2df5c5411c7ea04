package sqlq

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/backlogq/backlog/core/contract"
)

// Unique keys are held in their own table (Tables.Holds), one row per
// scoped key (contract.ScopedUniqueKey), so that a hold outlives the job row it
// was taken for:
//
//	ukey        the scoped key; the primary key
//	job_id      the holder (0 only inside the inserting transaction)
//	queue, kind, unique_key
//	            the holder's, returned for a holder whose row is gone
//	unique_for  the holder's UniqueFor in microseconds
//	held_until  NULL while the holder's row exists; once it is deleted,
//	            its FinishedAt + unique_for (then an index on it finds
//	            the holds Prune forgets)
//	fingerprint the holder's InsertParams.UniqueFingerprint (NULL or ''
//	            when it gave none), returned with its duplicates
//
// A hold is held at now when its job is not final, or final with
// finished_at + unique_for > now, or gone with held_until > now. Only keyed
// inserts and deletions of job rows touch the table: the insert and finish
// statements of key-less jobs never do.

// holdChunk bounds the scoped keys of one statement of the protocol.
const holdChunk = 500

// holdRow is one row of the holds table as the insert protocol reads it.
type holdRow struct {
	ukey             string
	jobID            int64
	queue, kind, key string
	uniqueFor        time.Duration
	heldUntil        time.Time
	fingerprint      string
}

// InsertKeyed runs the unique-key protocol of every SQL store's Insert on
// c, which must be a transaction, and fills res (one result per input).
// insert writes the jobs jobs[send] (ascending input order) with the
// store's own insert statement and fills res[i] for each i in send; it is
// called once per chunk of keyed inputs, and once with all inputs when
// none has a key (then nothing else runs: key-less jobs cost what they
// cost before keys had holds).
//
// For each chunk of distinct scoped keys, in one transaction:
//
//  1. insert a placeholder hold (job_id 0) for each key, doing nothing on
//     a conflicting key (Dialect.InsertOrLock; MySQL takes the row's
//     exclusive lock there);
//  2. read the holds of those keys, locking them (FOR UPDATE): a row with
//     job_id 0 is this transaction's own, a new key; when a hold step 1
//     met was deleted before step 2 read it (a release, or the hold of a
//     job deleted before it was final), steps 1 and 2 run again;
//  3. read the holders of the others (Dialect.CurrentRead), and decide
//     each: held (the input becomes a Duplicate of the holder) or ended
//     (the input takes the hold over);
//  4. insert the jobs of the new and taken-over keys, and the key-less
//     inputs of the chunk;
//  5. point their holds at them (job_id, queue, kind, unique_key,
//     unique_for; held_until NULL).
//
// The primary key on the scoped key and the row lock make concurrent
// inserts of one key, from any process, yield exactly one job: a second
// inserter waits for the first one's transaction and then sees its job.
// Later inputs repeating a scoped key of the batch get a copy of the first
// one's result, marked Duplicate.
func (s *Store) InsertKeyed(ctx context.Context, c Conn, now time.Time, jobs []contract.InsertParams, res []contract.InsertResult,
	insert func(send []int) error) error {
	now = contract.UTC(now)
	keys := make([]string, len(jobs))
	first := make(map[string]int)
	var chunks [][]int
	var cur []int
	curKeys := 0
	for i := range jobs {
		k := contract.ScopedUniqueKey(&jobs[i])
		keys[i] = k
		if k != "" {
			if _, dup := first[k]; dup {
				continue
			}
			first[k] = i
			curKeys++
		}
		cur = append(cur, i)
		if curKeys == holdChunk {
			chunks, cur, curKeys = append(chunks, cur), nil, 0
		}
	}
	if len(cur) > 0 {
		chunks = append(chunks, cur)
	}
	if len(first) == 0 {
		return insert(chunks[0])
	}
	for _, chunk := range chunks {
		if err := s.insertKeyedChunk(ctx, c, now, jobs, keys, chunk, res, insert); err != nil {
			return err
		}
	}
	for i := range jobs {
		if res[i].Job == nil && keys[i] != "" {
			f := first[keys[i]]
			cp := *res[f].Job
			fp := res[f].Fingerprint
			if !res[f].Duplicate {
				fp = jobs[f].UniqueFingerprint
			}
			res[i] = contract.InsertResult{Job: &cp, Duplicate: true, Fingerprint: fp}
		}
	}
	return nil
}

// insertKeyedChunk runs steps 1 to 5 of InsertKeyed for the inputs chunk
// (each scoped key at most once).
func (s *Store) insertKeyedChunk(ctx context.Context, c Conn, now time.Time, jobs []contract.InsertParams, keys []string, chunk []int,
	res []contract.InsertResult, insert func(send []int) error) error {
	var keyed []int
	for _, i := range chunk {
		if keys[i] != "" {
			keyed = append(keyed, i)
		}
	}
	// Keys in one order everywhere, so two batches lock them in the same
	// order.
	slices.SortFunc(keyed, func(a, b int) int { return strings.Compare(keys[a], keys[b]) })

	// 1 and 2, again when a hold seen by 1 was deleted before 2 read it
	// (a release or a deleted job's hold, committed in between): a
	// statement that starts after that commit inserts the placeholder.
	holds, err := s.lockHolds(ctx, c, jobs, keys, keyed)
	for try := 0; err == nil && len(holds) < len(keyed) && try < 3; try++ {
		holds, err = s.lockHolds(ctx, c, jobs, keys, keyed)
	}
	if err != nil {
		return err
	}

	// 3. The holders of existing holds, and the decisions.
	var holderIDs []int64
	for _, h := range holds {
		if h.jobID != 0 {
			holderIDs = append(holderIDs, h.jobID)
		}
	}
	holders := make(map[int64]*contract.Job, len(holderIDs))
	if len(holderIDs) > 0 {
		b := newBuilder(s.d, len(holderIDs))
		b.w("SELECT ", JobColumns, " FROM ", s.t.Jobs, " WHERE id IN (")
		for n, id := range holderIDs {
			if n > 0 {
				b.w(",")
			}
			b.w(b.arg(id))
		}
		b.w(")", s.d.CurrentRead())
		got, err := ScanJobs(c.Query(ctx, b.String(), b.args...))
		if err != nil {
			return err
		}
		for _, j := range got {
			holders[j.ID] = j
		}
	}
	dup := make(map[string]contract.InsertResult)
	for _, h := range holds {
		if h.jobID == 0 {
			continue
		}
		j := holders[h.jobID]
		if HoldHeld(j, h.uniqueFor, h.heldUntil, now) {
			if j == nil {
				j = &contract.Job{ID: h.jobID, Queue: h.queue, Kind: h.kind, UniqueKey: h.key}
			}
			dup[h.ukey] = contract.InsertResult{Job: j, Duplicate: true, Fingerprint: h.fingerprint}
		}
	}
	if len(holds) != len(keyed) {
		return fmt.Errorf("%s: insert: read %d unique-key holds after writing %d", s.d.Name(), len(holds), len(keyed))
	}

	// 4. The jobs.
	send := make([]int, 0, len(chunk))
	for _, i := range chunk {
		if d, ok := dup[keys[i]]; ok && keys[i] != "" {
			res[i] = d
			continue
		}
		send = append(send, i)
	}
	if len(send) > 0 {
		if err := insert(send); err != nil {
			return err
		}
	}

	// 5. The holds point at the new jobs.
	var rows [][]string
	H := s.t.Holds
	b := newBuilder(s.d, 7*len(keyed))
	for _, i := range keyed {
		if _, ok := dup[keys[i]]; ok {
			continue
		}
		p, j := &jobs[i], res[i].Job
		rows = append(rows, []string{b.argT(keys[i], TypeText), b.argT(j.ID, TypeInt), b.argT(p.Queue, TypeText),
			b.argT(p.Kind, TypeText), b.argT(p.UniqueKey, TypeText), b.argT(p.UniqueFor.Microseconds(), TypeInt),
			b.argT(p.UniqueFingerprint, TypeText)})
	}
	if len(rows) == 0 {
		return nil
	}
	q := s.d.UpdateFrom(H, "v", []string{"k", "jid", "q", "kd", "uk", "uf", "fp"}, rows,
		"job_id = v.jid, queue = v.q, kind = v.kd, unique_key = v.uk, unique_for = v.uf, held_until = NULL, fingerprint = v.fp",
		H+".ukey = v.k", "")
	_, err = c.Exec(ctx, q, b.args...)
	return err
}

// lockHolds runs steps 1 and 2 of InsertKeyed for the inputs keyed (in
// scoped-key order): placeholder holds for keys without one, then every
// hold of those keys, locked.
func (s *Store) lockHolds(ctx context.Context, c Conn, jobs []contract.InsertParams, keys []string, keyed []int) ([]holdRow, error) {
	// 1. Placeholder holds.
	H := s.t.Holds
	verb, suffix := s.d.InsertOrLock("ukey")
	b := newBuilder(s.d, 5*len(keyed))
	b.w(verb, " ", H, " (ukey, job_id, queue, kind, unique_key, unique_for, held_until) VALUES ")
	for n, i := range keyed {
		if n > 0 {
			b.w(",")
		}
		p := &jobs[i]
		b.w("(", b.argT(keys[i], TypeText), ", 0, ", b.argT(p.Queue, TypeText), ", ", b.argT(p.Kind, TypeText), ", ",
			b.argT(p.UniqueKey, TypeText), ", ", b.argT(p.UniqueFor.Microseconds(), TypeInt), ", NULL)")
	}
	b.w(suffix)
	if _, err := c.Exec(ctx, b.String(), b.args...); err != nil {
		return nil, err
	}

	// 2. The holds, locked.
	b = newBuilder(s.d, len(keyed))
	b.w("SELECT ", holdColumns, " FROM ", H, " WHERE ukey IN (")
	for n, i := range keyed {
		if n > 0 {
			b.w(",")
		}
		b.w(b.argT(keys[i], TypeText))
	}
	b.w(") ORDER BY ukey", s.d.LockSuffix(false))
	return scanHolds(c.Query(ctx, b.String(), b.args...))
}

// HoldHeld reports whether a hold on a unique key is held at now: its
// holder j (nil when the row is gone) is not final, or final with now
// before FinishedAt+uniqueFor; or, with the row gone, now is before
// heldUntil.
func HoldHeld(j *contract.Job, uniqueFor time.Duration, heldUntil, now time.Time) bool {
	if j != nil {
		return !j.State.Final() || now.Before(j.FinishedAt.Add(uniqueFor))
	}
	return !heldUntil.IsZero() && now.Before(heldUntil)
}

// holdColumns are the columns scanHolds reads.
const holdColumns = "ukey, job_id, queue, kind, unique_key, unique_for, held_until, COALESCE(fingerprint, '')"

// scanHolds reads holdRows (holdColumns).
func scanHolds(rows Rows, err error) ([]holdRow, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []holdRow
	for rows.Next() {
		var h holdRow
		var us int64
		if err := rows.Scan(&h.ukey, &h.jobID, &h.queue, &h.kind, &h.key, &us, TimeDest(&h.heldUntil), &h.fingerprint); err != nil {
			return nil, err
		}
		h.uniqueFor = time.Duration(us) * time.Microsecond
		out = append(out, h)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return out, rows.Close()
}

// Release is a job row about to be deleted, or just deleted, in the
// transaction that releases its hold: its id and the time its hold's
// window starts (its FinishedAt; zero when it never reached a final
// state).
type Release struct {
	JobID      int64
	FinishedAt time.Time
}

// ReleaseHolds records, on c, that the rows of rel are deleted: the hold
// of each (if it still names that job) keeps the key until FinishedAt +
// unique_for when both are set, and is deleted otherwise (unique_for 0,
// or a job deleted before it was final). Callers run it in the
// transaction that deletes the rows, and only for rows with a unique key,
// so that deleting key-less jobs costs nothing more. Two statements per
// 500 rows.
func (s *Store) ReleaseHolds(ctx context.Context, c Conn, rel []Release) error {
	H := s.t.Holds
	for start := 0; start < len(rel); start += holdChunk {
		part := rel[start:min(len(rel), start+holdChunk)]
		var final []Release
		for _, r := range part {
			if !r.FinishedAt.IsZero() {
				final = append(final, r)
			}
		}
		if len(final) > 0 {
			b := newBuilder(s.d, 3*len(final))
			var cases strings.Builder
			for _, r := range final {
				cases.WriteString(" WHEN " + b.argT(r.JobID, TypeInt) + " THEN " + b.argT(s.d.Time(r.FinishedAt), TypeTime))
			}
			b.w("UPDATE ", H, " SET held_until = ", s.d.AddMicros("CASE job_id"+cases.String()+" END", "unique_for"),
				" WHERE unique_for > 0 AND job_id IN (")
			for n, r := range final {
				if n > 0 {
					b.w(",")
				}
				b.w(b.argT(r.JobID, TypeInt))
			}
			b.w(")")
			if _, err := c.Exec(ctx, b.String(), b.args...); err != nil {
				return err
			}
		}
		b := newBuilder(s.d, len(part))
		b.w("DELETE FROM ", H, " WHERE held_until IS NULL AND job_id IN (")
		for n, r := range part {
			if n > 0 {
				b.w(",")
			}
			b.w(b.argT(r.JobID, TypeInt))
		}
		b.w(")")
		if _, err := c.Exec(ctx, b.String(), b.args...); err != nil {
			return err
		}
	}
	return nil
}

// holdOwned reports, on c, whether job id still holds a unique key, and
// locks that hold until the transaction ends (so no insert takes it over
// meanwhile).
func (s *Store) holdOwned(ctx context.Context, c Conn, id int64) (bool, error) {
	b := newBuilder(s.d, 1)
	b.w("SELECT job_id FROM ", s.t.Holds, " WHERE job_id = ", b.argT(id, TypeInt), s.d.LockSuffix(false))
	ids, err := ScanIDs(c.Query(ctx, b.String(), b.args...))
	return len(ids) > 0, err
}

// forgetHolds deletes, on c, up to limit holds whose held_until is before
// before (their rows are gone and their windows over).
func (s *Store) forgetHolds(ctx context.Context, c Conn, before time.Time, limit int) error {
	b := newBuilder(s.d, 2)
	where := "held_until < " + b.argT(s.d.Time(before), TypeTime)
	_, err := c.Exec(ctx, s.d.DeleteLimitBy(s.t.Holds, "ukey", where, "held_until", b.arg(limit)), b.args...)
	return err
}
