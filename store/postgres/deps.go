package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/core/contract"
	"github.com/backlogq/backlog/core/storekit"
	"github.com/backlogq/backlog/store/internal/sqlq"
	"github.com/jackc/pgx/v5"
)

// Dependencies (contract.Dependencies) on PostgreSQL.
//
// An Insert call that names dependencies, steps or workflows runs in one
// transaction (depInsert): the jobs it names by id are locked and marked
// has_dependants (lockDependencies), and their states decide each new
// job's start (storekit.PlanDependencies); ids are reserved from the
// identity sequence so the edges and workflow ids are known before the
// one INSERT of the rows, and the edges go to job_deps in one more
// statement. Calls without any of this take the paths they always took.
//
// The settle is not in Go: the row-level AFTER triggers of schema version
// 17 (settle_dependants) run it in the transaction of every change that
// ends a job with dependants, whichever statement ends it; their WHEN
// clause tests has_dependants, so ordinary jobs never call them.

// SupportsDependencies implements contract.Dependencies.
func (s *Store) SupportsDependencies() {}

// usesDependencies reports whether an Insert call needs the dependency
// path: a job names dependencies, a step, a workflow or a policy.
func usesDependencies(jobs []contract.InsertParams) bool {
	return slices.ContainsFunc(jobs, func(p contract.InsertParams) bool {
		return storekit.HasDependencies(&p) || p.Step != "" || p.InWorkflow || p.OnDependencyFailure != ""
	})
}

// depInsert is the state of one Insert call with dependencies across the
// chunks sqlq.InsertKeyed hands to its callback.
type depInsert struct {
	ctx  context.Context
	s    *Store
	q    sqlq.Conn
	now  time.Time
	jobs []contract.InsertParams
	res  []contract.InsertResult

	// ended maps the id of every job outside the call that a job of the
	// call depends on to its state, read under its row lock.
	ended map[int64]contract.State
	// id is the reserved id of each input inserted by the call (0 for the
	// others); planned maps those ids to the states they start in.
	id      []int64
	planned map[int64]contract.State
	// named marks the inputs a later input names in DependsOnIndex (for
	// a repeated unique key, the first input with it): their rows are
	// inserted with has_dependants set.
	named []bool
	// firstOfKey maps each input to the first input of the call with the
	// same scoped unique key (itself when it has none).
	firstOfKey []int
	workflowID int64
}

// insertWithDependencies is Insert and InsertTx for a call that uses
// dependencies, on q, a transaction.
func (s *Store) insertWithDependencies(ctx context.Context, q sqlq.Conn, now time.Time, jobs []contract.InsertParams) ([]contract.InsertResult, error) {
	now = contract.UTC(now)
	d := &depInsert{ctx: ctx, s: s, q: q, now: now, jobs: jobs, res: make([]contract.InsertResult, len(jobs)),
		id: make([]int64, len(jobs)), planned: map[int64]contract.State{}, named: make([]bool, len(jobs)),
		firstOfKey: make([]int, len(jobs)), ended: map[int64]contract.State{}}
	first := map[string]int{}
	var byID []int64
	for i := range jobs {
		d.firstOfKey[i] = i
		if k := contract.ScopedUniqueKey(&jobs[i]); k != "" {
			if f, ok := first[k]; ok {
				d.firstOfKey[i] = f
			} else {
				first[k] = i
			}
		}
		for _, k := range jobs[i].DependsOnIndex {
			d.named[d.firstOfKey[k]] = true
		}
		byID = append(byID, jobs[i].DependsOn...)
	}
	if err := d.lock(byID); err != nil {
		return nil, err
	}
	if err := s.InsertKeyed(ctx, q, now, jobs, d.res, d.insert); err != nil {
		return nil, err
	}
	return d.res, nil
}

// lock locks the jobs ids that are not locked yet (lockDependencies) and
// records their states in d.ended.
func (d *depInsert) lock(ids []int64) error {
	var todo []int64
	for _, id := range ids {
		if _, ok := d.ended[id]; !ok {
			todo = append(todo, id)
		}
	}
	if len(todo) == 0 {
		return nil
	}
	slices.Sort(todo)
	todo = slices.Compact(todo)
	return d.s.lockDependencies(d.ctx, d.q, todo, d.ended)
}

// lockDependencies marks the jobs ids (ascending, distinct) as having
// dependants, which locks their rows until the transaction ends, and
// records their states in into; an id not in jobs is looked up in
// jobs_archive (archived jobs are final and never change). A dependency
// that ends concurrently either ended before the lock (its state here is
// final) or ends after this transaction commits, when its settle sees the
// edges. An id in neither table is an error wrapping contract.ErrNotFound
// and contract.ErrInvalidArgument.
func (s *Store) lockDependencies(ctx context.Context, q sqlq.Conn, ids []int64, into map[int64]contract.State) error {
	var missing []int64
	read := func(stmt string, want []int64) error {
		r, err := q.Query(ctx, stmt, want)
		if err != nil {
			return err
		}
		defer r.Close()
		for r.Next() {
			var id int64
			var st string
			if err := r.Scan(&id, &st); err != nil {
				return err
			}
			into[id] = contract.State(st)
		}
		if err := r.Err(); err != nil {
			return err
		}
		return r.Close()
	}
	if err := read(s.q.lockDeps, ids); err != nil {
		return err
	}
	for _, id := range ids {
		if _, ok := into[id]; !ok {
			missing = append(missing, id)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	if err := read(s.q.archivedStates, missing); err != nil {
		return err
	}
	for _, id := range missing {
		if _, ok := into[id]; !ok {
			return fmt.Errorf("postgres: insert: dependency job %d: %w: %w", id, contract.ErrNotFound, contract.ErrInvalidArgument)
		}
	}
	return nil
}

// target returns the id of the job input k of the call stands for (the
// job it inserted, or the holder of its unique key) and whether that job
// is one this call inserts.
func (d *depInsert) target(k int) (int64, bool) {
	f := d.firstOfKey[k]
	if d.id[f] != 0 {
		return d.id[f], true
	}
	return d.res[f].Job.ID, false
}

// insert is InsertKeyed's callback: it inserts jobs[send] (ascending
// input order) with their dependency columns and edges, and fills res.
func (d *depInsert) insert(send []int) error {
	ctx, s, q := d.ctx, d.s, d.q
	r, err := q.Query(ctx, s.q.reserveIDs, len(send))
	var ids []int64
	err = scanInts(r, err, 1, func(v []int64) { ids = append(ids, v[0]) })
	if err != nil {
		return err
	}
	if len(ids) != len(send) {
		return fmt.Errorf("postgres: reserved %d ids for %d jobs", len(ids), len(send))
	}
	slices.Sort(ids)
	// The holders of unique keys that inputs name by index are jobs
	// outside the call: locked like the ids named.
	var holders []int64
	for k, i := range send {
		d.id[i] = ids[k]
		for _, x := range d.jobs[i].DependsOnIndex {
			if id, ours := d.target(x); !ours {
				holders = append(holders, id)
			}
		}
	}
	if err := d.lock(holders); err != nil {
		return err
	}

	n := len(send)
	a := depRows{
		id: ids, queue: make([]string, n), kind: make([]string, n), args: make([]string, n), state: make([]string, n),
		prio: make([]int16, n), maxAtt: make([]int32, n), runAt: make([]time.Time, n), deadline: make([]*time.Time, n),
		key: make([]*string, n), tags: make([]*string, n), meta: make([]*string, n), part: make([]*string, n),
		workflow: make([]*int64, n), step: make([]*string, n), policy: make([]string, n), depCount: make([]int32, n),
		waitingFor: make([]int32, n), completed: make([]int32, n), cancelled: make([]int32, n), discarded: make([]int32, n),
		hasDependants: make([]bool, n), finishedAt: make([]*time.Time, n), errs: make([]*string, n),
	}
	dependsOn := make([][]int64, n)
	var edgeDep, edgeJob []int64
	var edgeSettled []bool
	stateOf := func(id int64) contract.State {
		if st, ok := d.ended[id]; ok {
			return st
		}
		return d.planned[id]
	}
	for k, i := range send {
		p := &d.jobs[i]
		a.queue[k], a.kind[k], a.args[k] = p.Queue, p.Kind, string(p.Args)
		a.prio[k], a.maxAtt[k] = int16(p.Priority), int32(p.MaxAttempts)
		a.runAt[k] = contract.UTC(p.RunAt)
		if !p.Deadline.IsZero() {
			dl := contract.UTC(p.Deadline)
			a.deadline[k] = &dl
		}
		if p.UniqueKey != "" {
			a.key[k] = &p.UniqueKey
		}
		if p.PartitionKey != "" {
			a.part[k] = &p.PartitionKey
		}
		if a.tags[k], err = jsonText(encodeTags(p.Tags)); err != nil {
			return err
		}
		if a.meta[k], err = jsonText(encodeMetadata(p.Metadata)); err != nil {
			return err
		}
		if p.Step != "" || p.InWorkflow {
			if d.workflowID == 0 {
				d.workflowID = ids[k]
			}
			a.workflow[k] = &d.workflowID
			if p.Step != "" {
				a.step[k] = &p.Step
			}
		}
		a.policy[k] = string(p.OnDependencyFailure)
		a.hasDependants[k] = d.named[i]

		deps := slices.Clone(p.DependsOn)
		for _, x := range p.DependsOnIndex {
			id, _ := d.target(x)
			deps = append(deps, id)
		}
		slices.Sort(deps)
		deps = slices.Compact(deps)
		dependsOn[k] = deps
		state := sqlq.InsertState(p, d.now)
		if len(deps) > 0 {
			plan := storekit.PlanDependencies(deps, stateOf, p.OnDependencyFailure, 0, d.now)
			if plan.State != "" {
				state = plan.State
			}
			a.waitingFor[k] = int32(plan.WaitingFor)
			a.completed[k], a.cancelled[k], a.discarded[k] = int32(plan.Ends.Completed), int32(plan.Ends.Cancelled), int32(plan.Ends.Discarded)
			if state == contract.StateCancelled {
				a.finishedAt[k] = &d.now
				e, err := sqlq.EncodeError(plan.Cancel)
				if err != nil {
					return err
				}
				e = "[" + e + "]"
				a.errs[k] = &e
			}
			// plan.Open is a subsequence of deps (both ascending). A
			// cancelled job waits for nothing: all its edges are settled.
			open := plan.Open
			if state != contract.StateWaiting {
				open = nil
			}
			for _, dep := range deps {
				settled := len(open) == 0 || open[0] != dep
				if !settled {
					open = open[1:]
				}
				edgeDep, edgeJob, edgeSettled = append(edgeDep, dep), append(edgeJob, ids[k]), append(edgeSettled, settled)
			}
		}
		a.depCount[k] = int32(len(deps))
		a.state[k] = string(state)
		d.planned[ids[k]] = state
	}

	params := a.params(d.now)
	stmt, extra := s.q.insertDeps, 0
	if s.notify {
		stmt, extra = s.q.insertDepsNotify, 1
		params = append(params, s.channel)
	}
	rows, err := q.Query(ctx, stmt, params...)
	got, err := scanJobsExtra(rows, err, extra)
	if err != nil {
		return err
	}
	if len(edgeDep) > 0 {
		if _, err := q.Exec(ctx, s.q.insertEdges, edgeDep, edgeJob, edgeSettled); err != nil {
			return err
		}
	}
	if err := sqlq.MatchInserted("postgres", d.jobs, send, got, d.res); err != nil {
		return err
	}
	for k, i := range send {
		if len(dependsOn[k]) > 0 {
			d.res[i].Job.DependsOn = dependsOn[k]
		}
	}
	return nil
}

// depRows are the parallel arrays of one insert of jobs with their
// dependency columns (queries.insertDeps).
type depRows struct {
	id                              []int64
	queue, kind, args, state        []string
	prio                            []int16
	maxAtt                          []int32
	runAt                           []time.Time
	deadline, finishedAt            []*time.Time
	key, tags, meta, part, step     []*string
	errs                            []*string
	workflow                        []*int64
	policy                          []string
	depCount, waitingFor            []int32
	completed, cancelled, discarded []int32
	hasDependants                   []bool
}

// params returns the statement's parameters $1..$25 ($25 created_at).
func (a *depRows) params(now time.Time) []any {
	return []any{a.id, a.queue, a.kind, a.args, a.prio, a.state, a.maxAtt, a.runAt, a.deadline, a.key, a.tags, a.meta, a.part,
		a.workflow, a.step, a.policy, a.depCount, a.waitingFor, a.completed, a.cancelled, a.discarded, a.hasDependants,
		a.finishedAt, a.errs, now}
}

// DiscardExpired discards up to limit jobs past their deadline: pending
// ones (sqlq's DiscardExpired, through jobs_deadline), then, with room
// left, waiting ones (through jobs_deadline_waiting), each with a
// "deadline passed" error entry. Their dependants settle in the same
// transaction (the settle triggers). It returns how many it discarded.
func (s *Store) DiscardExpired(ctx context.Context, now time.Time, limit int) (int, error) {
	n, err := s.Store.DiscardExpired(ctx, now, limit)
	if err != nil || n >= limit {
		return n, err
	}
	m, err := s.discardWaiting(ctx, contract.UTC(now), limit-n)
	return n + m, err
}

// discardWaiting discards up to limit waiting jobs whose deadline is
// before now, oldest deadline first, in one transaction: a read of the
// candidates, locking them (skipping rows being written), then their
// update. A call with none costs the read alone.
func (s *Store) discardWaiting(ctx context.Context, now time.Time, limit int) (int, error) {
	var n int
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		n = 0
		rows, err := tx.Query(ctx, s.q.expiredWaiting, now, limit)
		if err != nil {
			return err
		}
		var ids []int64
		var entries []string
		for rows.Next() {
			var id int64
			var attempt int32
			var deadline time.Time
			if err := rows.Scan(&id, &attempt, &deadline); err != nil {
				rows.Close()
				return err
			}
			e, err := sqlq.EncodeError(contract.AttemptError{Attempt: int(attempt), At: now, Cause: core.CauseDeadline, DiscardReason: core.ReasonDeadline,
				Error: "deadline passed: the job was not finished by " + contract.UTC(deadline).Format(time.RFC3339Nano)})
			if err != nil {
				rows.Close()
				return err
			}
			ids, entries = append(ids, id), append(entries, e)
		}
		rows.Close()
		if err := rows.Err(); err != nil || len(ids) == 0 {
			return err
		}
		tag, err := tx.Exec(ctx, s.q.discardWaiting, now, ids, entries)
		n = int(tag.RowsAffected())
		return err
	})
	return n, err
}

// refuseWaiting returns an error wrapping contract.ErrInvalidState when
// job id is waiting: a retry would run it before its dependencies. A job
// that left the state never returns to it, so a read before the retry
// is enough.
func (s *Store) refuseWaiting(ctx context.Context, id int64) error {
	var waiting bool
	err := s.retry(ctx, func() error {
		err := s.pool.QueryRow(ctx, s.q.isWaiting, id).Scan(&waiting)
		if errors.Is(err, pgx.ErrNoRows) {
			waiting, err = false, nil
		}
		return err
	})
	if err == nil && waiting {
		err = fmt.Errorf("postgres: retry job %d: it is waiting for its dependencies: %w", id, contract.ErrInvalidState)
	}
	return err
}
