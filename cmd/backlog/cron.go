package main

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
config file's db when --db and BACKLOG_DB are not set. See docs/scheduling.md.`,
		Example: `  backlog cron --config backlog.json
  backlog cron --config backlog.json pause nightly-report
  backlog cron --config backlog.json resume nightly-report
  backlog cron --config backlog.json run nightly-report`,
		Args: argsRange(0, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return unknownCommand(cmd, args[0])
			}
			return a.withPeriodicClient(cmd, config, func(ctx context.Context, c *core.Client) error {
				list, err := c.PeriodicJobs(ctx)
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
	cmd.PersistentFlags().StringVar(&config, "config", "", "config file whose \"periodic\" section defines the periodic jobs (required)")
	action := func(use, short string, fn func(ctx context.Context, c *core.Client, name string) error) *cobra.Command {
		return &cobra.Command{
			Use:   use + " NAME",
			Short: short,
			Args:  argsRange(1, 1),
			RunE: func(cmd *cobra.Command, args []string) error {
				return a.withPeriodicClient(cmd, config, func(ctx context.Context, c *core.Client) error {
					return fn(ctx, c, args[0])
				})
			},
		}
	}
	cmd.AddCommand(
		action("pause", "Pause a periodic job on every node (no occurrence is enqueued until resumed)", func(ctx context.Context, c *core.Client, name string) error {
			if err := c.PausePeriodic(ctx, name); err != nil {
				return err
			}
			_, err := fmt.Fprintf(a.env.stdout, "periodic job %s paused\n", name)
			return err
		}),
		action("resume", "Resume a paused periodic job (occurrences that fell during the pause are not run)", func(ctx context.Context, c *core.Client, name string) error {
			if err := c.ResumePeriodic(ctx, name); err != nil {
				return err
			}
			_, err := fmt.Fprintf(a.env.stdout, "periodic job %s resumed\n", name)
			return err
		}),
		action("run", "Enqueue one job of a periodic job now, outside its schedule", func(ctx context.Context, c *core.Client, name string) error {
			r, err := c.RunPeriodicNow(ctx, name)
			if err != nil {
				return err
			}
			if a.jsonOutput() {
				return writeJSON(a.env.stdout, r.Job)
			}
			_, err = fmt.Fprintf(a.env.stdout, "enqueued job %d (%s) for periodic job %s\n", r.Job.ID, r.Job.Kind, name)
			return err
		}),
	)
	return cmd
}

// withPeriodicClient loads the config file, opens its store and runs fn
// with a client (never started) that knows the file's periodic jobs.
func (a *app) withPeriodicClient(cmd *cobra.Command, config string, fn func(context.Context, *core.Client) error) error {
	if config == "" {
		return usagef("--config is required: the periodic jobs are defined in a config file's \"periodic\" section")
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
	ctx := cmd.Context()
	st, err := openStoreURL(ctx, dbURL)
	if err != nil {
		return err
	}
	defer st.Close()
	c, err := core.NewClient(st, core.Config{
		Logger: a.log, MaintenanceInterval: -1, Periodic: fc.periodicJobs(), AllowUnknownKinds: true,
	})
	if err != nil {
		return usageError{err}
	}
	return fn(ctx, c)
}
