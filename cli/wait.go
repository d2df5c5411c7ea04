package cli

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/backlogq/backlog/adapters/httpapi/apitypes"
	"github.com/backlogq/backlog/core"
)

// Exit codes of `jobs wait` and `enqueue --wait` beyond the usual ones
// (0 completed, 1 the command failed, 2 a wrong command line).
const (
	exitWaitTimeout   = 3 // --timeout passed before the job was final
	exitWaitDiscarded = 4 // the job was discarded (its attempts failed, or its deadline passed)
	exitWaitCancelled = 5 // the job was cancelled
)

// exitCodeError ends a command with its own exit code; run prints its
// message as any other error's.
type exitCodeError struct {
	code int
	err  error
}

func (e exitCodeError) Error() string { return e.err.Error() }
func (e exitCodeError) Unwrap() error { return e.err }

// jobWaiter is what waitJob needs of ops: storeOps and serverOps have it.
type jobWaiter interface {
	// WaitJob waits up to timeout (0: without a bound) for job id to be
	// final and returns it as it is then, with final false when the
	// timeout passed first.
	WaitJob(ctx context.Context, id int64, timeout time.Duration) (j *core.Job, final bool, err error)
}

// WaitJob waits on the store with the client's shared waiter loop
// (core.Client.Wait).
func (s storeOps) WaitJob(ctx context.Context, id int64, timeout time.Duration) (*core.Job, bool, error) {
	if timeout <= 0 {
		j, err := s.c.Wait(ctx, id)
		return j, err == nil, err
	}
	return s.c.WaitTimeout(ctx, id, timeout)
}

// WaitJob long-polls the job server (GET /v1/jobs/{id}?wait=…) until the
// job is final or timeout passes, then reads it as it is.
func (s serverOps) WaitJob(ctx context.Context, id int64, timeout time.Duration) (*core.Job, bool, error) {
	wctx, cancel := ctx, context.CancelFunc(func() {})
	if timeout > 0 {
		wctx, cancel = context.WithTimeout(ctx, timeout)
	}
	j, err := s.c.Wait(wctx, id)
	cancel()
	if err == nil {
		return coreJob(j), true, nil
	}
	if ctx.Err() != nil || !errors.Is(err, context.DeadlineExceeded) {
		return nil, false, s.check(err, roleProducer)
	}
	cur, err := s.c.GetJob(ctx, id)
	if err != nil {
		return nil, false, s.check(err, roleProducer)
	}
	return coreJob(cur), cur.State.Final(), nil
}

// waitJob waits for job id through o (see jobWaiter).
func waitJob(ctx context.Context, o ops, id int64, timeout time.Duration) (*core.Job, bool, error) {
	w, ok := o.(jobWaiter)
	if !ok {
		return nil, false, errors.New("waiting for a job is not supported here")
	}
	return w.WaitJob(ctx, id, timeout)
}

// waitVerdict is the error (and so the exit code) of a wait that ended
// with j: nil when it completed.
func waitVerdict(j *core.Job, final bool, timeout time.Duration) error {
	switch {
	case !final:
		return exitCodeError{exitWaitTimeout, fmt.Errorf("job %d is still %s after %s", j.ID, j.State, timeout)}
	case j.State == core.StateDiscarded:
		msg := fmt.Sprintf("job %d was discarded", j.ID)
		if last := lastError(j); last != "" {
			msg += ": " + truncate(oneLine(last), 200)
		}
		return exitCodeError{exitWaitDiscarded, errors.New(msg)}
	case j.State == core.StateCancelled:
		return exitCodeError{exitWaitCancelled, fmt.Errorf("job %d was cancelled", j.ID)}
	}
	return nil
}

// checkWaitTimeout refuses a negative --timeout.
func checkWaitTimeout(timeout time.Duration) error {
	if timeout < 0 {
		return usagef("--timeout must not be negative (0 waits without a bound)")
	}
	return nil
}

func (a *app) newJobsWaitCmd() *cobra.Command {
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "wait ID",
		Short: "Wait for a job to finish and print it; the exit code tells how it ended",
		Long: `wait blocks until job ID is final (completed, cancelled or discarded) and
prints it as "jobs get" does, result and errors included. With --timeout it
waits at most that long and then prints the job as it is.

Exit codes:
  0  the job completed
  1  the command failed (no such job, the store or server failed)
  2  the command line was wrong
  3  --timeout passed first (the job is printed as it is)
  4  the job was discarded (its attempts failed, or its deadline passed)
  5  the job was cancelled

On a store (--db) the wait reads the job with the jobs of other waits of
this process, every 0.5 s; through a job server (--server) it long-polls
GET /v1/jobs/ID?wait=…, 60 s at a time.`,
		Example: `  backlog jobs wait 42
  backlog jobs wait 42 --timeout 30s -o json
  backlog jobs wait 42 --timeout 5m && echo done`,
		Args: argsExactly(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ids, err := parseIDs(args)
			if err != nil {
				return err
			}
			if err := checkWaitTimeout(timeout); err != nil {
				return err
			}
			ctx := cmd.Context()
			return a.withOps(ctx, opsOpts{}, func(o ops) error {
				j, final, err := waitJob(ctx, o, ids[0], timeout)
				if err != nil {
					return fmt.Errorf("job %d: %w", ids[0], describe(err))
				}
				if a.jsonOutput() {
					err = writeJSON(a.env.stdout, apitypes.FromCore(j))
				} else {
					err = printJob(a.env.stdout, j)
				}
				if err != nil {
					return err
				}
				return waitVerdict(j, final, timeout)
			})
		},
	}
	cmd.Flags().DurationVar(&timeout, "timeout", 0, "wait at most this long (e.g. 30s; 0 = no bound), then print the job as it is and exit 3")
	return cmd
}

// addWaitFlags registers enqueue's --wait and --timeout.
func addWaitFlags(cmd *cobra.Command, wait *bool, timeout *time.Duration) {
	fl := cmd.Flags()
	fl.BoolVar(wait, "wait", false, "wait until the job is final and print it; the exit code tells how it ended (see jobs wait)")
	fl.DurationVar(timeout, "timeout", 0, "with --wait: wait at most this long (e.g. 30s; 0 = no bound), then print the job as it is and exit 3")
}
