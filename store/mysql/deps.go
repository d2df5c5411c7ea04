package mysql

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/backlogq/backlog/core/contract"
	"github.com/backlogq/backlog/store/internal/sqlq"
)

// Dependencies (contract.Dependencies) on MySQL and MariaDB.
//
// <prefix>job_deps holds one row per edge (job_id waits for dep_id), and
// settled marks an edge already counted. A trigger cannot change the table
// whose change fired it, so the store settles with explicit statements, in
// the transaction of each change that ends a job: Finish and CompleteTx
// (finish.go), and Cancel, Delete, Rescue, RescueWorkers and DiscardExpired
// (through sqlq.Config.Settle). has_dependants, set on a job once another
// depends on it, keeps that work off ordinary jobs: Finish learns it from
// the statements it runs anyway (the update's LAST_INSERT_ID, the
// deletion's RETURNING or locking read), and settles only when a job that
// ended had it set.
//
// A settle runs in rounds, each one statement of each kind below for the
// jobs that ended: lock their unsettled edges, mark them settled, lock and
// read the dependants, write their new counts and states. The dependants a
// failed end cancels are the next round's ended jobs, so a chain of any
// length cancels without recursion. Row locks make it exact under
// concurrency: two transactions settling the last two dependencies of one
// job each lock its row before reading its count, so the second sees the
// first's decrement and only one releases it; an insert locks the rows of
// its dependencies (has_dependants = true) before reading their states, so
// a dependency ending at the same time either is seen ended or finds the
// new edge.

// depEdgesSQL locks and reads the unsettled edges of the jobs whose ids it
// names (%s), by primary key (dep_id, job_id).
const depEdgesSQL = `SELECT dep_id, job_id FROM {deps} WHERE dep_id IN (%s) AND settled = false ORDER BY dep_id, job_id FOR UPDATE`

// settleEdgesSQL marks the edges depEdgesSQL locked settled.
const settleEdgesSQL = `UPDATE {deps} SET settled = true WHERE dep_id IN (%s) AND settled = false`

// dependantsSQL locks and reads the jobs whose ids it names (%s), in id
// order: what a settle needs to count their ends.
const dependantsSQL = `
SELECT id, queue, state, attempt, run_at, waiting_for, on_dependency_failure,
       deps_completed, deps_cancelled, deps_discarded, has_dependants
FROM {jobs} WHERE id IN (%s) ORDER BY id FOR UPDATE`

// settleUpdateSQL writes the dependants' new values, joined by primary key
// with a derived table (%s, settleFirstRowSQL then settleNextRowSQL per
// row): id, new state (st), waiting_for (wf), deps_completed (dc),
// deps_cancelled (dx), deps_discarded (dd), finished_at or NULL to keep
// it (fi), an error entry to append or NULL (er).
var settleUpdateSQL = `
UPDATE {jobs} AS j
JOIN (%s) AS v ON j.id = v.id
SET j.state = v.st, j.waiting_for = v.wf,
    j.deps_completed = v.dc, j.deps_cancelled = v.dx, j.deps_discarded = v.dd,
    j.finished_at = COALESCE(v.fi, j.finished_at),
    j.errors = CASE WHEN v.er IS NULL THEN j.errors
                    ELSE ` + dialect{}.AppendJSON("j.errors", "v.er") + ` END,
    j.version = j.version + 1`

// settleFirstRowSQL and settleNextRowSQL are the rows of settleUpdateSQL's
// derived table.
const (
	settleFirstRowSQL = "SELECT ? AS id, ? AS st, ? AS wf, ? AS dc, ? AS dx, ? AS dd, ? AS fi, ? AS er"
	settleNextRowSQL  = " UNION ALL SELECT ?,?,?,?,?,?,?,?"
)

// depsChunk bounds the ids one settle statement names.
const depsChunk = 1000

// dependant is a job waiting for others, as a settle reads and changes it.
type dependant struct {
	id          int64
	queue       string
	state       contract.State
	attempt     int
	runAt       time.Time
	waitingFor  int
	policy      contract.DependencyPolicy
	ends        contract.DependencyEnds
	hasDeps     bool
	changed     bool
	finishedAt  time.Time // set when cancelled
	errorEntry  string    // the JSON of the cancel's error entry, or ""
	settledWith []edgeEnd // the ends this round counts, in dependency id order
}

// edgeEnd is a dependency's end as a settle counts it.
type edgeEnd struct {
	dep   int64
	ended contract.State // "" = deleted
}

// settle settles the dependants of the jobs ended on c, a transaction, at
// now (sqlq.SettleFunc): every unsettled edge of those jobs is marked
// settled, and each waiting dependant counts the end, becoming available
// (its queue notified) or scheduled at 0, or cancelled under
// contract.DependencyCancel when the end is not completed; a cancel
// settles that job's dependants in the next round.
func (s *Store) settle(ctx context.Context, c sqlq.Conn, ended []sqlq.Ended, now time.Time) error {
	now = contract.UTC(now)
	var wake []string
	for len(ended) > 0 {
		byDep := make(map[int64]contract.State, len(ended))
		ids := make([]int64, 0, len(ended))
		for _, e := range ended {
			if _, dup := byDep[e.ID]; !dup {
				ids = append(ids, e.ID)
			}
			byDep[e.ID] = e.State
		}
		slices.Sort(ids)
		// 1 and 2: the edges, locked, then settled.
		waits := map[int64][]edgeEnd{}
		var deps []int64
		for start := 0; start < len(ids); start += depsChunk {
			part := ids[start:min(len(ids), start+depsChunk)]
			rows, err := c.Query(ctx, fmt.Sprintf(s.q.depEdges, marks(len(part))), int64Args(part)...)
			if err != nil {
				return err
			}
			for rows.Next() {
				var dep, job int64
				if err := rows.Scan(&dep, &job); err != nil {
					rows.Close()
					return err
				}
				if len(deps) == 0 || deps[len(deps)-1] != dep {
					deps = append(deps, dep)
				}
				waits[job] = append(waits[job], edgeEnd{dep: dep, ended: byDep[dep]})
			}
			if err := rows.Err(); err != nil {
				rows.Close()
				return err
			}
			rows.Close()
		}
		if len(deps) == 0 {
			break
		}
		for start := 0; start < len(deps); start += depsChunk {
			part := deps[start:min(len(deps), start+depsChunk)]
			if _, err := c.Exec(ctx, fmt.Sprintf(s.q.settleEdges, marks(len(part))), int64Args(part)...); err != nil {
				return err
			}
		}
		// 3: the dependants, locked in id order.
		jobIDs := make([]int64, 0, len(waits))
		for id := range waits {
			jobIDs = append(jobIDs, id)
		}
		slices.Sort(jobIDs)
		var ds []*dependant
		for start := 0; start < len(jobIDs); start += depsChunk {
			part := jobIDs[start:min(len(jobIDs), start+depsChunk)]
			got, err := s.readDependants(ctx, c, part)
			if err != nil {
				return err
			}
			ds = append(ds, got...)
		}
		// 4: count the ends; the cancelled ones end in turn.
		ended = ended[:0:0]
		var changed []*dependant
		for _, d := range ds {
			d.settledWith = waits[d.id]
			slices.SortFunc(d.settledWith, func(a, b edgeEnd) int { return cmp.Compare(a.dep, b.dep) })
			d.count(now)
			if !d.changed {
				continue
			}
			changed = append(changed, d)
			switch {
			case d.state == contract.StateCancelled && d.hasDeps:
				ended = append(ended, sqlq.Ended{ID: d.id, State: contract.StateCancelled})
			case d.state == contract.StateAvailable && !slices.Contains(wake, d.queue):
				wake = append(wake, d.queue)
			}
		}
		// 5: write them.
		for start := 0; start < len(changed); start += depsChunk {
			if err := s.writeDependants(ctx, c, changed[start:min(len(changed), start+depsChunk)]); err != nil {
				return err
			}
		}
	}
	if len(wake) == 0 {
		return nil
	}
	args := make([]any, 0, 2*len(wake))
	for _, q := range wake {
		args = append(args, q, s.d.Time(now))
	}
	s.notesWritten.Store(true)
	return note(ctx, c, "INSERT INTO "+s.notesTable()+" (kind, queue, created_at) VALUES "+
		strings.TrimSuffix(strings.Repeat("('insert', ?, ?),", len(wake)), ","), args...)
}

// count applies the ends d.settledWith to d while it waits: each is
// counted in d.ends; a failed end under DependencyCancel cancels d (the
// ends after it are not counted), and the last one makes d due.
func (d *dependant) count(now time.Time) {
	for _, e := range d.settledWith {
		if d.state != contract.StateWaiting {
			return
		}
		d.changed = true
		switch e.ended {
		case contract.StateCompleted:
			d.ends.Completed++
		case contract.StateDiscarded:
			d.ends.Discarded++
		default:
			d.ends.Cancelled++
		}
		if e.ended != contract.StateCompleted && d.policy == contract.DependencyCancel {
			what := string(e.ended)
			if what == "" {
				what = "deleted"
			}
			d.state, d.waitingFor, d.finishedAt = contract.StateCancelled, 0, now
			d.errorEntry, _ = sqlq.EncodeError(contract.AttemptError{
				Attempt: d.attempt,
				At:      now,
				Error:   fmt.Sprintf("dependency job %d ended %s", e.dep, what),
				Cause:   contract.CauseDependency,
			})
			return
		}
		d.waitingFor--
		if d.waitingFor <= 0 {
			d.waitingFor = 0
			d.state = contract.StateAvailable
			if d.runAt.After(now) {
				d.state = contract.StateScheduled
			}
		}
	}
}

// readDependants locks and reads the jobs ids (dependantsSQL).
func (s *Store) readDependants(ctx context.Context, c sqlq.Conn, ids []int64) ([]*dependant, error) {
	rows, err := c.Query(ctx, fmt.Sprintf(s.q.dependants, marks(len(ids))), int64Args(ids)...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*dependant
	for rows.Next() {
		d := &dependant{}
		var state, policy string
		var hasDeps sql.NullBool
		if err := rows.Scan(&d.id, &d.queue, &state, &d.attempt, sqlq.TimeDest(&d.runAt), &d.waitingFor, &policy,
			&d.ends.Completed, &d.ends.Cancelled, &d.ends.Discarded, &hasDeps); err != nil {
			return nil, err
		}
		d.state, d.policy, d.hasDeps = contract.State(state), contract.DependencyPolicy(policy), hasDeps.Bool
		out = append(out, d)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return out, rows.Close()
}

// writeDependants writes ds's new values with one settleUpdateSQL.
func (s *Store) writeDependants(ctx context.Context, c sqlq.Conn, ds []*dependant) error {
	args := make([]any, 0, 8*len(ds))
	for _, d := range ds {
		var fin, er any
		if !d.finishedAt.IsZero() {
			fin = s.d.Time(d.finishedAt)
		}
		if d.errorEntry != "" {
			er = d.errorEntry
		}
		args = append(args, d.id, string(d.state), int64(d.waitingFor),
			int64(d.ends.Completed), int64(d.ends.Cancelled), int64(d.ends.Discarded), fin, er)
	}
	rows := settleFirstRowSQL + strings.Repeat(settleNextRowSQL, len(ds)-1)
	_, err := c.Exec(ctx, fmt.Sprintf(s.q.settleUpdate, rows), args...)
	return err
}

// pruneSettleNotes prunes the notifications table (pruneNotes) once a
// settle wrote rows there, as the calls that write notifications do.
func (s *Store) pruneSettleNotes(ctx context.Context) {
	if s.notesWritten.Load() && s.notesWritten.Swap(false) {
		s.pruneNotes(ctx, time.Now())
	}
}

// int64Args returns ids as statement arguments.
func int64Args(ids []int64) []any {
	out := make([]any, len(ids))
	for i, id := range ids {
		out[i] = id
	}
	return out
}

// SupportsDependencies implements contract.Dependencies.
func (s *Store) SupportsDependencies() {}
