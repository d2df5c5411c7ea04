package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/backlogq/backlog/core/contract"

	"github.com/spf13/cobra"

	"github.com/backlogq/backlog/adapters/httpapi"
	"github.com/backlogq/backlog/adapters/httpapi/client"
	"github.com/backlogq/backlog/core"
)

// ops is what the commands that inspect and administer jobs, queues,
// workers and periodic jobs do. storeOps does it on the store named by
// --db, serverOps through a job server's HTTP API (--server): a command
// is written once against ops, so its output is the same either way.
// Errors keep the core sentinels (core.ErrNotFound, core.ErrInvalidState,
// core.ErrUnknownPeriodic …) in both.
type ops interface {
	// ListJobs returns up to p.Limit jobs matching p, ordered by id (or
	// by run_at with p.ByRunAt).
	ListJobs(ctx context.Context, p core.ListParams) ([]*core.Job, error)
	GetJob(ctx context.Context, id int64) (*core.Job, error)
	// ListArchivedJobs is ListJobs over the archive of finished jobs
	// (core.Retention.Archive).
	ListArchivedJobs(ctx context.Context, p core.ListParams) ([]*core.Job, error)
	// FindJob is GetJob that falls back to the archive when the jobs
	// have no job with that id; archived says where it was found.
	FindJob(ctx context.Context, id int64) (j *core.Job, archived bool, err error)
	CancelJob(ctx context.Context, id int64) (*core.Job, error)
	RetryJob(ctx context.Context, id int64) (*core.Job, error)
	DeleteJob(ctx context.Context, id int64) error
	// ApplyToMatching applies action to the jobs matching p's filters
	// (core.Client.ApplyToMatching). storeOps calls opts.OnJob for each
	// job; serverOps (POST /v1/jobs/bulk) only returns the counts.
	ApplyToMatching(ctx context.Context, action core.BulkAction, p core.ListParams, opts core.BulkOptions) (core.BulkResult, error)
	// Enqueue inserts the jobs, one result per job in order.
	Enqueue(ctx context.Context, jobs []core.InsertParams) ([]core.InsertResult, error)
	QueueStats(ctx context.Context) ([]core.QueueStats, error)
	PauseQueue(ctx context.Context, queue string) error
	ResumeQueue(ctx context.Context, queue string) error
	QueueLimits(ctx context.Context, queue string) (core.QueueLimits, error)
	// SetQueueLimits stores l and returns the limits read back.
	SetQueueLimits(ctx context.Context, queue string, l core.QueueLimits) (core.QueueLimits, error)
	// RateWaits returns the queue's rate-limited groups that wait.
	RateWaits(ctx context.Context, queue string) ([]core.RateWait, error)
	Workers(ctx context.Context) ([]core.WorkerInfo, error)
	PeriodicJobs(ctx context.Context) ([]core.PeriodicStatus, error)
	PausePeriodic(ctx context.Context, name string) error
	ResumePeriodic(ctx context.Context, name string) error
	// RunPeriodicNow enqueues one job of the periodic job now and returns it.
	RunPeriodicNow(ctx context.Context, name string) (*core.Job, error)
	// SubmitWorkflow and SubmitBatch insert a workflow or batch given as
	// the HTTP API's body (POST /v1/workflows, POST /v1/batches).
	SubmitWorkflow(ctx context.Context, req httpapi.WorkflowRequest) (core.WorkflowResult, error)
	SubmitBatch(ctx context.Context, req httpapi.BatchCreateRequest) (core.BatchResult, error)
	// ListWorkflows returns up to limit workflows (batches: batches)
	// with ids below after (0: the newest), newest first, and whether
	// more may follow.
	ListWorkflows(ctx context.Context, batches bool, after int64, limit int) ([]core.WorkflowStatus, bool, error)
	// GetWorkflow returns workflow id's status and steps (batch: batch
	// id's status and callbacks); core.ErrNotFound when there is none of
	// that sort.
	GetWorkflow(ctx context.Context, id int64, batch bool) (httpapi.WorkflowDetail, error)
	// CancelWorkflow cancels every job of workflow (batch) id not yet
	// final (core.Client.CancelWorkflow); core.ErrNotFound as GetWorkflow.
	CancelWorkflow(ctx context.Context, id int64, batch bool) (core.BulkResult, error)
}

// opsOpts says how a command's ops open the store in --db mode.
type opsOpts struct {
	write    bool             // open for writing; false: withReadStore (no migration, no new SQLite file)
	migrate  bool             // migrate the schema first (write only)
	enc      *core.Encryption // seal args under these keys (enqueue)
	periodic []core.PeriodicJob
	dbURL    string // the store URL; "" = --db
	// allowUnknownKinds: enqueue kinds no live worker announced
	// (core.Config.AllowUnknownKinds).
	allowUnknownKinds bool
}

// withOps runs fn with the ops of this command line: through the job
// server when --server (or BACKLOG_SERVER) is set, else on the store.
func (a *app) withOps(ctx context.Context, o opsOpts, fn func(ops) error) error {
	if a.server != "" {
		so, err := a.serverOps()
		if err != nil {
			return err
		}
		return fn(so)
	}
	body := func(st contract.Store) error {
		if o.migrate {
			if _, err := migrate(ctx, st); err != nil {
				return err
			}
		}
		cl, err := core.NewClient(st, core.Config{
			Logger: a.log, MaintenanceInterval: -1, Encryption: o.enc,
			Periodic: o.periodic, AllowUnknownKinds: o.periodic != nil || o.allowUnknownKinds,
		})
		if err != nil {
			return usageError{err}
		}
		return fn(storeOps{cl})
	}
	switch {
	case o.dbURL != "":
		st, err := openStoreURL(ctx, o.dbURL)
		if err != nil {
			return err
		}
		defer st.Close()
		return body(st)
	case o.write:
		return a.withStore(ctx, body)
	default:
		return a.withReadStore(ctx, body)
	}
}

// storeOps are ops on a store, through a client that neither works queues
// nor runs maintenance.
type storeOps struct{ c *core.Client }

func (s storeOps) ListJobs(ctx context.Context, p core.ListParams) ([]*core.Job, error) {
	return s.c.ListJobs(ctx, p)
}
func (s storeOps) GetJob(ctx context.Context, id int64) (*core.Job, error) {
	return s.c.GetJob(ctx, id)
}
func (s storeOps) ListArchivedJobs(ctx context.Context, p core.ListParams) ([]*core.Job, error) {
	return s.c.ListArchivedJobs(ctx, p)
}
func (s storeOps) FindJob(ctx context.Context, id int64) (*core.Job, bool, error) {
	return s.c.FindJob(ctx, id)
}
func (s storeOps) CancelJob(ctx context.Context, id int64) (*core.Job, error) {
	return s.c.CancelJob(ctx, id)
}
func (s storeOps) RetryJob(ctx context.Context, id int64) (*core.Job, error) {
	return s.c.RetryJob(ctx, id)
}
func (s storeOps) DeleteJob(ctx context.Context, id int64) error { return s.c.DeleteJob(ctx, id) }
func (s storeOps) ApplyToMatching(ctx context.Context, action core.BulkAction, p core.ListParams, opts core.BulkOptions) (core.BulkResult, error) {
	return s.c.ApplyToMatching(ctx, action, p, opts)
}
func (s storeOps) Enqueue(ctx context.Context, jobs []core.InsertParams) ([]core.InsertResult, error) {
	return s.c.EnqueueMany(ctx, jobs)
}
func (s storeOps) QueueStats(ctx context.Context) ([]core.QueueStats, error) {
	return s.c.Store().Stats(ctx)
}
func (s storeOps) PauseQueue(ctx context.Context, q string) error  { return s.c.PauseQueue(ctx, q) }
func (s storeOps) ResumeQueue(ctx context.Context, q string) error { return s.c.ResumeQueue(ctx, q) }
func (s storeOps) QueueLimits(ctx context.Context, q string) (core.QueueLimits, error) {
	return s.c.QueueLimits(ctx, q)
}
func (s storeOps) RateWaits(ctx context.Context, q string) ([]core.RateWait, error) {
	return s.c.RateWaits(ctx, q)
}
func (s storeOps) SetQueueLimits(ctx context.Context, q string, l core.QueueLimits) (core.QueueLimits, error) {
	if err := s.c.SetQueueLimits(ctx, q, l); err != nil {
		return core.QueueLimits{}, err
	}
	return s.c.QueueLimits(ctx, q)
}
func (s storeOps) Workers(ctx context.Context) ([]core.WorkerInfo, error) {
	return s.c.ListWorkers(ctx)
}
func (s storeOps) PeriodicJobs(ctx context.Context) ([]core.PeriodicStatus, error) {
	return s.c.PeriodicJobs(ctx)
}
func (s storeOps) PausePeriodic(ctx context.Context, name string) error {
	return s.c.PausePeriodic(ctx, name)
}
func (s storeOps) ResumePeriodic(ctx context.Context, name string) error {
	return s.c.ResumePeriodic(ctx, name)
}
func (s storeOps) RunPeriodicNow(ctx context.Context, name string) (*core.Job, error) {
	r, err := s.c.RunPeriodicNow(ctx, name)
	if err != nil {
		return nil, err
	}
	return r.Job, nil
}

// serverOps are ops through a job server's HTTP API (the Go client of
// adapters/httpapi/client), authenticated by --token.
type serverOps struct {
	c        *client.Client
	hasToken bool
}

// serverOps returns the ops of --server; a malformed URL is a usage error.
func (a *app) serverOps() (serverOps, error) {
	c, err := client.New(a.server, client.WithToken(a.token), client.WithLogger(a.log), client.WithUserAgent("backlog-cli/1"))
	if err != nil {
		return serverOps{}, usageError{fmt.Errorf("--server: %w", err)}
	}
	return serverOps{c: c, hasToken: a.token != ""}, nil
}

// API roles, as named in error messages (httpapi.Tokens).
const (
	roleProducer = "producer"
	roleAdmin    = "admin"
)

// roleError is a 401 or 403 of the job server turned into a message that
// names the role the call needs. It still matches the client's sentinels
// (client.ErrUnauthorized, client.ErrForbidden).
type roleError struct {
	msg string
	err error
}

func (e *roleError) Error() string { return e.msg }
func (e *roleError) Unwrap() error { return e.err }

// check explains an authentication failure of a call that needs role.
func (s serverOps) check(err error, role string) error {
	if err == nil {
		return nil
	}
	who := redactURL(s.c.BaseURL())
	switch {
	case errors.Is(err, client.ErrUnauthorized) && !s.hasToken:
		return &roleError{fmt.Sprintf("the job server at %s wants a token (401 unauthorized): pass --token or set BACKLOG_TOKEN to a token of the %s role", who, role), err}
	case errors.Is(err, client.ErrUnauthorized):
		return &roleError{fmt.Sprintf("the job server at %s does not accept this token (401 unauthorized): this needs a token of the %s role", who, role), err}
	case errors.Is(err, client.ErrForbidden):
		return &roleError{fmt.Sprintf("this needs a token of the %s role; the job server at %s refused this token's role (403 forbidden)", role, who), err}
	}
	return err
}

// checkPeriodic is check for an admin call on the periodic job name: a
// name the server does not list reads as the engine says it
// (core.ErrUnknownPeriodic).
func (s serverOps) checkPeriodic(err error, name string) error {
	if errors.Is(err, core.ErrUnknownPeriodic) {
		return described{fmt.Sprintf("%v: %q", core.ErrUnknownPeriodic, name), err}
	}
	return s.check(err, roleAdmin)
}

// maxServerPage is the most jobs one GET /v1/jobs page may hold.
const maxServerPage = httpapi.MaxClaimLimit

func (s serverOps) ListJobs(ctx context.Context, p core.ListParams) ([]*core.Job, error) {
	return s.listJobs(ctx, p, false)
}

// ListArchivedJobs lists the server's archive (GET /v1/jobs?archived=true).
func (s serverOps) ListArchivedJobs(ctx context.Context, p core.ListParams) ([]*core.Job, error) {
	return s.listJobs(ctx, p, true)
}

// FindJob is GET /v1/jobs/{id}, which falls back to the archive.
func (s serverOps) FindJob(ctx context.Context, id int64) (*core.Job, bool, error) {
	j, err := s.c.GetJob(ctx, id)
	if err != nil {
		return nil, false, s.check(err, roleProducer)
	}
	return coreJob(j), j.Archived, nil
}

func (s serverOps) listJobs(ctx context.Context, p core.ListParams, archived bool) ([]*core.Job, error) {
	want := p.Limit
	if want <= 0 {
		want = 100
	}
	req := client.ListParams{Queue: p.Queue, States: p.States, Kind: p.Kind, After: p.AfterID, Desc: p.Desc, ByRunAt: p.ByRunAt, AfterRunAt: p.AfterRunAt, Archived: archived, WorkflowID: p.WorkflowID}
	var out []*core.Job
	for len(out) < want {
		req.Limit = min(maxServerPage, want-len(out))
		page, err := s.c.ListJobs(ctx, req)
		if err != nil {
			return nil, s.check(err, roleProducer)
		}
		for _, j := range page.Jobs {
			out = append(out, coreJob(j))
		}
		if page.NextAfter == 0 || len(page.Jobs) == 0 {
			break
		}
		req.After, req.AfterRunAt = page.NextAfter, page.NextAfterRunAt
	}
	return out, nil
}

func (s serverOps) GetJob(ctx context.Context, id int64) (*core.Job, error) {
	j, err := s.c.GetJob(ctx, id)
	if err != nil {
		return nil, s.check(err, roleProducer)
	}
	return coreJob(j), nil
}

func (s serverOps) CancelJob(ctx context.Context, id int64) (*core.Job, error) {
	j, err := s.c.CancelJob(ctx, id)
	if err != nil {
		return nil, s.check(err, roleAdmin)
	}
	return coreJob(j), nil
}

func (s serverOps) RetryJob(ctx context.Context, id int64) (*core.Job, error) {
	j, err := s.c.RetryJob(ctx, id)
	if err != nil {
		return nil, s.check(err, roleAdmin)
	}
	return coreJob(j), nil
}

func (s serverOps) DeleteJob(ctx context.Context, id int64) error {
	return s.check(s.c.DeleteJob(ctx, id), roleAdmin)
}

// ApplyToMatching asks the server to apply action to the jobs matching
// p's queue, kind and states (POST /v1/jobs/bulk); opts.OnJob is not
// called (the server answers with counts and the first ids only), and
// opts.BatchSize is the server's business.
func (s serverOps) ApplyToMatching(ctx context.Context, action core.BulkAction, p core.ListParams, opts core.BulkOptions) (core.BulkResult, error) {
	res, err := s.c.Bulk(ctx, client.BulkRequest{
		Action: action,
		Filter: client.BulkFilter{Queue: p.Queue, Kind: p.Kind, States: p.States, IDs: opts.IDs},
		Limit:  opts.Limit, DryRun: opts.DryRun,
	})
	return res, s.check(err, roleAdmin)
}

// Enqueue submits the jobs: one by POST /v1/jobs, more by POST
// /v1/jobs/batch in batches of at most httpapi.MaxBatch. A failed batch
// returns the results of the batches before it with the error.
func (s serverOps) Enqueue(ctx context.Context, jobs []core.InsertParams) ([]core.InsertResult, error) {
	reqs := make([]client.SubmitRequest, len(jobs))
	for i, p := range jobs {
		reqs[i] = submitRequest(p)
	}
	if len(reqs) == 1 {
		r, err := s.c.Submit(ctx, reqs[0])
		if err != nil {
			return nil, s.check(err, roleProducer)
		}
		return []core.InsertResult{{Job: coreJob(r.Job), Duplicate: r.Duplicate}}, nil
	}
	out := make([]core.InsertResult, 0, len(reqs))
	for start := 0; start < len(reqs); start += httpapi.MaxBatch {
		res, err := s.c.SubmitBatch(ctx, reqs[start:min(start+httpapi.MaxBatch, len(reqs))])
		if err != nil {
			return out, s.check(err, roleProducer)
		}
		for _, r := range res {
			out = append(out, core.InsertResult{Job: coreJob(r.Job), Duplicate: r.Duplicate})
		}
	}
	return out, nil
}

// submitRequest is the submission of p, validated by core.NewInsertRaw:
// every default is already filled in and RunAt is absolute.
func submitRequest(p core.InsertParams) client.SubmitRequest {
	r := client.SubmitRequest{
		Kind: p.Kind, Args: p.Args, Queue: p.Queue, Priority: p.Priority, RunAt: p.RunAt,
		MaxAttempts: p.MaxAttempts, UniqueKey: p.UniqueKey, PartitionKey: p.PartitionKey,
		Tags: p.Tags, Deadline: p.Deadline, Metadata: p.Metadata,
	}
	if p.UniqueKey != "" {
		r.UniqueScope = p.UniqueScope.String()
		r.UniqueFor = p.UniqueFor
	}
	return r
}

func (s serverOps) QueueStats(ctx context.Context) ([]core.QueueStats, error) {
	qs, err := s.c.Queues(ctx)
	if err != nil {
		return nil, s.check(err, roleProducer)
	}
	out := make([]core.QueueStats, 0, len(qs))
	for _, q := range qs {
		out = append(out, core.QueueStats{Queue: q.Queue, Paused: q.Paused, Counts: q.Counts})
	}
	return out, nil
}

// PauseQueue and ResumeQueue send create=true: the queue commands refuse
// unknown queues themselves, before calling (checkQueueKnown).
func (s serverOps) PauseQueue(ctx context.Context, q string) error {
	_, err := s.c.PauseQueue(ctx, q, client.CreateQueue())
	return s.check(err, roleAdmin)
}

func (s serverOps) ResumeQueue(ctx context.Context, q string) error {
	_, err := s.c.ResumeQueue(ctx, q, client.CreateQueue())
	return s.check(err, roleAdmin)
}

func (s serverOps) QueueLimits(ctx context.Context, q string) (core.QueueLimits, error) {
	l, err := s.c.QueueLimits(ctx, q)
	return l, s.check(err, roleProducer)
}

func (s serverOps) RateWaits(ctx context.Context, q string) ([]core.RateWait, error) {
	w, err := s.c.RateWaits(ctx, q)
	return w, s.check(err, roleProducer)
}

func (s serverOps) SetQueueLimits(ctx context.Context, q string, l core.QueueLimits) (core.QueueLimits, error) {
	l, err := s.c.SetQueueLimits(ctx, q, l)
	return l, s.check(err, roleAdmin)
}

func (s serverOps) Workers(ctx context.Context) ([]core.WorkerInfo, error) {
	ws, err := s.c.Workers(ctx)
	if err != nil {
		return nil, s.check(err, roleAdmin)
	}
	out := make([]core.WorkerInfo, 0, len(ws))
	for _, w := range ws {
		out = append(out, core.WorkerInfo{
			ID: w.ID, Host: w.Name, PID: w.PID, Queues: w.Queues, Tags: w.Tags, Metadata: w.Metadata,
			StartedAt: w.StartedAt, HeartbeatAt: w.HeartbeatAt,
		})
	}
	return out, nil
}

func (s serverOps) PeriodicJobs(ctx context.Context) ([]core.PeriodicStatus, error) {
	ps, err := s.c.PeriodicJobs(ctx)
	return ps, s.check(err, roleProducer)
}

func (s serverOps) PausePeriodic(ctx context.Context, name string) error {
	_, err := s.c.PausePeriodic(ctx, name)
	return s.checkPeriodic(err, name)
}

func (s serverOps) ResumePeriodic(ctx context.Context, name string) error {
	_, err := s.c.ResumePeriodic(ctx, name)
	return s.checkPeriodic(err, name)
}

func (s serverOps) RunPeriodicNow(ctx context.Context, name string) (*core.Job, error) {
	r, err := s.c.RunPeriodicNow(ctx, name)
	if err != nil {
		return nil, s.checkPeriodic(err, name)
	}
	return coreJob(r.Job), nil
}

// coreJob is an API job as the store would return it. The API gives a
// result that is not JSON as a JSON string of its text; such a string is
// turned back into the text, so that a shell handler's output reads the
// same as from the store. (A result that was itself a JSON string whose
// text is not JSON reads as that text; results that are JSON arrive
// compacted.)
func coreJob(j *client.Job) *core.Job {
	if j == nil {
		return nil
	}
	cj := j.CoreJob()
	if len(j.Result) > 0 && j.Result[0] == '"' {
		var s string
		if json.Unmarshal(j.Result, &s) == nil && !json.Valid([]byte(s)) {
			cj.Result = []byte(s)
		}
	}
	return cj
}

// Annotations of commands, read by checkTarget.
const (
	// annTarget is the key; its values say what a command works on.
	annTarget = "backlog-target"
	// targetEither: the store (--db) or a job server (--server).
	targetEither = "db-or-server"
	// targetDB: only a store; --server is refused.
	targetDB = "db"
)

// markTarget sets what cmd works on (annTarget); subcommands inherit it.
func markTarget(cmd *cobra.Command, target string) *cobra.Command {
	if cmd.Annotations == nil {
		cmd.Annotations = map[string]string{}
	}
	cmd.Annotations[annTarget] = target
	return cmd
}

// targetOf is cmd's annTarget, or its nearest parent's; "" for commands
// that touch neither (version, help).
func targetOf(cmd *cobra.Command) string {
	for c := cmd; c != nil; c = c.Parent() {
		if t := c.Annotations[annTarget]; t != "" {
			return t
		}
	}
	return ""
}

// resolveTarget decides between --db and --server for cmd. Flags win over
// the environment: --server ignores BACKLOG_DB, --db ignores
// BACKLOG_SERVER; both flags, or both variables without a flag, are a
// usage error, and so is a server for a command that needs the database.
// work has its own --server (a remote worker, remote.go) and keeps it.
func (a *app) resolveTarget(cmd *cobra.Command) error {
	getenv := func(k string) string {
		if a.env.getenv == nil {
			return ""
		}
		return a.env.getenv(k)
	}
	fl := cmd.Flags()
	dbFlag := fl.Changed("db")
	own := cmd.LocalNonPersistentFlags().Lookup("server") != nil // work --server
	serverFlag := !own && fl.Changed("server")
	if !serverFlag {
		a.server = ""
	}
	envServer, envDB := getenv("BACKLOG_SERVER"), getenv("BACKLOG_DB")
	a.dbGiven = dbFlag || envDB != ""
	if a.token == "" {
		a.token = getenv("BACKLOG_TOKEN")
	}
	switch {
	case serverFlag && dbFlag:
		return usagef("give --db or --server, not both: --db works on the database itself, --server through a job server's HTTP API")
	case serverFlag:
		if a.server == "" {
			return usagef("--server is empty; give the job server's URL, e.g. http://127.0.0.1:8080")
		}
	case own && !fl.Changed("server") && !dbFlag && envServer != "" && envDB == "":
		return usagef("BACKLOG_SERVER is set, but %s runs on the database: give --db (or BACKLOG_DB), or --server URL to run a remote worker of that job server", cmd.CommandPath())
	case dbFlag || own:
	case envServer != "" && envDB != "":
		return usagef("BACKLOG_DB and BACKLOG_SERVER are both set: unset one, or choose with --db or --server")
	case envServer != "":
		a.server = envServer
	}
	if a.server == "" {
		return nil
	}
	switch targetOf(cmd) {
	case targetEither:
		from := "--server"
		if !serverFlag {
			from = "BACKLOG_SERVER"
		}
		return checkServerURL(a.server, from)
	case targetDB:
		from := "--server"
		if !serverFlag {
			from = "BACKLOG_SERVER"
		}
		return usagef("%s needs the database and cannot work through a job server (%s is set); give --db (or BACKLOG_DB) instead", cmd.CommandPath(), from)
	}
	a.server = "" // version, help: neither
	return nil
}
