package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/backlogq/backlog/adapters/httpapi"
	"github.com/backlogq/backlog/adapters/httpapi/apitypes"
	"github.com/backlogq/backlog/core"
)

// flowKind names what a workflows or batches command works on.
type flowKind struct {
	batch  bool
	name   string // "workflow" or "batch"
	plural string // "workflows" or "batches"
}

var (
	workflowKind = flowKind{batch: false, name: "workflow", plural: "workflows"}
	batchKind    = flowKind{batch: true, name: "batch", plural: "batches"}
)

func (a *app) newWorkflowsCmd(k flowKind) *cobra.Command {
	short := "List, inspect, cancel and submit workflows (steps that wait for the steps they run after)"
	if k.batch {
		short = "List, inspect, cancel and submit batches (jobs with on_finish and on_success callbacks)"
	}
	cmd := &cobra.Command{
		Use:   k.plural,
		Short: short,
		Args:  argsRange(0, 1),
		RunE:  helpOrUnknown,
	}
	cmd.AddCommand(a.newFlowListCmd(k), a.newFlowGetCmd(k), a.newFlowCancelCmd(k), a.newFlowSubmitCmd(k))
	return cmd
}

func (a *app) newFlowListCmd(k flowKind) *cobra.Command {
	var (
		after int64
		limit int
	)
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List " + k.plural + ", newest first, with their counts by state",
		Long: `list prints ` + k.plural + ` newest first, each with its jobs counted by state
(read from every job of each ` + k.name + ` listed). Page through them with --after:
pass the last id of one page to get the next.`,
		Example: fmt.Sprintf("  backlog %s list\n  backlog %s list --limit 50 --after 1200 -o json", k.plural, k.plural),
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if limit < 1 || limit > httpapi.MaxWorkflowPage {
				return usagef("--limit must be 1..%d", httpapi.MaxWorkflowPage)
			}
			if after < 0 {
				return usagef("--after must not be negative")
			}
			return a.withOps(cmd.Context(), opsOpts{}, func(o ops) error {
				list, more, err := o.ListWorkflows(cmd.Context(), k.batch, after, limit)
				if err != nil {
					return fmt.Errorf("list %s: %w", k.plural, describe(err))
				}
				if a.jsonOutput() {
					return writeJSON(a.env.stdout, list)
				}
				t := newTable(a.env.stdout, "ID", "JOBS", "DONE", "COUNTS", "CREATED_AT", "FINISHED_AT")
				for _, st := range list {
					t.row(strconv.FormatInt(st.ID, 10), strconv.Itoa(st.Jobs), strconv.FormatBool(st.Done),
						fmtCounts(st.Counts), fmtTime(st.CreatedAt), fmtTime(st.FinishedAt))
				}
				if err := t.flush(); err != nil {
					return err
				}
				if more {
					fmt.Fprintf(a.env.stderr, "(%d %s shown; more may follow: --after %d)\n", len(list), k.plural, list[len(list)-1].ID)
				}
				return nil
			})
		},
	}
	fl := cmd.Flags()
	fl.Int64Var(&after, "after", 0, "start after this id (the last of the previous page)")
	fl.IntVar(&limit, "limit", 20, fmt.Sprintf("at most this many %s (1..%d)", k.plural, httpapi.MaxWorkflowPage))
	return cmd
}

// fmtCounts prints counts by state in the order of core.AllStates:
// "completed=3 waiting=1".
func fmtCounts(c map[core.State]int) string {
	var parts []string
	for _, s := range core.AllStates {
		if n := c[s]; n > 0 {
			parts = append(parts, fmt.Sprintf("%s=%d", s, n))
		}
	}
	return strings.Join(parts, " ")
}

func (a *app) newFlowGetCmd(k flowKind) *cobra.Command {
	long := `get prints a workflow's status (its jobs counted by state, done, times) and
its steps in id order: name, id, kind, state, attempts, the dependencies it
still waits for and the ids it depends on.`
	if k.batch {
		long = `get prints a batch's status (its jobs counted by state, done, times) and its
callbacks with how the batch's jobs ended as each callback counted them. List
the batch's jobs with "backlog jobs list --workflow ID".`
	}
	return &cobra.Command{
		Use:     "get ID",
		Short:   "Show one " + k.name + " with its " + map[bool]string{false: "steps", true: "callbacks"}[k.batch],
		Long:    long,
		Example: fmt.Sprintf("  backlog %s get 42\n  backlog %s get 42 -o json", k.plural, k.plural),
		Args:    argsExactly(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ids, err := parseFlowIDs(args, k)
			if err != nil {
				return err
			}
			return a.withOps(cmd.Context(), opsOpts{}, func(o ops) error {
				d, err := o.GetWorkflow(cmd.Context(), ids[0], k.batch)
				if err != nil {
					return fmt.Errorf("%s %d: %w", k.name, ids[0], describe(err))
				}
				if a.jsonOutput() {
					return writeJSON(a.env.stdout, d)
				}
				return printFlow(a.env.stdout, k, d)
			})
		},
	}
}

// printFlow prints a workflow's or batch's status and steps or callbacks.
func printFlow(w io.Writer, k flowKind, d httpapi.WorkflowDetail) error {
	fmt.Fprintf(w, "%s %d: %d jobs, done: %t\n", k.name, d.ID, d.Jobs, d.Done)
	fmt.Fprintf(w, "counts:      %s\n", fmtCounts(d.Counts))
	fmt.Fprintf(w, "created_at:  %s\n", fmtTime(d.CreatedAt))
	if !d.FinishedAt.IsZero() {
		fmt.Fprintf(w, "finished_at: %s\n", fmtTime(d.FinishedAt))
	}
	fmt.Fprintln(w)
	if k.batch {
		if len(d.Callbacks) == 0 {
			fmt.Fprintln(w, "no callbacks")
			return nil
		}
		t := newTable(w, "CALLBACK", "ID", "KIND", "STATE", "WAITING_FOR", "COMPLETED", "CANCELLED", "DISCARDED")
		for _, j := range d.Callbacks {
			e := j.DependencyEnds
			t.row(j.Step, strconv.FormatInt(j.ID, 10), truncate(j.Kind, 40), string(j.State), strconv.Itoa(j.WaitingFor),
				strconv.Itoa(e.Completed), strconv.Itoa(e.Cancelled), strconv.Itoa(e.Discarded))
		}
		return t.flush()
	}
	t := newTable(w, "STEP", "ID", "KIND", "STATE", "ATTEMPT", "WAITING_FOR", "DEPENDS_ON")
	for _, s := range d.Steps {
		deps := make([]string, len(s.DependsOn))
		for i, id := range s.DependsOn {
			deps[i] = strconv.FormatInt(id, 10)
		}
		t.row(truncate(s.Name, 40), strconv.FormatInt(s.ID, 10), truncate(s.Kind, 40), string(s.State),
			fmt.Sprintf("%d/%d", s.Attempt, s.MaxAttempts), strconv.Itoa(s.WaitingFor), truncate(strings.Join(deps, ","), 60))
	}
	return t.flush()
}

// parseFlowIDs reads workflow or batch ids; a malformed one is a usage
// error.
func parseFlowIDs(args []string, k flowKind) ([]int64, error) {
	ids := make([]int64, 0, len(args))
	for _, s := range args {
		id, err := strconv.ParseInt(strings.TrimPrefix(s, "#"), 10, 64)
		if err != nil || id < 1 {
			return nil, usagef("%q is not a %s id (a positive integer)", s, k.name)
		}
		ids = append(ids, id)
	}
	return ids, nil
}

func (a *app) newFlowCancelCmd(k flowKind) *cobra.Command {
	var yes bool
	what := "step"
	if k.batch {
		what = "job and callback"
	}
	cmd := &cobra.Command{
		Use:   "cancel ID",
		Short: "Cancel every " + what + " of a " + k.name + " not yet final",
		Long: `cancel cancels every ` + what + ` of the ` + k.name + ` that is not final yet: the
waiting ones first, so that none is released by the cancel of what it
waits for, then the rest; a running job's handler sees the cancel. It
prints how many jobs matched, were cancelled and were skipped.

On a terminal it asks "cancel ` + k.name + ` ID (N jobs not final)? [y/N]" first;
elsewhere it refuses unless --yes is given (exit 2, nothing changed).`,
		Example: fmt.Sprintf("  backlog %s cancel 42\n  backlog %s cancel 42 --yes -o json", k.plural, k.plural),
		Args:    argsExactly(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ids, err := parseFlowIDs(args, k)
			if err != nil {
				return err
			}
			id := ids[0]
			if !yes && !a.interactive() {
				return usagef("%s cancel cancels every job of the %s at once: give --yes to confirm", k.plural, k.name)
			}
			ctx := cmd.Context()
			return a.withOps(ctx, opsOpts{write: true}, func(o ops) error {
				if !yes {
					ok, err := a.confirmFlowCancel(ctx, o, k, id)
					if err != nil || !ok {
						return err
					}
				}
				res, err := o.CancelWorkflow(ctx, id, k.batch)
				if err != nil {
					return fmt.Errorf("cancel %s %d: %w", k.name, id, describe(err))
				}
				return a.printBulkCounts("cancel", "cancelled", res)
			})
		},
	}
	cmd.Flags().BoolVarP(&yes, "yes", "y", false, "cancel without asking (needed where stdin is not a terminal)")
	return cmd
}

// confirmFlowCancel reads the status of workflow id, asks "cancel
// workflow ID (N jobs not final)? [y/N]" on stderr and reads the answer
// from stdin; it reports whether the answer was y or yes. A workflow
// already done prints so and returns false.
func (a *app) confirmFlowCancel(ctx context.Context, o ops, k flowKind, id int64) (bool, error) {
	d, err := o.GetWorkflow(ctx, id, k.batch)
	if err != nil {
		return false, fmt.Errorf("%s %d: %w", k.name, id, describe(err))
	}
	open := 0
	for st, n := range d.Counts {
		if !st.Final() {
			open += n
		}
	}
	if open == 0 {
		fmt.Fprintf(a.env.stdout, "%s %d is done: nothing to cancel\n", k.name, id)
		return false, nil
	}
	fmt.Fprintf(a.env.stderr, "cancel %s %d (%d jobs not final)? [y/N] ", k.name, id, open)
	line, err := bufio.NewReader(a.env.stdin).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return false, fmt.Errorf("cancel %s %d: read the answer: %w", k.name, id, err)
	}
	switch strings.ToLower(strings.TrimSpace(line)) {
	case "y", "yes":
		return true, nil
	}
	fmt.Fprintln(a.env.stderr, "not confirmed: nothing changed")
	return false, nil
}

// maxSubmitFile bounds the file of workflows submit and batches submit
// (the job server's body limit, httpapi.DefaultMaxBodyBytes).
const maxSubmitFile = httpapi.DefaultMaxBodyBytes

func (a *app) newFlowSubmitCmd(k flowKind) *cobra.Command {
	var allowUnknown bool
	long := `submit inserts a workflow from FILE ("-" reads stdin): the JSON body of
POST /v1/workflows, {"steps":[{"name":"extract","kind":"…","args":{…},
"after":["…"], …}]}, each step with the fields of a job as the job server
takes it (queue, priority, max_attempts, run_at, delay_seconds, deadline,
tags, metadata, unique_key, unique_scope, unique_for_seconds,
partition_key) and depends_on (ids of earlier jobs) and
on_dependency_failure ("" or "run"). Every step is inserted in one
transaction, or none; a cycle, an unknown step in after or a name given
twice is refused. It prints each step's job (-o json: {"id":N,"steps":{…}}).`
	if k.batch {
		long = `submit inserts a batch from FILE ("-" reads stdin): the JSON body of
POST /v1/batches, {"jobs":[{"kind":"…","args":{…}, …}],"on_finish":{…},
"on_success":{…},"metadata":{…}}, each job and callback with the fields of a
job as the job server takes it. The jobs and callbacks are inserted in one
transaction, or none. It prints the batch's id and callbacks (-o json:
{"id":N,"jobs":[…],"on_finish":…,"on_success":…}).`
	}
	cmd := &cobra.Command{
		Use:     "submit FILE",
		Short:   "Submit a " + k.name + " from a JSON file (the HTTP API's body)",
		Long:    long,
		Example: fmt.Sprintf("  backlog %s submit %s.json\n  backlog %s submit - < %s.json", k.plural, k.name, k.plural, k.name),
		Args:    argsExactly(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			data, err := a.readSubmitFile(args[0])
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			oo := opsOpts{write: true, allowUnknownKinds: allowUnknown}
			if k.batch {
				var req httpapi.BatchCreateRequest
				if err := decodeSubmitFile(data, &req); err != nil {
					return err
				}
				return a.withOps(ctx, oo, func(o ops) error {
					res, err := o.SubmitBatch(ctx, req)
					if err != nil {
						return fmt.Errorf("submit batch: %w", err)
					}
					out := batchResponse(res)
					if a.jsonOutput() {
						return writeJSON(a.env.stdout, out)
					}
					fmt.Fprintf(a.env.stdout, "batch %d submitted: %d jobs\n", out.ID, len(out.Jobs))
					for _, cb := range []*apitypes.Job{out.OnFinish, out.OnSuccess} {
						if cb != nil {
							fmt.Fprintf(a.env.stdout, "%s: job %d (%s)\n", cb.Step, cb.ID, cb.State)
						}
					}
					return nil
				})
			}
			var req httpapi.WorkflowRequest
			if err := decodeSubmitFile(data, &req); err != nil {
				return err
			}
			return a.withOps(ctx, oo, func(o ops) error {
				res, err := o.SubmitWorkflow(ctx, req)
				if err != nil {
					return fmt.Errorf("submit workflow: %w", err)
				}
				out := httpapi.WorkflowResponse{ID: res.ID, Steps: make(map[string]*apitypes.Job, len(res.Steps))}
				for name, j := range res.Steps {
					out.Steps[name] = apitypes.FromCore(j)
				}
				if a.jsonOutput() {
					return writeJSON(a.env.stdout, out)
				}
				fmt.Fprintf(a.env.stdout, "workflow %d submitted: %d steps\n", out.ID, len(out.Steps))
				jobs := make([]*apitypes.Job, 0, len(out.Steps))
				for _, j := range out.Steps {
					jobs = append(jobs, j)
				}
				slices.SortFunc(jobs, func(a, b *apitypes.Job) int { return int(a.ID - b.ID) })
				t := newTable(a.env.stdout, "STEP", "ID", "KIND", "STATE")
				for _, j := range jobs {
					t.row(truncate(j.Step, 40), strconv.FormatInt(j.ID, 10), truncate(j.Kind, 40), string(j.State))
				}
				return t.flush()
			})
		},
	}
	cmd.Flags().BoolVar(&allowUnknown, "allow-unknown-kinds", false, "with --db: submit kinds that no live registered worker handles")
	return cmd
}

// batchResponse is res as POST /v1/batches answers it.
func batchResponse(res core.BatchResult) httpapi.BatchCreateResponse {
	out := httpapi.BatchCreateResponse{ID: res.ID, Jobs: apitypes.FromCoreAll(res.Jobs),
		OnFinish: apitypes.FromCore(res.OnFinish), OnSuccess: apitypes.FromCore(res.OnSuccess)}
	return out
}

// readSubmitFile reads the file of a submit ("-": stdin), at most
// maxSubmitFile bytes.
func (a *app) readSubmitFile(name string) ([]byte, error) {
	var in io.Reader
	if name == "-" {
		in = a.env.stdin
	} else {
		fh, err := os.Open(name)
		if err != nil {
			return nil, fmt.Errorf("open %s: %w", name, err)
		}
		defer fh.Close()
		in = fh
	}
	data, err := io.ReadAll(io.LimitReader(in, maxSubmitFile+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	if len(data) > maxSubmitFile {
		return nil, usagef("%s is over %d bytes (the job server's body limit)", name, maxSubmitFile)
	}
	return data, nil
}

// decodeSubmitFile decodes a submit file into dst strictly: unknown
// fields and trailing data are usage errors.
func decodeSubmitFile(data []byte, dst any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		return usagef("the file is not the JSON body the job server takes: %v", err)
	}
	if dec.More() {
		return usagef("the file holds more than one JSON value")
	}
	return nil
}

// submitOptions turns a submission as the job server takes it into the
// options of core (the server's own limits are checked where it runs).
func submitOptions(r *httpapi.SubmitRequest, prefix string) (kind string, args []byte, opts *core.Options, err error) {
	o := core.Options{Queue: r.Queue, UniqueKey: r.UniqueKey, PartitionKey: r.PartitionKey, Tags: r.Tags, Metadata: r.Metadata}
	if o.UniqueScope, err = core.ParseUniqueScope(r.UniqueScope); err != nil {
		return "", nil, nil, usagef("%s%v", prefix, err)
	}
	if r.Priority != nil {
		o.Priority = *r.Priority
		if o.Priority == 0 {
			o.Priority = -1 // refused by core, as the server refuses it
		}
	}
	if r.MaxAttempts != nil {
		o.MaxAttempts = *r.MaxAttempts
		if o.MaxAttempts == 0 {
			o.MaxAttempts = -1
		}
	}
	if r.RunAt != nil && r.DelaySeconds != nil {
		return "", nil, nil, usagef("%srun_at and delay_seconds are exclusive", prefix)
	}
	if r.RunAt != nil {
		o.RunAt = *r.RunAt
	}
	if r.DelaySeconds != nil {
		if *r.DelaySeconds < 0 {
			return "", nil, nil, usagef("%sdelay_seconds must not be negative", prefix)
		}
		o.Delay = time.Duration(*r.DelaySeconds * float64(time.Second))
	}
	if r.UniqueForSeconds != nil {
		if *r.UniqueForSeconds < 0 {
			return "", nil, nil, usagef("%sunique_for_seconds must not be negative", prefix)
		}
		o.UniqueFor = time.Duration(*r.UniqueForSeconds * float64(time.Second))
	}
	if r.Deadline != nil {
		o.Deadline = *r.Deadline
	}
	if len(r.Args) > 0 && string(r.Args) != "null" {
		args = r.Args
	}
	return r.Kind, args, &o, nil
}
