package mysql

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/backlogq/backlog/core/contract"
	"github.com/backlogq/backlog/core/storekit"
	"github.com/backlogq/backlog/store/internal/sqlq"
)

// insertDepsSQL is insertSQL with the dependency columns, for a call that
// names dependencies, steps or workflows: on_dependency_failure, step,
// dep_count, waiting_for, deps_completed, deps_cancelled, deps_discarded,
// has_dependants, finished_at and errors (a cancel at insert). Calls
// without them keep insertSQL's shorter rows.
const insertDepsSQL = `
INSERT IGNORE INTO {jobs}
    (queue, kind, args, priority, state, max_attempts, run_at, deadline, unique_key, tags, metadata, created_at, partition_key,
     on_dependency_failure, step, dep_count, waiting_for, deps_completed, deps_cancelled, deps_discarded, has_dependants, finished_at, errors)
VALUES %s`

// insertDepsRowSQL is one job's row of insertDepsSQL.
const insertDepsRowSQL = "(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)"

// lockDepsSQL locks the rows of jobs others are about to depend on (%s:
// their ids), marking them as having dependants, so that their end,
// concurrent or later, settles the new edges; readDepsSQL then reads their
// states, and readArchivedDepsSQL those of ids the jobs table lacks
// (archived jobs are final). It changes every row, version included: a
// Galera cluster certifies only the rows a transaction writes, so a
// dependency ending on another node at the same time then conflicts with
// the insert (one of them is retried) instead of missing its new edge.
const (
	lockDepsSQL         = `UPDATE {jobs} SET has_dependants = true, version = version + 1 WHERE id IN (%s)`
	readDepsSQL         = `SELECT id, state FROM {jobs} WHERE id IN (%s)`
	readArchivedDepsSQL = `SELECT id, state FROM {archive} WHERE id IN (%s)`
)

// insertEdgesSQL writes dependency edges: (dep_id, job_id, settled) rows
// (%s).
const insertEdgesSQL = `INSERT INTO {deps} (dep_id, job_id, settled) VALUES %s`

// setWorkflowSQL sets the workflow id (the first argument) of the jobs
// whose ids it names (%s).
const setWorkflowSQL = `UPDATE {jobs} SET workflow_id = ? WHERE id IN (%s)`

// edgesChunk bounds the edges one insertEdgesSQL writes (3 arguments
// each, well under the 65,535 placeholders of a statement).
const edgesChunk = 5000

// needsDeps reports whether an Insert call names dependencies, a policy,
// a step or a workflow, and so takes the dependency path.
func needsDeps(jobs []contract.InsertParams) bool {
	for i := range jobs {
		p := &jobs[i]
		if storekit.HasDependencies(p) || p.Step != "" || p.InWorkflow || p.OnDependencyFailure != "" {
			return true
		}
	}
	return false
}

// depRef names one dependency of a job being inserted: an existing job by
// id (index < 0), or the job inserted for an earlier input of the call.
type depRef struct {
	id    int64
	index int
}

// plannedJob is how one input with dependencies is inserted.
type plannedJob struct {
	plan  storekit.DependencyPlan
	refs  []depRef
	state contract.State // the row's state
}

// depInsert is the dependency work of one Insert call (insertWithDeps).
type depInsert struct {
	s     *Store
	c     sqlq.Conn
	now   time.Time
	jobs  []contract.InsertParams
	res   []contract.InsertResult
	canon []int  // per input: the first input with its scoped unique key (a later one yields that one's job), or itself
	wants []bool // per input: a later input depends on it
	// states holds the locked existing dependencies' states (final or
	// not) by id.
	states  map[int64]contract.State
	planned map[int]*plannedJob
}

// insertWithDeps is InsertOn for a call with dependency fields
// (needsDeps): checked (storekit.CheckDependencies), the existing
// dependencies locked and read, each job planned from its dependencies'
// states (storekit.PlanDependencies) and inserted with insertDepsSQL, then
// the edges written and the workflow ids set.
func (s *Store) insertWithDeps(ctx context.Context, c sqlq.Conn, now time.Time, jobs []contract.InsertParams) ([]contract.InsertResult, error) {
	if err := storekit.CheckDependencies(jobs); err != nil {
		return nil, fmt.Errorf("mysql: %w", err)
	}
	di := &depInsert{s: s, c: c, now: now, jobs: jobs, res: make([]contract.InsertResult, len(jobs)),
		canon: make([]int, len(jobs)), wants: make([]bool, len(jobs)),
		states: map[int64]contract.State{}, planned: map[int]*plannedJob{}}
	first := map[string]int{}
	for i := range jobs {
		di.canon[i] = i
		if k := contract.ScopedUniqueKey(&jobs[i]); k != "" {
			if f, ok := first[k]; ok {
				di.canon[i] = f
			} else {
				first[k] = i
			}
		}
		for _, k := range jobs[i].DependsOnIndex {
			di.wants[di.canon[k]] = true
		}
	}
	var ids []int64
	for i := range jobs {
		ids = append(ids, jobs[i].DependsOn...)
	}
	if err := di.lock(ctx, ids); err != nil {
		return nil, err
	}
	err := s.InsertKeyed(ctx, c, now, jobs, di.res, func(send []int) error {
		return di.insert(ctx, send)
	})
	if err != nil {
		return nil, err
	}
	if err := di.finish(ctx); err != nil {
		return nil, err
	}
	return di.res, nil
}

// lock locks the existing jobs ids (those not locked yet) and reads their
// states into di.states; an id neither the jobs table nor the archive has
// is an error wrapping contract.ErrNotFound and ErrInvalidArgument.
func (di *depInsert) lock(ctx context.Context, ids []int64) error {
	var todo []int64
	for _, id := range ids {
		if _, ok := di.states[id]; !ok {
			todo = append(todo, id)
		}
	}
	if len(todo) == 0 {
		return nil
	}
	slices.Sort(todo)
	todo = slices.Compact(todo)
	s, c := di.s, di.c
	read := func(q string, part []int64) error {
		rows, err := c.Query(ctx, fmt.Sprintf(q, marks(len(part))), int64Args(part)...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var id int64
			var st string
			if err := rows.Scan(&id, &st); err != nil {
				return err
			}
			di.states[id] = contract.State(st)
		}
		if err := rows.Err(); err != nil {
			return err
		}
		return rows.Close()
	}
	for start := 0; start < len(todo); start += depsChunk {
		part := todo[start:min(len(todo), start+depsChunk)]
		if _, err := c.Exec(ctx, fmt.Sprintf(s.q.lockDeps, marks(len(part))), int64Args(part)...); err != nil {
			return err
		}
		if err := read(s.q.readDeps, part); err != nil {
			return err
		}
		var missing []int64
		for _, id := range part {
			if _, ok := di.states[id]; !ok {
				missing = append(missing, id)
			}
		}
		if len(missing) == 0 {
			continue
		}
		if s.t.Archive != "" {
			if err := read(s.q.readArchivedDeps, missing); err != nil {
				return err
			}
		}
		for _, id := range missing {
			if _, ok := di.states[id]; !ok {
				return fmt.Errorf("mysql: insert: dependency job %d: %w: %w", id, contract.ErrNotFound, contract.ErrInvalidArgument)
			}
		}
	}
	return nil
}

// insert plans and inserts the inputs send (ascending), in statements of
// insertMaxRows rows and insertMaxBytes at most. A job cancelled at insert
// because an earlier input of the call was names that input's id, so an
// input depending on one in the statement being built starts a new one.
func (di *depInsert) insert(ctx context.Context, send []int) error {
	var part []int
	size := 0
	flush := func() error {
		if len(part) == 0 {
			return nil
		}
		err := di.insertChunk(ctx, part)
		part, size = part[:0], 0
		return err
	}
	inPart := func(k int) bool { _, found := slices.BinarySearch(part, k); return found }
	for _, i := range send {
		p := &di.jobs[i]
		refs, err := di.refs(ctx, i)
		if err != nil {
			return err
		}
		for _, r := range refs {
			if r.index >= 0 && inPart(r.index) && di.planned[r.index].state == contract.StateCancelled {
				if err := flush(); err != nil {
					return err
				}
				break
			}
		}
		di.plan(i, refs)
		if len(part) > 0 && (len(part) == insertMaxRows || size >= insertMaxBytes) {
			if err := flush(); err != nil {
				return err
			}
		}
		part = append(part, i)
		size += len(p.Args) + len(p.UniqueKey) + len(p.Step) + 256
	}
	return flush()
}

// refs returns input i's distinct dependencies: its ids, and for each
// DependsOnIndex the input inserted for it or, when that input yielded an
// existing job (a held unique key), that job, locked.
func (di *depInsert) refs(ctx context.Context, i int) ([]depRef, error) {
	p := &di.jobs[i]
	refs := make([]depRef, 0, len(p.DependsOn)+len(p.DependsOnIndex))
	for _, id := range p.DependsOn {
		refs = append(refs, depRef{id: id, index: -1})
	}
	for _, k := range p.DependsOnIndex {
		f := di.canon[k]
		if di.planned[f] != nil {
			refs = append(refs, depRef{index: f})
			continue
		}
		r := di.res[f]
		if r.Job == nil {
			return nil, fmt.Errorf("mysql: insert: job %d depends on job %d of the insert, which was not inserted before it", i, k)
		}
		if err := di.lock(ctx, []int64{r.Job.ID}); err != nil {
			return nil, err
		}
		refs = append(refs, depRef{id: r.Job.ID, index: -1})
	}
	slices.SortFunc(refs, func(a, b depRef) int {
		if a.index != b.index {
			return a.index - b.index
		}
		switch {
		case a.id < b.id:
			return -1
		case a.id > b.id:
			return 1
		}
		return 0
	})
	return slices.Compact(refs), nil
}

// key returns the id of r for planning: the id once known, else one above
// every real id, in input order.
func (di *depInsert) key(r depRef) int64 {
	if r.index < 0 {
		return r.id
	}
	if j := di.res[r.index].Job; j != nil {
		return j.ID
	}
	return math.MaxInt64/2 + int64(r.index)
}

// refState returns the state r's job is in: read and locked, or planned.
func (di *depInsert) refState(r depRef) contract.State {
	if r.index < 0 {
		return di.states[r.id]
	}
	return di.planned[r.index].state
}

// plan decides how input i starts (storekit.PlanDependencies).
func (di *depInsert) plan(i int, refs []depRef) {
	p := &di.jobs[i]
	byKey := make(map[int64]depRef, len(refs))
	keys := make([]int64, len(refs))
	for n, r := range refs {
		keys[n] = di.key(r)
		byKey[keys[n]] = r
	}
	slices.Sort(keys)
	pl := storekit.PlanDependencies(keys, func(id int64) contract.State { return di.refState(byKey[id]) }, p.OnDependencyFailure, 0, di.now)
	st := pl.State
	if st == "" {
		st = sqlq.InsertState(p, di.now)
	}
	di.planned[i] = &plannedJob{plan: pl, refs: refs, state: st}
}

// insertChunk inserts the planned inputs part with one insertDepsSQL and
// fills their results.
func (di *depInsert) insertChunk(ctx context.Context, part []int) error {
	s := di.s
	args := make([]any, 0, 23*len(part))
	for _, i := range part {
		p, pj := &di.jobs[i], di.planned[i]
		var err error
		base := len(args)
		if args, err = sqlq.AppendInsertRow(args, s.d, p, di.now); err != nil {
			return err
		}
		args[base+4] = string(pj.state)
		var step, fin, errs any
		if p.Step != "" {
			step = p.Step
		}
		if pj.state == contract.StateCancelled {
			fin = s.d.Time(di.now)
			e, err := sqlq.EncodeError(pj.plan.Cancel)
			if err != nil {
				return err
			}
			errs = "[" + e + "]"
		}
		args = append(args, string(p.OnDependencyFailure), step, int64(len(pj.refs)), int64(pj.plan.WaitingFor),
			int64(pj.plan.Ends.Completed), int64(pj.plan.Ends.Cancelled), int64(pj.plan.Ends.Discarded), di.wants[i], fin, errs)
	}
	values := strings.Repeat(insertDepsRowSQL+",", len(part)-1) + insertDepsRowSQL
	got, err := s.insertStatement(ctx, di.c, s.q.insertDeps, s.q.insertDepsReturning, values, args, len(part))
	if err != nil {
		return err
	}
	for k, i := range part {
		p, pj := &di.jobs[i], di.planned[i]
		j := sqlq.InsertedJob(got[k], p, di.now)
		j.State, j.WaitingFor, j.DependencyEnds = pj.state, pj.plan.WaitingFor, pj.plan.Ends
		j.Step, j.OnDependencyFailure = p.Step, p.OnDependencyFailure
		if pj.state == contract.StateCancelled {
			j.FinishedAt = j.CreatedAt
			j.Errors = []contract.AttemptError{pj.plan.Cancel}
		}
		di.res[i] = contract.InsertResult{Job: j}
	}
	return nil
}

// finish writes the edges of the jobs inserted, sets their workflow ids
// and completes their results (DependsOn, WorkflowID).
func (di *depInsert) finish(ctx context.Context) error {
	s := di.s
	type edge struct {
		dep, job int64
		settled  bool
	}
	var edges []edge
	var wfIDs []int64
	var wf int64
	for i := range di.jobs {
		pj, r := di.planned[i], di.res[i]
		if pj == nil || r.Duplicate || r.Job == nil {
			continue
		}
		j := r.Job
		if p := &di.jobs[i]; p.Step != "" || p.InWorkflow {
			if wf == 0 {
				wf = j.ID
			}
			wfIDs = append(wfIDs, j.ID)
		}
		if len(pj.refs) == 0 {
			continue
		}
		j.DependsOn = make([]int64, 0, len(pj.refs))
		for _, ref := range pj.refs {
			id := ref.id
			if ref.index >= 0 {
				id = di.res[ref.index].Job.ID
			}
			j.DependsOn = append(j.DependsOn, id)
			edges = append(edges, edge{dep: id, job: j.ID, settled: di.refState(ref).Final()})
		}
		slices.Sort(j.DependsOn)
	}
	for start := 0; start < len(edges); start += edgesChunk {
		part := edges[start:min(len(edges), start+edgesChunk)]
		args := make([]any, 0, 3*len(part))
		for _, e := range part {
			args = append(args, e.dep, e.job, e.settled)
		}
		values := strings.Repeat("(?,?,?),", len(part)-1) + "(?,?,?)"
		if _, err := di.c.Exec(ctx, fmt.Sprintf(s.q.insertEdges, values), args...); err != nil {
			return err
		}
	}
	for start := 0; start < len(wfIDs); start += depsChunk {
		part := wfIDs[start:min(len(wfIDs), start+depsChunk)]
		if _, err := di.c.Exec(ctx, fmt.Sprintf(s.q.setWorkflow, marks(len(part))), append([]any{wf}, int64Args(part)...)...); err != nil {
			return err
		}
	}
	for i := range di.jobs {
		r := di.res[i]
		if r.Duplicate || r.Job == nil {
			continue
		}
		if p := &di.jobs[i]; p.Step != "" || p.InWorkflow {
			r.Job.WorkflowID = wf
		}
	}
	// A later input repeating a scoped key of the call got a copy of the
	// first one's job before it was complete.
	for i, f := range di.canon {
		if f != i && di.planned[f] != nil && di.res[f].Job != nil && di.res[i].Job != nil {
			cp := *di.res[f].Job
			di.res[i].Job = &cp
		}
	}
	return nil
}
