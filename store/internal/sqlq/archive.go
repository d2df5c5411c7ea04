package sqlq

import (
	"context"
	"fmt"
	"time"

	"github.com/backlogq/backlog/core/contract"
)

// ArchiveColumns are the columns Archive copies from the jobs table into
// the archive, by name on both sides (INSERT INTO archive (cols) SELECT
// cols FROM jobs): JobColumns and version. A column added to both tables
// is archived by adding its name here.
const ArchiveColumns = JobColumns + ", version"

// Archive implements contract.Archiver: in one transaction per call it
// selects (and, where the database has row locks, locks) up to limit
// jobs in final state `state` finished before `before`, oldest
// FinishedAt first, then id (what Prune deletes), copies their rows into
// the archive table, deletes them from the jobs table and ends their
// unique-key holds as Prune does. A concurrent Archive waits for the
// locked rows and then no longer finds them; the archive's primary key
// would refuse a second copy of a job rather than keep two.
func (s *Store) Archive(ctx context.Context, state contract.State, before time.Time, limit int) (int, error) {
	if !state.Final() {
		return 0, fmt.Errorf("archive: state %q is not final: %w: %w", state, contract.ErrInvalidArgument, contract.ErrInvalidState)
	}
	if s.t.Archive == "" {
		return 0, fmt.Errorf("archive: %s store has no archive table: %w", s.d.Name(), contract.ErrUnsupported)
	}
	if limit <= 0 {
		return 0, nil
	}
	var n int
	err := s.tx(ctx, func(c Conn) error {
		n = 0
		b := newBuilder(s.d, 3)
		q := "SELECT " + prunedColumns + " FROM " + s.t.Jobs +
			" WHERE state = " + b.arg(string(state)) + " AND finished_at < " + b.arg(s.d.Time(before)) +
			" ORDER BY finished_at, id LIMIT " + b.arg(limit) + s.d.LockSuffix(false)
		// The archived jobs keep their dependency edges: they stay
		// readable until PruneArchive forgets the jobs.
		gone, _, err := scanPruned(c.Query(ctx, q, b.args...))
		if err != nil {
			return err
		}
		if len(gone) > 0 {
			ids := newBuilder(s.d, len(gone))
			for i, r := range gone {
				if i > 0 {
					ids.w(",")
				}
				ids.w(ids.arg(r.JobID))
			}
			in := ids.String()
			if _, err := c.Exec(ctx, "INSERT INTO "+s.t.Archive+" ("+ArchiveColumns+") SELECT "+ArchiveColumns+
				" FROM "+s.t.Jobs+" WHERE id IN ("+in+")", ids.args...); err != nil {
				return err
			}
			if _, err := c.Exec(ctx, "DELETE FROM "+s.t.Jobs+" WHERE id IN ("+in+")", ids.args...); err != nil {
				return err
			}
		}
		if err := s.releasePruned(ctx, c, gone, before, limit); err != nil {
			return err
		}
		n = len(gone)
		return nil
	})
	return n, err
}

// PruneArchive implements contract.Archiver: it deletes up to limit
// archived jobs whose FinishedAt is before `before`, oldest first, in
// one statement.
func (s *Store) PruneArchive(ctx context.Context, before time.Time, limit int) (int, error) {
	if s.t.Archive == "" {
		return 0, fmt.Errorf("prune archive: %s store has no archive table: %w", s.d.Name(), contract.ErrUnsupported)
	}
	if limit <= 0 {
		return 0, nil
	}
	var n int
	err := s.tx(ctx, func(c Conn) error {
		b := newBuilder(s.d, 2)
		where := "finished_at < " + b.arg(s.d.Time(before))
		if s.edges && s.t.Deps != "" {
			return s.pruneArchiveEdges(ctx, c, where, b, limit, &n)
		}
		res, err := c.Exec(ctx, s.d.DeleteLimit(s.t.Archive, where, "finished_at, id", b.arg(limit)), b.args...)
		if err != nil {
			return err
		}
		k, err := res.RowsAffected()
		n = int(k)
		return err
	})
	return n, err
}

// pruneArchiveEdges is PruneArchive's change for a store that deletes
// dependency edges itself (Config.DeleteEdges): it selects and locks the
// batch (where, with b's arguments, oldest first, up to limit), deletes
// it by id, forgets the edges of the jobs that had dependencies and sets
// *n to the jobs deleted.
func (s *Store) pruneArchiveEdges(ctx context.Context, c Conn, where string, b *builder, limit int, n *int) error {
	q := "SELECT id, dep_count FROM " + s.t.Archive + " WHERE " + where + " ORDER BY finished_at, id LIMIT " + b.arg(limit) + s.d.LockSuffix(false)
	rows, err := c.Query(ctx, q, b.args...)
	if err != nil {
		return err
	}
	var ids, edged []int64
	for rows.Next() {
		var id, deps int64
		if err := rows.Scan(&id, &deps); err != nil {
			rows.Close()
			return err
		}
		ids = append(ids, id)
		if deps > 0 {
			edged = append(edged, id)
		}
	}
	if err := rows.Err(); err != nil {
		rows.Close()
		return err
	}
	if err := rows.Close(); err != nil || len(ids) == 0 {
		return err
	}
	if err := s.deleteIn(ctx, c, s.t.Archive, "id", ids); err != nil {
		return err
	}
	*n = len(ids)
	return s.ForgetEdges(ctx, c, edged)
}

// ListArchived implements contract.Archiver: List's statement on the
// archive table.
func (s *Store) ListArchived(ctx context.Context, p contract.ListParams) ([]*contract.Job, error) {
	if s.t.Archive == "" {
		return nil, fmt.Errorf("list archived: %s store has no archive table: %w", s.d.Name(), contract.ErrUnsupported)
	}
	return s.listRead(ctx, s.t.Archive, p, 0)
}

// GetArchived implements contract.Archiver: one archived job by id, or
// an error wrapping core.ErrNotFound.
func (s *Store) GetArchived(ctx context.Context, id int64) (*contract.Job, error) {
	if s.t.Archive == "" {
		return nil, fmt.Errorf("get archived: %s store has no archive table: %w", s.d.Name(), contract.ErrUnsupported)
	}
	var j *contract.Job
	err := s.retry(ctx, func() error {
		b := newBuilder(s.d, 1)
		b.w("SELECT ", JobColumns, " FROM ", s.t.Archive, " WHERE id = ", b.arg(id))
		jobs, err := ScanJobs(s.db.Query(ctx, b.String(), b.args...))
		if err != nil {
			return err
		}
		if len(jobs) == 0 {
			return fmt.Errorf("archived job %d: %w", id, contract.ErrNotFound)
		}
		j = jobs[0]
		return s.LoadDependsOn(ctx, s.db, jobs)
	})
	return j, err
}
