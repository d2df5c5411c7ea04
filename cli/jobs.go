package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/backlogq/backlog/adapters/httpapi/apitypes"
	"github.com/backlogq/backlog/core"
)

func (a *app) newJobsCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "jobs",
		Short: "List, inspect, wait for, cancel, retry and delete jobs",
		Args:  argsRange(0, 1),
		RunE:  helpOrUnknown,
	}
	cmd.AddCommand(a.newJobsListCmd(), a.newJobsGetCmd(), a.newJobsWaitCmd(),
		a.newJobsActionCmd("cancel", "Cancel jobs (they are never retried)", "cancelled"),
		a.newJobsActionCmd("retry", "Make jobs available to run now (one more attempt if theirs are used up)", "retried"),
		a.newJobsActionCmd("delete", "Delete jobs that are not running", "deleted"),
	)
	return cmd
}

func (a *app) newJobsListCmd() *cobra.Command {
	var (
		p          core.ListParams
		states     []string
		sort       string
		order      string
		desc       bool
		afterRunAt string
		archived   bool
	)
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List jobs, newest first (oldest first with --order asc)",
		Long: `list prints jobs ordered by id, newest first. Page through them with --after:
pass the last id of one page to get the next (ids below it; with --order asc,
ids above it). With --sort run_at they come by run time, scheduled jobs
soonest first (latest first with --order desc), and the next page needs
--after ID --after-run-at TIME of the last job shown. --state failed stands
for the states of the dashboard's "failed" filter: ` + failedNames() + `.
--archived lists the archive of finished jobs instead (jobs that a server
run with --archive moved out of the jobs past their retention).
The table shows the newest error message, truncated; "jobs get ID" shows
everything.`,
		Example: `  backlog jobs list --state failed
  backlog jobs list --queue emails --kind send --limit 20 --order asc
  backlog jobs list --state scheduled --sort run_at
  backlog jobs list --after 500 -o json
  backlog jobs list --archived --state discarded`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			for _, s := range states {
				for _, part := range strings.Split(s, ",") {
					part = strings.TrimSpace(part)
					if part == "" {
						continue
					}
					if part == stateFailed {
						p.States = append(p.States, failedStates...)
						continue
					}
					st := core.State(part)
					if !st.Valid() {
						return usagef("unknown state %q (states: %s, or %s for %s)", part, stateNames(), stateFailed, failedNames())
					}
					p.States = append(p.States, st)
				}
			}
			switch order {
			case "":
				// Newest first by id; soonest first by run time.
				p.Desc = sort != "run_at"
			case "desc":
				p.Desc = true
			case "asc":
				p.Desc = false
			default:
				return usagef("--order must be asc or desc, not %q", order)
			}
			if desc {
				if order == "asc" {
					return usagef("--desc and --order asc contradict each other")
				}
				p.Desc = true
			}
			if p.Limit < 1 {
				return usagef("--limit must be at least 1")
			}
			if p.AfterID < 0 {
				return usagef("--after must not be negative")
			}
			switch sort {
			case "", "id":
			case "run_at":
				p.ByRunAt = true
			default:
				return usagef("--sort must be id or run_at, not %q", sort)
			}
			if afterRunAt != "" || (p.ByRunAt && p.AfterID != 0) {
				t, err := time.Parse(time.RFC3339Nano, afterRunAt)
				if !p.ByRunAt || p.AfterID == 0 || err != nil {
					return usagef("--after-run-at goes with --sort run_at and --after: the RFC 3339 run time of the last job shown (printed with the next page's flags)")
				}
				p.AfterRunAt = t.UTC()
			}
			return a.withOps(cmd.Context(), opsOpts{}, func(o ops) error {
				list, what := o.ListJobs, "list jobs"
				if archived {
					list, what = o.ListArchivedJobs, "list archived jobs"
				}
				jobs, err := list(cmd.Context(), p)
				if err != nil {
					return fmt.Errorf("%s: %w", what, describe(err))
				}
				if a.jsonOutput() {
					out := apitypes.FromCoreAll(jobs)
					for _, j := range out {
						j.Archived = archived
					}
					return writeJSON(a.env.stdout, out)
				}
				t := newTable(a.env.stdout, "ID", "QUEUE", "KIND", "STATE", "ATTEMPT", "PRIORITY", "RUN_AT", "LAST ERROR")
				for _, j := range jobs {
					t.row(strconv.FormatInt(j.ID, 10), j.Queue, truncate(j.Kind, 40), string(j.State),
						fmt.Sprintf("%d/%d", j.Attempt, j.MaxAttempts), strconv.Itoa(j.Priority),
						fmtTime(j.RunAt), truncate(oneLine(lastError(j)), 60))
				}
				if err := t.flush(); err != nil {
					return err
				}
				if len(jobs) == p.Limit {
					last := jobs[len(jobs)-1]
					if p.ByRunAt {
						fmt.Fprintf(a.env.stderr, "(%d jobs shown; more may follow: --after %d --after-run-at %s)\n", len(jobs), last.ID, last.RunAt.UTC().Format(time.RFC3339Nano))
					} else {
						fmt.Fprintf(a.env.stderr, "(%d jobs shown; more may follow: --after %d)\n", len(jobs), last.ID)
					}
				}
				return nil
			})
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&p.Queue, "queue", "", "only this queue")
	fl.StringSliceVar(&states, "state", nil, "only these states (repeatable or comma-separated): "+stateNames()+", or "+stateFailed+" for "+failedNames())
	fl.StringVar(&p.Kind, "kind", "", "only this kind")
	fl.Int64Var(&p.WorkflowID, "workflow", 0, "only the jobs of this workflow or batch (their workflow id)")
	fl.Int64Var(&p.AfterID, "after", 0, "start after this id (keyset paging)")
	fl.IntVar(&p.Limit, "limit", 100, "at most this many jobs")
	fl.StringVar(&order, "order", "", "asc or desc (default: desc, newest first, by id; asc, soonest first, with --sort run_at)")
	fl.BoolVar(&desc, "desc", false, "same as --order desc")
	fl.StringVar(&sort, "sort", "id", "order by id, or by run_at (run time)")
	fl.StringVar(&afterRunAt, "after-run-at", "", "with --sort run_at and --after: the run time of the last job shown (RFC 3339)")
	fl.BoolVar(&archived, "archived", false, "list the archive of finished jobs (serve --archive) instead of the jobs")
	return cmd
}

// stateFailed is the --state alias of jobs list for failedStates.
const stateFailed = "failed"

// failedStates are the states of the dashboard's "failed" filter (jobs.js):
// jobs whose last attempt failed, to be retried or dead-lettered.
var failedStates = []core.State{core.StateRetryable, core.StateDiscarded}

// failedNames lists failedStates, comma-separated.
func failedNames() string {
	names := make([]string, len(failedStates))
	for i, s := range failedStates {
		names[i] = string(s)
	}
	return strings.Join(names, ", ")
}

func stateNames() string {
	names := make([]string, len(core.AllStates))
	for i, s := range core.AllStates {
		names[i] = string(s)
	}
	return strings.Join(names, ", ")
}

func (a *app) newJobsGetCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "get ID",
		Short: "Show one job with its errors history and result",
		Long: `get prints one job. A job no longer in the jobs is looked up in the
archive of finished jobs (serve --archive); it then shows "archived: true"
(-o json: "archived": true).`,
		Example: "  backlog jobs get 42\n  backlog jobs get 42 -o json",
		Args:    argsExactly(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ids, err := parseIDs(args)
			if err != nil {
				return err
			}
			return a.withOps(cmd.Context(), opsOpts{}, func(o ops) error {
				j, archived, err := o.FindJob(cmd.Context(), ids[0])
				if err != nil {
					return fmt.Errorf("job %d: %w", ids[0], describe(err))
				}
				if a.jsonOutput() {
					out := apitypes.FromCore(j)
					out.Archived = archived
					return writeJSON(a.env.stdout, out)
				}
				if archived {
					fmt.Fprintln(a.env.stdout, "archived: true")
				}
				return printJob(a.env.stdout, j)
			})
		},
	}
}

// parseIDs reads job ids; a malformed one is a usage error.
func parseIDs(args []string) ([]int64, error) {
	ids := make([]int64, 0, len(args))
	for _, s := range args {
		id, err := strconv.ParseInt(strings.TrimPrefix(s, "#"), 10, 64)
		if err != nil || id < 1 {
			return nil, usagef("%q is not a job id (a positive integer)", s)
		}
		ids = append(ids, id)
	}
	return ids, nil
}

// describe turns the store's sentinel errors into short messages.
func describe(err error) error {
	switch {
	case errors.Is(err, core.ErrNotFound):
		return described{"not found", err}
	case errors.Is(err, core.ErrInvalidState):
		return described{"not allowed in the job's current state", err}
	}
	return err
}

// described is an error shown by a short message that still matches the
// error it describes with errors.Is.
type described struct {
	msg string
	err error
}

func (d described) Error() string { return d.msg }
func (d described) Unwrap() error { return d.err }

// actionResult is one id's outcome of cancel, retry or delete in JSON output.
type actionResult struct {
	ID    int64         `json:"id"`
	OK    bool          `json:"ok"`
	State string        `json:"state,omitempty"`
	Error string        `json:"error,omitempty"`
	Job   *apitypes.Job `json:"job,omitempty"`
}

// maxBulkJobs bounds the jobs one filtered bulk action touches.
const maxBulkJobs = 100000

func (a *app) newJobsActionCmd(name, short, done string) *cobra.Command {
	var (
		f      jobFilter
		dryRun bool
		yes    bool
	)
	// Cancel and delete by filter stop or remove every matching job at
	// once: they want --yes, or a yes at a terminal's prompt.
	guarded := name == "cancel" || name == "delete"
	cmd := &cobra.Command{
		Use:   name + " ID... | " + name + " --queue Q --state S --kind K [--dry-run]",
		Short: short,
		Long: short + `, by id, or every job matching a filter (--queue, --state, --kind;
at least one, combined with AND; at most ` + strconv.Itoa(maxBulkJobs) + ` jobs, --limit fewer). The
filter is read in id order, 500 jobs at a time, and the action applied to
each job that still matches when it is read again (one that changed
meanwhile is skipped and reported, not counted as failed); --dry-run only
counts what it would touch and lists the first 100 ids.` + guardNote(guarded, name),
		Example: fmt.Sprintf("  backlog jobs %s 42 43 44\n  backlog jobs %s --queue mail --state discarded --kind email --dry-run", name, name),
		Args:    cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			filtered := f.queue != "" || len(f.states) > 0 || f.kind != ""
			switch {
			case len(args) == 0 && !filtered:
				return usagef("give job ids, or a filter (--queue, --state, --kind)")
			case len(args) > 0 && filtered:
				return usagef("give job ids or a filter, not both")
			case dryRun && !filtered:
				return usagef("--dry-run goes with a filter")
			}

			var ids []int64
			if len(args) > 0 {
				var err error
				if ids, err = parseIDs(args); err != nil {
					return err
				}
			}
			p, err := f.params()
			if err != nil {
				return err
			}
			confirm := guarded && filtered && !dryRun && !yes
			if confirm && !a.interactive() {
				return usagef("jobs %s with a filter %s every matching job at once: give --yes to confirm, or --dry-run to count them first", name, map[string]string{"cancel": "cancels", "delete": "deletes"}[name])
			}
			ctx := cmd.Context()
			return a.withOps(ctx, opsOpts{write: true}, func(o ops) error {
				results := []actionResult{}
				failed := 0
				record := func(id int64, j *core.Job, err error) {
					r := actionResult{ID: id, OK: err == nil}
					if err != nil {
						msg := describe(err).Error()
						switch {
						case errors.Is(err, core.ErrNoLongerMatches) && j != nil:
							// Changed since the filter was read: not a failure.
							r.State = string(j.State)
							msg = fmt.Sprintf("skipped: it is %s now and no longer matches the filter", j.State)
						case j != nil:
							// Invalid state: say which.
							failed++
							r.State = string(j.State)
							msg = fmt.Sprintf("cannot %s a job in state %s", name, j.State)
						default:
							failed++
						}
						r.Error = msg
						if !a.jsonOutput() {
							fmt.Fprintf(a.env.stderr, "backlog: job %d: %s\n", id, oneLine(msg))
						}
					} else {
						if j != nil {
							r.State = string(j.State)
							r.Job = apitypes.FromCore(j)
						}
						if !a.jsonOutput() {
							if j != nil {
								fmt.Fprintf(a.env.stdout, "job %d %s (now %s)\n", id, done, j.State)
							} else {
								fmt.Fprintf(a.env.stdout, "job %d %s\n", id, done)
							}
						}
					}
					results = append(results, r)
				}
				if confirm {
					ok, err := a.confirmBulk(ctx, o, name, p)
					if err != nil || !ok {
						return err
					}
				}
				if filtered {
					// core applies the filter in bounded batches, reading
					// each job again just before its action.
					res, err := o.ApplyToMatching(ctx, core.BulkAction(name), p, core.BulkOptions{
						Limit: p.Limit, DryRun: dryRun,
						OnJob: func(it core.BulkItem) { record(it.ID, it.Job, it.Err) },
					})
					if err != nil {
						return fmt.Errorf("%s jobs: %w", name, err)
					}
					if dryRun {
						if a.jsonOutput() {
							return writeJSON(a.env.stdout, map[string]any{"action": name, "matching": res.Matched, "ids": res.IDs})
						}
						fmt.Fprintf(a.env.stdout, "%d jobs match; %s would be applied to each (dry run, nothing changed)\n", res.Matched, name)
						return nil
					}
					if res.Matched == 0 && !a.jsonOutput() {
						fmt.Fprintln(a.env.stdout, "no job matches")
						return nil
					}
					if a.server != "" {
						// The job server answers with counts, not job by job.
						return a.printBulkCounts(name, done, res)
					}
				} else {
					for _, id := range ids {
						j, err := jobAction(ctx, o, name, id)
						record(id, j, err)
					}
				}
				if a.jsonOutput() {
					if err := writeJSON(a.env.stdout, results); err != nil {
						return err
					}
				}
				if failed > 0 {
					err := fmt.Errorf("%d of %d jobs failed", failed, len(results))
					if a.jsonOutput() {
						return err // the per-id errors are in the JSON on stdout
					}
					return quietError{err}
				}
				return nil
			})
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.queue, "queue", "", "filter: jobs of this queue")
	fl.StringSliceVar(&f.states, "state", nil, "filter: jobs in these states (repeatable or comma-separated)")
	fl.StringVar(&f.kind, "kind", "", "filter: jobs of this kind")
	fl.IntVar(&f.limit, "limit", maxBulkJobs, "filter: at most this many jobs")
	fl.BoolVar(&dryRun, "dry-run", false, "count and list the matching jobs, change nothing")
	if guarded {
		fl.BoolVarP(&yes, "yes", "y", false, "with a filter: "+name+" the matching jobs without asking (needed where stdin is not a terminal)")
	}
	return cmd
}

// guardNote is the help text on --yes of a guarded bulk action.
func guardNote(guarded bool, name string) string {
	if !guarded {
		return ""
	}
	return `

With a filter, ` + name + ` asks "` + name + ` N jobs? [y/N]" on a terminal (N counted
as --dry-run does), and elsewhere refuses unless --yes is given (exit 2,
nothing changed).`
}

// interactive reports whether a prompt can be answered: stdin and stderr
// are both terminals.
func (a *app) interactive() bool {
	in, ok := a.env.stdin.(io.Writer) // an *os.File is both
	return ok && a.env.isTerminal != nil && a.env.isTerminal(in) && a.env.isTerminal(a.env.stderr)
}

// confirmBulk counts the jobs matching p (a dry run of the action), asks
// "NAME N jobs? [y/N]" on stderr and reads the answer from stdin. It
// reports whether the answer was y or yes; no match, or any other answer,
// prints that nothing changed and returns false. A failed count or read is
// an error.
func (a *app) confirmBulk(ctx context.Context, o ops, name string, p core.ListParams) (bool, error) {
	res, err := o.ApplyToMatching(ctx, core.BulkAction(name), p, core.BulkOptions{Limit: p.Limit, DryRun: true})
	if err != nil {
		return false, fmt.Errorf("%s jobs: count: %w", name, err)
	}
	if res.Matched == 0 {
		fmt.Fprintln(a.env.stdout, "no job matches")
		return false, nil
	}
	fmt.Fprintf(a.env.stderr, "%s %d jobs? [y/N] ", name, res.Matched)
	line, err := bufio.NewReader(a.env.stdin).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return false, fmt.Errorf("%s jobs: read the answer: %w", name, err)
	}
	switch strings.ToLower(strings.TrimSpace(line)) {
	case "y", "yes":
		return true, nil
	}
	fmt.Fprintln(a.env.stderr, "not confirmed: nothing changed")
	return false, nil
}

// jobFilter is the filter of a bulk action.
type jobFilter struct {
	queue, kind string
	states      []string
	limit       int
}

func (f jobFilter) params() (core.ListParams, error) {
	p := core.ListParams{Queue: f.queue, Kind: f.kind, Limit: f.limit}
	if f.limit < 1 || f.limit > maxBulkJobs {
		return p, usagef("--limit must be 1..%d", maxBulkJobs)
	}
	for _, st := range f.states {
		s := core.State(strings.TrimSpace(st))
		if !slices.Contains(core.AllStates, s) {
			return p, usagef("--state %q is not one of %s", st, stateNames())
		}
		p.States = append(p.States, s)
	}
	return p, nil
}

// jobAction applies cancel, retry or delete to one id. On an invalid-state
// error it fetches the job so the message can say which state it is in.
func jobAction(ctx context.Context, o ops, name string, id int64) (*core.Job, error) {
	var (
		j   *core.Job
		err error
	)
	switch name {
	case "cancel":
		j, err = o.CancelJob(ctx, id)
	case "retry":
		j, err = o.RetryJob(ctx, id)
	case "delete":
		err = o.DeleteJob(ctx, id)
	default:
		return nil, fmt.Errorf("unknown action %q", name)
	}
	if err != nil && errors.Is(err, core.ErrInvalidState) {
		if cur, gerr := o.GetJob(ctx, id); gerr == nil {
			return cur, err
		}
	}
	if err != nil {
		return nil, err
	}
	return j, nil
}

// printBulkCounts prints the counts of a filtered action that a job server
// applied (POST /v1/jobs/bulk): how many jobs matched, were changed and
// were skipped (changed meanwhile, or in a state the action does not
// apply to), and the first ids changed. -o json prints core.BulkResult
// with the action.
func (a *app) printBulkCounts(name, done string, res core.BulkResult) error {
	if a.jsonOutput() {
		return writeJSON(a.env.stdout, map[string]any{
			"action": name, "matched": res.Matched, "applied": res.Applied, "skipped": res.Skipped, "ids": res.IDs,
		})
	}
	fmt.Fprintf(a.env.stdout, "%d jobs matched: %d %s, %d skipped (changed meanwhile, or in a state %s does not apply to)\n",
		res.Matched, res.Applied, done, res.Skipped, name)
	if len(res.IDs) > 0 {
		ids := make([]string, len(res.IDs))
		for i, id := range res.IDs {
			ids[i] = strconv.FormatInt(id, 10)
		}
		more := ""
		if res.Applied > len(res.IDs) {
			more = fmt.Sprintf(" and %d more", res.Applied-len(res.IDs))
		}
		fmt.Fprintf(a.env.stdout, "%s: %s%s\n", done, strings.Join(ids, " "), more)
	}
	return nil
}
