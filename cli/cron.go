package cli

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/backlogq/backlog/core"
)

// newCronCmd is `backlog cron`: the periodic jobs of a config file, with
// their stored state, and the commands that change it.
func (a *app) newCronCmd() *cobra.Command {
	var config string
	cmd := &cobra.Command{
		Use:   "cron",
		Short: "List periodic jobs with their last and next run; pause, resume or run one now",
		Long: `cron lists the periodic jobs of a config file (its "periodic" section, as
backlog work and serve read it) with, from the store, whether each is paused
and its last run, and its next run. pause and resume act on every node sharing
the store; run enqueues one job of the schedule now. The store is --db, or the
config file's db when --db and BACKLOG_DB are not set. With --server, the
job server's own configuration defines the periodic jobs and --config is
not given. See docs/scheduling.md.`,
		Example: `  backlog cron --config backlog.json
  backlog cron --config backlog.json pause nightly-report
  backlog cron --config backlog.json resume nightly-report
  backlog cron --config backlog.json run nightly-report`,
		Args: argsRange(0, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return unknownCommand(cmd, args[0])
			}
			return a.withPeriodicOps(cmd, config, func(ctx context.Context, o ops) error {
				list, err := o.PeriodicJobs(ctx)
				if err != nil {
					return err
				}
				if a.jsonOutput() {
					return writeJSON(a.env.stdout, list)
				}
				t := newTable(a.env.stdout, "NAME", "SCHEDULE", "KIND", "QUEUE", "MISSED", "PAUSED", "LAST RUN (UTC)", "LAST JOB", "NEXT RUN (UTC)")
				for _, p := range list {
					last, job := "-", "-"
					if !p.LastRunAt.IsZero() {
						last, job = p.LastRunAt.Format(time.DateTime), strconv.FormatInt(p.LastJobID, 10)
					}
					next := "-"
					if !p.NextRunAt.IsZero() {
						next = p.NextRunAt.Format(time.DateTime)
					}
					t.row(p.Name, p.Schedule, p.Kind, p.Queue, string(p.Missed), yesNo(p.Paused), last, job, next)
				}
				return t.flush()
			})
		},
	}
	cmd.PersistentFlags().StringVar(&config, "config", "", "config file whose \"periodic\" section defines the periodic jobs (required without --server)")
	action := func(use, short string, fn func(ctx context.Context, o ops, name string) error) *cobra.Command {
		return &cobra.Command{
			Use:   use + " NAME",
			Short: short,
			Args:  argsRange(1, 1),
			RunE: func(cmd *cobra.Command, args []string) error {
				return a.withPeriodicOps(cmd, config, func(ctx context.Context, o ops) error {
					return fn(ctx, o, args[0])
				})
			},
		}
	}
	cmd.AddCommand(
		action("pause", "Pause a periodic job on every node (no occurrence is enqueued until resumed)", func(ctx context.Context, o ops, name string) error {
			if err := o.PausePeriodic(ctx, name); err != nil {
				return err
			}
			_, err := fmt.Fprintf(a.env.stdout, "periodic job %s paused\n", name)
			return err
		}),
		action("resume", "Resume a paused periodic job (occurrences that fell during the pause are not run)", func(ctx context.Context, o ops, name string) error {
			if err := o.ResumePeriodic(ctx, name); err != nil {
				return err
			}
			_, err := fmt.Fprintf(a.env.stdout, "periodic job %s resumed\n", name)
			return err
		}),
		action("run", "Enqueue one job of a periodic job now, outside its schedule", func(ctx context.Context, o ops, name string) error {
			j, err := o.RunPeriodicNow(ctx, name)
			if err != nil {
				return err
			}
			if a.jsonOutput() {
				return writeJSON(a.env.stdout, j)
			}
			_, err = fmt.Fprintf(a.env.stdout, "enqueued job %d (%s) for periodic job %s\n", j.ID, j.Kind, name)
			return err
		}),
	)
	return cmd
}

// withPeriodicOps runs fn with the ops of the periodic jobs: through the
// job server with --server (its own configuration defines them), else on
// the store with a client (never started) that knows the config file's
// periodic jobs; the store is --db, or the file's db when neither --db
// nor BACKLOG_DB is set.
func (a *app) withPeriodicOps(cmd *cobra.Command, config string, fn func(context.Context, ops) error) error {
	ctx := cmd.Context()
	if a.server != "" {
		if config != "" {
			return usagef("--config does not apply with --server: the job server's own configuration defines its periodic jobs")
		}
		return a.withOps(ctx, opsOpts{}, func(o ops) error { return fn(ctx, o) })
	}
	if config == "" {
		return usagef("--config is required (or --server): the periodic jobs are defined in a config file's \"periodic\" section")
	}
	fc, err := loadConfigFile(config)
	if err != nil {
		return usageError{err}
	}
	dbURL := a.dbURL
	dbFromUser := cmd.Flag("db").Changed || (a.env.getenv != nil && a.env.getenv("BACKLOG_DB") != "")
	if fc.DB != "" && !dbFromUser {
		dbURL = fc.DB
	}
	periodic := fc.periodicJobs()
	if periodic == nil {
		periodic = []core.PeriodicJob{}
	}
	return a.withOps(ctx, opsOpts{periodic: periodic, dbURL: dbURL}, func(o ops) error { return fn(ctx, o) })
}
