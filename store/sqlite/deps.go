package sqlite

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/backlogq/backlog/core/contract"
	"github.com/backlogq/backlog/core/storekit"
	"github.com/backlogq/backlog/store/internal/sqlq"
)

// Job dependencies (contract.Dependencies) on SQLite.
//
// An insert with dependencies (insertWithDependencies) reads the state of
// each dependency in its write transaction, which no other writer
// interleaves with, marks it has_dependants, and writes the job's row
// (waiting, or due, or cancelled at insert, as storekit.PlanDependencies
// says) and one <prefix>job_deps row per dependency, settled when the
// dependency had ended already.
//
// The settling is done by the triggers of schema version 15 (see
// migrations/00015_dependencies.sql), in the statement that ends a
// dependency: every path that ends a job (Finish, CompleteTx, Cancel,
// Delete, Rescue, RescueWorkers, DiscardExpired, and statements written
// later) is covered without the Go code of any of them knowing, and a job
// without dependants pays only the triggers' WHEN test on has_dependants.
// SQLite runs one writer at a time, so two handles that finish the last
// two dependencies of one job run the triggers one after the other: the
// job is released once.

// depsInsertSQL is insertSQL with the dependency columns: workflow_id,
// step, on_dependency_failure, dep_count, waiting_for, deps_completed,
// deps_cancelled, deps_discarded, has_dependants (an earlier job of the
// call is named by a later one's DependsOnIndex), finished_at and errors
// (a cancel at insert), one depsInsertRowSQL per job (%s).
const depsInsertSQL = `
INSERT INTO {jobs}
    (queue, kind, args, priority, state, max_attempts, run_at, deadline, unique_key, tags, metadata, created_at, partition_key,
     workflow_id, step, on_dependency_failure, dep_count, waiting_for, deps_completed, deps_cancelled, deps_discarded,
     has_dependants, finished_at, errors)
VALUES %s
RETURNING id`

// depsInsertRowSQL is one job's row of depsInsertSQL.
const depsInsertRowSQL = "(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)"

// depsInsertChunk is the most rows one depsInsertSQL carries (24
// parameters each, under SQLite's 32766).
const depsInsertChunk = 1000

// lockDependenciesSQL marks the jobs named as dependencies (%s: their
// ids) as having dependants, so the triggers settle them when they end,
// and returns their ids and states. The ids it does not return are not in
// the jobs table.
const lockDependenciesSQL = `UPDATE {jobs} SET has_dependants = 1 WHERE id IN (%s) RETURNING id, state`

// archivedDependenciesSQL reads the ids and states of the archived jobs
// among the ids %s: archived jobs are final, and settled.
const archivedDependenciesSQL = `SELECT id, state FROM {archive} WHERE id IN (%s)`

// insertEdgesSQL writes the edges of inserted jobs, one "(?,?,?)" per
// edge (%s): dependency id, job id, settled (1 when the dependency had
// ended at insert).
const insertEdgesSQL = `INSERT INTO {deps} (dep_id, job_id, settled) VALUES %s`

// workflowSelfSQL makes the first job of a workflow its own workflow's id.
const workflowSelfSQL = `UPDATE {jobs} SET workflow_id = id WHERE id = ?`

// idChunk is the most ids one IN list of the dependency statements
// carries, and edgeChunk the most edges one insertEdgesSQL writes.
const (
	idChunk   = 10000
	edgeChunk = 10000
)

// SupportsDependencies implements contract.Dependencies.
func (s *Store) SupportsDependencies() {}

// usesDependencies reports whether any job of the call names a
// dependency, a step, a workflow or a dependency policy: such a call takes
// insertWithDependencies; every other call keeps the plain insert.
func usesDependencies(jobs []contract.InsertParams) bool {
	for i := range jobs {
		p := &jobs[i]
		if storekit.HasDependencies(p) || p.Step != "" || p.InWorkflow || p.OnDependencyFailure != "" {
			return true
		}
	}
	return false
}

// depInsert is the state of one insertWithDependencies call.
type depInsert struct {
	s    *Store
	c    sqlq.Conn
	now  time.Time
	jobs []contract.InsertParams
	res  []contract.InsertResult
	// states holds the state of each dependency named by id (the jobs
	// table's or the archive's), read under the write lock.
	states map[int64]contract.State
	// named marks the inputs a later input's DependsOnIndex names: they
	// are inserted with has_dependants set.
	named []bool
	// first maps each input to the first input of the call with its
	// scoped unique key (itself when it has none): a later repeat's
	// result is filled only at the end of the call.
	first []int
	// workflow is the workflow id of the call once its first member is
	// inserted (0 before).
	workflow int64
	edges    []any // dep_id, job_id, settled: edges not yet written
}

// insertWithDependencies is InsertOn for a call that uses dependencies.
func (s *Store) insertWithDependencies(ctx context.Context, c sqlq.Conn, now time.Time, jobs []contract.InsertParams) ([]contract.InsertResult, error) {
	if err := storekit.CheckDependencies(jobs); err != nil {
		return nil, fmt.Errorf("sqlite: %w", err)
	}
	now = contract.UTC(now)
	d := &depInsert{s: s, c: c, now: now, jobs: jobs, res: make([]contract.InsertResult, len(jobs)),
		states: map[int64]contract.State{}, named: make([]bool, len(jobs)), first: make([]int, len(jobs))}
	var ids []int64
	for i := range jobs {
		ids = append(ids, jobs[i].DependsOn...)
	}
	slices.Sort(ids)
	missing, err := d.lock(ctx, slices.Compact(ids))
	if err != nil {
		return nil, err
	}
	if len(missing) > 0 {
		for i := range jobs {
			for _, id := range jobs[i].DependsOn {
				if slices.Contains(missing, id) {
					return nil, fmt.Errorf("sqlite: job %d of the insert: dependency job %d: %w: %w", i, id, contract.ErrNotFound, contract.ErrInvalidArgument)
				}
			}
		}
	}
	firstOfKey := map[string]int{}
	for i := range jobs {
		d.first[i] = i
		if k := contract.ScopedUniqueKey(&jobs[i]); k != "" {
			if f, ok := firstOfKey[k]; ok {
				d.first[i] = f
			} else {
				firstOfKey[k] = i
			}
		}
		for _, k := range jobs[i].DependsOnIndex {
			d.named[d.first[k]] = true
		}
	}
	err = s.InsertKeyed(ctx, c, now, jobs, d.res, func(send []int) error { return d.insert(ctx, send) })
	if err != nil {
		return nil, err
	}
	if err := d.flushEdges(ctx); err != nil {
		return nil, err
	}
	return d.res, nil
}

// lock marks the jobs ids (ascending, distinct) as having dependants and
// records the state of each in d.states, from the jobs table or, for one
// no longer there, the archive (archived jobs are final). It returns the
// ids in neither.
func (d *depInsert) lock(ctx context.Context, ids []int64) (missing []int64, err error) {
	read := func(q string, part []int64) error {
		args := make([]any, len(part))
		for k, id := range part {
			args[k] = id
		}
		r, err := d.c.Query(ctx, fmt.Sprintf(q, marks(len(part))), args...)
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
			d.states[id] = contract.State(st)
		}
		if err := r.Err(); err != nil {
			return err
		}
		return r.Close()
	}
	var gone []int64
	for start := 0; start < len(ids); start += idChunk {
		part := ids[start:min(len(ids), start+idChunk)]
		if err := read(d.s.sql.lockDeps, part); err != nil {
			return nil, err
		}
		for _, id := range part {
			if _, ok := d.states[id]; !ok {
				gone = append(gone, id)
			}
		}
	}
	for start := 0; start < len(gone); start += idChunk {
		if err := read(d.s.sql.archivedDeps, gone[start:min(len(gone), start+idChunk)]); err != nil {
			return nil, err
		}
	}
	for _, id := range gone {
		if _, ok := d.states[id]; !ok {
			missing = append(missing, id)
		}
	}
	return missing, nil
}

// insert writes the jobs send (ascending input order; InsertKeyed's
// callback) and fills d.res. A statement ends before a job that depends
// (DependsOnIndex) on a job of that same statement, whose id it needs,
// and after the first job of the workflow, whose id the later members
// carry.
func (d *depInsert) insert(ctx context.Context, send []int) error {
	var part []int
	inPart := map[int]bool{}
	for _, i := range send {
		cut := len(part) == depsInsertChunk
		for _, k := range d.jobs[i].DependsOnIndex {
			cut = cut || inPart[d.first[k]]
		}
		if cut {
			if err := d.flush(ctx, part); err != nil {
				return err
			}
			part, inPart = part[:0], map[int]bool{}
		}
		part, inPart[i] = append(part, i), true
		if p := &d.jobs[i]; d.workflow == 0 && (p.Step != "" || p.InWorkflow) {
			if err := d.flush(ctx, part); err != nil {
				return err
			}
			part, inPart = part[:0], map[int]bool{}
		}
	}
	return d.flush(ctx, part)
}

// flush inserts the jobs part with one depsInsertSQL, fills their
// results and queues their edges.
func (d *depInsert) flush(ctx context.Context, part []int) error {
	if len(part) == 0 {
		return nil
	}
	type planned struct {
		ids  []int64
		plan storekit.DependencyPlan
	}
	// The jobs holding the unique keys of duplicates that a job of part
	// depends on: marked and read as dependencies by id are.
	var holders []int64
	for _, i := range part {
		for _, k := range d.jobs[i].DependsOnIndex {
			if r := d.res[d.first[k]]; r.Duplicate {
				if _, ok := d.states[r.Job.ID]; !ok {
					holders = append(holders, r.Job.ID)
				}
			}
		}
	}
	if len(holders) > 0 {
		slices.Sort(holders)
		gone, err := d.lock(ctx, slices.Compact(holders))
		if err != nil {
			return err
		}
		for _, id := range gone {
			// Deleted since its end (its key still held): ended.
			d.states[id] = contract.StateCancelled
		}
	}
	plans := make([]planned, len(part))
	args := make([]any, 0, 24*len(part))
	firstMember := -1
	for n, i := range part {
		p := &d.jobs[i]
		var err error
		row := len(args)
		if args, err = sqlq.AppendInsertRow(args, dialect{}, p, d.now); err != nil {
			return err
		}
		var workflow any
		if p.Step != "" || p.InWorkflow {
			if d.workflow == 0 {
				firstMember = n // its own id, set once known
			} else {
				workflow = d.workflow
			}
		}
		var step any
		if p.Step != "" {
			step = p.Step
		}
		policy := ""
		var finished any
		errs := "[]"
		if storekit.HasDependencies(p) {
			ids, earlier := d.dependencies(i)
			plan := storekit.PlanDependencies(ids, func(id int64) contract.State {
				if st, ok := earlier[id]; ok {
					return st
				}
				return d.states[id]
			}, p.OnDependencyFailure, 0, d.now)
			plans[n] = planned{ids: ids, plan: plan}
			policy = string(p.OnDependencyFailure)
			if plan.State != "" {
				args[row+4] = string(plan.State) // the row's state (AppendInsertRow's fifth value)
			}
			if plan.State == contract.StateCancelled {
				finished = dialect{}.Time(d.now)
				e, err := sqlq.EncodeError(plan.Cancel)
				if err != nil {
					return err
				}
				errs = "[" + e + "]"
			}
		}
		pl := &plans[n].plan
		args = append(args, workflow, step, policy, int64(len(plans[n].ids)), int64(pl.WaitingFor),
			int64(pl.Ends.Completed), int64(pl.Ends.Cancelled), int64(pl.Ends.Discarded), d.named[i], finished, errs)
	}
	got, err := sqlq.ScanIDs(d.c.Query(ctx, fmt.Sprintf(d.s.sql.depsInsert, rows(depsInsertRowSQL, len(part))), args...))
	if err != nil {
		return err
	}
	// Ids are matched by their order, which is insert order.
	if len(got) != len(part) {
		return fmt.Errorf("sqlite: insert returned %d rows for the %d it inserted", len(got), len(part))
	}
	slices.Sort(got)
	if firstMember >= 0 {
		d.workflow = got[firstMember]
		if _, err := d.c.Exec(ctx, d.s.sql.workflowSelf, d.workflow); err != nil {
			return err
		}
	}
	for n, i := range part {
		p := &d.jobs[i]
		j := sqlq.InsertedJob(got[n], p, d.now)
		if p.Step != "" || p.InWorkflow {
			j.WorkflowID, j.Step = d.workflow, p.Step
		}
		if ids := plans[n].ids; ids != nil {
			pl := &plans[n].plan
			j.DependsOn, j.OnDependencyFailure = ids, p.OnDependencyFailure
			j.WaitingFor, j.DependencyEnds = pl.WaitingFor, pl.Ends
			if pl.State != "" {
				j.State = pl.State
			}
			if pl.State == contract.StateCancelled {
				j.FinishedAt = j.CreatedAt
				j.Errors = []contract.AttemptError{pl.Cancel}
			}
			open := map[int64]bool{}
			for _, id := range pl.Open {
				open[id] = true
			}
			for _, id := range ids {
				d.edges = append(d.edges, id, j.ID, !open[id])
			}
			if len(d.edges) >= 3*edgeChunk {
				if err := d.flushEdges(ctx); err != nil {
					return err
				}
			}
		}
		d.res[i] = contract.InsertResult{Job: j}
	}
	return nil
}

// dependencies returns the dependencies of input i, deduplicated and
// ascending (its DependsOn and the jobs its DependsOnIndex names: for an
// input that was a duplicate, the job holding its unique key), and the
// state of those its DependsOnIndex names that the call inserted.
func (d *depInsert) dependencies(i int) ([]int64, map[int64]contract.State) {
	p := &d.jobs[i]
	ids := slices.Clone(p.DependsOn)
	earlier := make(map[int64]contract.State, len(p.DependsOnIndex))
	for _, k := range p.DependsOnIndex {
		r := d.res[d.first[k]]
		ids = append(ids, r.Job.ID)
		if !r.Duplicate {
			earlier[r.Job.ID] = r.Job.State
		}
	}
	slices.Sort(ids)
	return slices.Compact(ids), earlier
}

// flushEdges writes the queued edges, edgeChunk a statement.
func (d *depInsert) flushEdges(ctx context.Context) error {
	for start := 0; start < len(d.edges); start += 3 * edgeChunk {
		part := d.edges[start:min(len(d.edges), start+3*edgeChunk)]
		if _, err := d.c.Exec(ctx, fmt.Sprintf(d.s.sql.insertEdges, rows("(?,?,?)", len(part)/3)), part...); err != nil {
			return err
		}
	}
	d.edges = d.edges[:0]
	return nil
}
