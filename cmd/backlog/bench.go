package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/internal/bench"
)

// newBenchCmd measures the engine on the store named by --db. It writes
// jobs of kind bench.noop into its own queues; run it on a scratch
// database.
func (a *app) newBenchCmd() *cobra.Command {
	var (
		jobs, workers, maxClaim, producers, batch int
		duration, interval, poll                  time.Duration
	)
	tune := func(c *core.Config) {
		if maxClaim > 0 {
			c.MaxClaim = maxClaim
		}
		if poll > 0 {
			c.PollInterval = poll
		}
	}
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure throughput and wake-up latency on a store (use a scratch database)",
		Long: `bench measures the whole engine (claims, handler executions, batched
finishes) with no-op jobs on the store named by --db:

  burndown  insert --jobs jobs, then time how fast the workers drain them
  steady    producers and workers together for --duration
  latency   idle workers; enqueue one job every --interval and time
            enqueue → handler start (through the store's notifications)

It uses the queues "bench", "steady" and "latency" and deletes the jobs it
completes. Figures for this project's machines are in docs/benchmarks.md.`,
		Args: noArgs,
		RunE: helpOrUnknown,
	}
	pf := cmd.PersistentFlags()
	pf.IntVar(&workers, "workers", 100, "MaxWorkers of the benchmark queue")
	pf.IntVar(&maxClaim, "max-claim", 0, "jobs per claim at most (0 = the engine default)")
	pf.DurationVar(&poll, "poll-interval", 0, "idle queues' poll interval (0 = the engine default, 1s)")

	run := func(name string, fn func(cmd *cobra.Command, st core.Store) (fmt.Stringer, error)) *cobra.Command {
		return &cobra.Command{
			Use:  name,
			Args: noArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				return a.withStore(cmd.Context(), func(st core.Store) error {
					if _, err := migrate(cmd.Context(), st); err != nil {
						return err
					}
					res, err := fn(cmd, st)
					if err != nil {
						return err
					}
					if a.jsonOutput() {
						return writeJSON(a.env.stdout, res)
					}
					fmt.Fprintf(a.env.stdout, "%s: %s\n", redactURL(a.dbURL), res)
					return nil
				})
			},
		}
	}
	burn := run("burndown", func(cmd *cobra.Command, st core.Store) (fmt.Stringer, error) {
		return bench.BurnDown(cmd.Context(), st, bench.Config{Jobs: jobs, Workers: workers, Tune: tune})
	})
	burn.Short = "Insert --jobs no-op jobs, then time how fast they are worked off"
	burn.Flags().IntVar(&jobs, "jobs", 100000, "jobs to insert and burn down")

	steady := run("steady", func(cmd *cobra.Command, st core.Store) (fmt.Stringer, error) {
		return bench.Steady(cmd.Context(), st, bench.SteadyConfig{Duration: duration, Producers: producers, Batch: batch, Workers: workers, Tune: tune})
	})
	steady.Short = "Producers and workers together for --duration"
	steady.Flags().DurationVar(&duration, "duration", 10*time.Second, "measured time")
	steady.Flags().IntVar(&producers, "producers", 2, "goroutines enqueueing")
	steady.Flags().IntVar(&batch, "batch", 100, "jobs per enqueue call")

	latency := run("latency", func(cmd *cobra.Command, st core.Store) (fmt.Stringer, error) {
		// A second handle on the same database, so the wake-up crosses
		// connection pools as it would between processes.
		other, err := a.openStore(cmd.Context())
		if err != nil {
			return nil, err
		}
		defer other.Close()
		return bench.Latency(cmd.Context(), st, other, bench.LatencyConfig{Jobs: jobs, Interval: interval, Tune: tune})
	})
	latency.Short = "Time from enqueue to handler start with idle workers"
	latency.Flags().IntVar(&jobs, "jobs", 200, "jobs to enqueue one by one")
	latency.Flags().DurationVar(&interval, "interval", 10*time.Millisecond, "pause between enqueues")

	cmd.AddCommand(burn, steady, latency)
	return cmd
}
