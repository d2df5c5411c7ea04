package core

import (
	"context"
	"fmt"
	"slices"
	"unicode/utf8"

	"github.com/backlogq/backlog/core/contract"
)

// DependencyPolicy and its values: see contract.DependencyPolicy.
type DependencyPolicy = contract.DependencyPolicy

// DependencyEnds counts a job's settled dependencies by their end; see
// contract.DependencyEnds.
type DependencyEnds = contract.DependencyEnds

// The dependency policies (contract.DependencyCancel, DependencyRun) and
// limits.
const (
	DependencyCancel = contract.DependencyCancel
	DependencyRun    = contract.DependencyRun
	MaxDependencies  = contract.MaxDependencies
	// MaxWorkflowSteps is the most steps one workflow may have.
	MaxWorkflowSteps = 10_000
)

// checkDependencies checks the dependency fields of p, the i-th job of an
// insert, before the store sees them: nothing to check without any; a
// store without contract.Dependencies refuses them (ErrUnsupported); an
// index not below i, an id below 1, too many, a bad step name or policy
// are ErrInvalidJob.
func (c *Client) checkDependencies(p *InsertParams, i int) error {
	if len(p.DependsOn) == 0 && len(p.DependsOnIndex) == 0 && p.Step == "" && !p.InWorkflow && p.OnDependencyFailure == DependencyCancel {
		return nil
	}
	if _, ok := c.store.(contract.Dependencies); !ok {
		return fmt.Errorf("%w: job dependencies and workflows (the store does not implement contract.Dependencies)", ErrUnsupported)
	}
	if !p.OnDependencyFailure.Valid() {
		return invalid("kind %q: unknown dependency policy %q (want %q or %q)", p.Kind, p.OnDependencyFailure, DependencyCancel, DependencyRun)
	}
	if n := len(p.DependsOn) + len(p.DependsOnIndex); n > MaxDependencies {
		return invalid("kind %q: %d dependencies, over the limit of %d", p.Kind, n, MaxDependencies)
	}
	for _, id := range p.DependsOn {
		if id < 1 {
			return invalid("kind %q: dependency id %d is below 1", p.Kind, id)
		}
	}
	for _, k := range p.DependsOnIndex {
		if k < 0 || k >= i {
			return invalid("kind %q: DependsOnIndex %d is not the index of an earlier job of the insert", p.Kind, k)
		}
	}
	if len(p.Step) > contract.MaxStepLen || !utf8.ValidString(p.Step) {
		return invalid("step name must be 0..%d bytes of UTF-8", contract.MaxStepLen)
	}
	return nil
}

// Workflow is a directed acyclic graph of steps inserted in one call and
// one transaction (Client.EnqueueWorkflow, EnqueueWorkflowTx): each step
// is a job that waits for the steps it names as After, and runs once
// they all completed; a step that fails for good (discarded, cancelled)
// cancels the steps after it, unless they run anyway
// (Options.OnDependencyFailure = DependencyRun). Build it with Add; the
// zero value is empty and ready. Borrowed from the workflows of Oban Pro
// and River Pro and the chains of Celery, open here on every store with
// contract.Dependencies.
type Workflow struct {
	steps []workflowStep
}

type workflowStep struct {
	name  string
	kind  string
	args  Args
	raw   []byte
	opts  *Options
	after []string
}

// Add appends a step named name (unique in the workflow, 1..MaxStepLen
// bytes) that runs args, with opts (nil: the defaults; DependsOn may name
// jobs outside the workflow by id), after the steps named in after
// (names of the same workflow, in any order of Add). It returns w for
// chaining. Errors (an unknown name, a cycle, a duplicate) are reported
// by EnqueueWorkflow.
func (w *Workflow) Add(name string, args Args, opts *Options, after ...string) *Workflow {
	w.steps = append(w.steps, workflowStep{name: name, args: args, opts: opts, after: slices.Clone(after)})
	return w
}

// AddRaw is Add with a kind and JSON args (nil means {}).
func (w *Workflow) AddRaw(name, kind string, args []byte, opts *Options, after ...string) *Workflow {
	w.steps = append(w.steps, workflowStep{name: name, kind: kind, raw: args, opts: opts, after: slices.Clone(after)})
	return w
}

// Len returns how many steps w has.
func (w *Workflow) Len() int { return len(w.steps) }

// WorkflowResult is an inserted workflow: its id (the id of its first
// step in insert order, Job.WorkflowID of every step) and its steps' jobs
// by step name.
type WorkflowResult struct {
	ID    int64
	Steps map[string]*Job
}

// plan returns w's steps as InsertParams in an order where every step
// comes after the steps it waits for (Kahn's algorithm, ties in the
// order of Add), with DependsOnIndex set. An empty workflow, more than
// MaxWorkflowSteps steps, a step name empty, too long or used twice, an
// unknown name in After or a cycle are ErrInvalidJob.
func (w *Workflow) plan(c *Client) ([]InsertParams, error) {
	n := len(w.steps)
	if n == 0 {
		return nil, invalid("workflow has no steps")
	}
	if n > MaxWorkflowSteps {
		return nil, invalid("workflow has %d steps, over the limit of %d", n, MaxWorkflowSteps)
	}
	index := make(map[string]int, n)
	for i, s := range w.steps {
		if s.name == "" || len(s.name) > contract.MaxStepLen || !utf8.ValidString(s.name) {
			return nil, invalid("workflow step %d: name must be 1..%d bytes of UTF-8", i, contract.MaxStepLen)
		}
		if _, dup := index[s.name]; dup {
			return nil, invalid("workflow step %q is added twice", s.name)
		}
		index[s.name] = i
	}
	indegree := make([]int, n)
	next := make([][]int, n)
	for i, s := range w.steps {
		seen := map[string]bool{}
		for _, a := range s.after {
			j, ok := index[a]
			if !ok {
				return nil, invalid("workflow step %q runs after %q, which is not a step of the workflow", s.name, a)
			}
			if seen[a] {
				continue
			}
			seen[a] = true
			indegree[i]++
			next[j] = append(next[j], i)
		}
	}
	order := make([]int, 0, n)
	for i := range n {
		if indegree[i] == 0 {
			order = append(order, i)
		}
	}
	for k := 0; k < len(order); k++ {
		for _, i := range next[order[k]] {
			if indegree[i]--; indegree[i] == 0 {
				order = append(order, i)
			}
		}
	}
	if len(order) < n {
		var stuck []string
		for i := range n {
			if indegree[i] > 0 {
				stuck = append(stuck, w.steps[i].name)
			}
		}
		return nil, invalid("workflow has a cycle among steps %q", stuck)
	}
	pos := make([]int, n)
	for k, i := range order {
		pos[i] = k
	}
	now := c.clock.Now()
	out := make([]InsertParams, n)
	for k, i := range order {
		s := w.steps[i]
		var p InsertParams
		var err error
		if s.args != nil {
			var b []byte
			if b, err = encodeArgs(s.args); err == nil {
				p, err = buildInsert(s.args.Kind(), b, s.opts, now, c.limits())
			}
		} else {
			p, err = buildInsert(s.kind, s.raw, s.opts, now, c.limits())
		}
		if err != nil {
			return nil, fmt.Errorf("workflow step %q: %w", s.name, err)
		}
		p.Step = s.name
		for _, a := range s.after {
			if d := pos[index[a]]; !slices.Contains(p.DependsOnIndex, d) {
				p.DependsOnIndex = append(p.DependsOnIndex, d)
			}
		}
		out[k] = p
	}
	return out, nil
}

// EnqueueWorkflow inserts every step of w in one store call (one
// transaction): each waits for the steps it runs after and is released
// by the finish of its last one (see contract.Dependencies). It returns
// the workflow's id and its steps' jobs. Errors: an invalid workflow or
// step wraps ErrInvalidJob (inserting nothing), a store without
// dependencies ErrUnsupported, an unknown kind ErrUnknownKind.
func (c *Client) EnqueueWorkflow(ctx context.Context, w *Workflow) (WorkflowResult, error) {
	ps, err := w.plan(c)
	if err != nil {
		return WorkflowResult{}, err
	}
	res, err := c.EnqueueMany(ctx, ps)
	if err != nil {
		return WorkflowResult{}, err
	}
	return workflowResult(ps, res), nil
}

// EnqueueWorkflowTx is EnqueueWorkflow inside tx, the caller's open
// transaction (as EnqueueTx): the steps exist exactly when it commits.
func (c *Client) EnqueueWorkflowTx(ctx context.Context, tx any, w *Workflow) (WorkflowResult, error) {
	ps, err := w.plan(c)
	if err != nil {
		return WorkflowResult{}, err
	}
	res, err := c.EnqueueTx(ctx, tx, ps)
	if err != nil {
		return WorkflowResult{}, err
	}
	return workflowResult(ps, res), nil
}

func workflowResult(ps []InsertParams, res []InsertResult) WorkflowResult {
	out := WorkflowResult{Steps: make(map[string]*Job, len(ps))}
	for i, p := range ps {
		out.Steps[p.Step] = res[i].Job
		if out.ID == 0 && res[i].Job != nil {
			out.ID = res[i].Job.WorkflowID
		}
	}
	return out
}
