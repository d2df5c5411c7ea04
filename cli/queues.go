package cli

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/backlogq/backlog/core/contract"

	"github.com/spf13/cobra"

	"github.com/backlogq/backlog/core"
)

func (a *app) newQueuesCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "queues",
		Short: "Show queues with their job counts per state; pause and resume them",
		Long: `queues lists every queue that has jobs or a persisted pause, with whether it
is paused and how many jobs it has in each state.`,
		Example: `  backlog queues
  backlog queues -o json
  backlog queues pause emails
  backlog queues resume emails`,
		Args: argsRange(0, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return unknownCommand(cmd, args[0])
			}
			return a.withOps(cmd.Context(), opsOpts{}, func(o ops) error {
				stats, err := o.QueueStats(cmd.Context())
				if err != nil {
					return fmt.Errorf("queue stats: %w", err)
				}
				if a.jsonOutput() {
					for i := range stats {
						// Every state present, zeros included, so scripts need no defaults.
						full := make(map[core.State]int, len(core.AllStates))
						for _, s := range core.AllStates {
							full[s] = stats[i].Counts[s]
						}
						stats[i].Counts = full
					}
					if stats == nil {
						stats = []core.QueueStats{}
					}
					return writeJSON(a.env.stdout, stats)
				}
				header := []string{"QUEUE", "PAUSED"}
				for _, s := range core.AllStates {
					header = append(header, strings.ToUpper(string(s)))
				}
				t := newTable(a.env.stdout, header...)
				for _, q := range stats {
					row := []string{q.Queue, yesNo(q.Paused)}
					for _, s := range core.AllStates {
						row = append(row, strconv.Itoa(q.Counts[s]))
					}
					t.row(row...)
				}
				return t.flush()
			})
		},
	}
	cmd.AddCommand(a.newQueuePauseCmd(true), a.newQueuePauseCmd(false), a.newQueueLimitsCmd())
	return cmd
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func (a *app) newQueuePauseCmd(pause bool) *cobra.Command {
	name, short, done := "resume", "Let workers claim jobs of a queue again", "resumed"
	if pause {
		name, short, done = "pause", "Stop every worker from claiming jobs of a queue (running jobs finish)", "paused"
	}
	return &cobra.Command{
		Use:     name + " NAME",
		Short:   short,
		Example: fmt.Sprintf("  backlog queues %s emails", name),
		Args:    argsExactly(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			q := args[0]
			if err := contract.ValidateQueueName(q); err != nil {
				return usageError{err}
			}
			ctx := cmd.Context()
			return a.withOps(ctx, opsOpts{write: true}, func(o ops) error {
				var err error
				if pause {
					err = o.PauseQueue(ctx, q)
				} else {
					err = o.ResumeQueue(ctx, q)
				}
				if err != nil {
					return fmt.Errorf("%s queue %s: %w", name, q, err)
				}
				if a.jsonOutput() {
					return writeJSON(a.env.stdout, map[string]any{"queue": q, "paused": pause})
				}
				fmt.Fprintf(a.env.stdout, "queue %s %s\n", oneLine(q), done)
				return nil
			})
		},
	}
}

// workerView is a worker record in JSON output, with the seconds since its
// last heartbeat.
type workerView struct {
	core.WorkerInfo
	HeartbeatAgeSeconds float64       `json:"heartbeat_age_seconds"`
	Liveness            core.Liveness `json:"liveness"` // active, stale or dead (WorkerInfo.Liveness)
}

func (a *app) newWorkersCmd() *cobra.Command {
	var staleAfter, deadAfter time.Duration
	cmd := &cobra.Command{
		Use:   "workers",
		Short: "List worker processes registered in the store, with liveness and tags",
		Long: `workers lists the worker processes that registered in the store (in-process
workers and remote workers of backlog serve), with their liveness, host, pid,
queues, tags, start time and last heartbeat. AGE is the time since the last
heartbeat: a live worker heartbeats every 10 s. STATE is active, stale (no
heartbeat for --stale-after) or dead (none for --dead-after: maintenance hands
its jobs back and removes the record); the defaults are the engine's.`,
		Example: "  backlog workers\n  backlog workers -o json",
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if staleAfter <= 0 || deadAfter <= staleAfter {
				return usagef("--stale-after must be positive and below --dead-after")
			}
			return a.withOps(cmd.Context(), opsOpts{}, func(o ops) error {
				ws, err := o.Workers(cmd.Context())
				if err != nil {
					return fmt.Errorf("list workers: %w", err)
				}
				now := time.Now()
				if a.jsonOutput() {
					out := make([]workerView, 0, len(ws))
					for _, w := range ws {
						out = append(out, workerView{WorkerInfo: w, HeartbeatAgeSeconds: now.Sub(w.HeartbeatAt).Seconds(), Liveness: w.Liveness(now, staleAfter, deadAfter)})
					}
					return writeJSON(a.env.stdout, out)
				}
				t := newTable(a.env.stdout, "ID", "STATE", "HOST", "PID", "QUEUES", "TAGS", "STARTED", "LAST HEARTBEAT", "AGE")
				for _, w := range ws {
					tags := strings.Join(w.Tags, ",")
					if tags == "" {
						tags = "-"
					}
					t.row(w.ID, string(w.Liveness(now, staleAfter, deadAfter)), w.Host, strconv.Itoa(w.PID), strings.Join(w.Queues, ","), tags,
						fmtTime(w.StartedAt), fmtTime(w.HeartbeatAt), fmtAge(now, w.HeartbeatAt))
				}
				return t.flush()
			})
		},
	}
	cmd.Flags().DurationVar(&staleAfter, "stale-after", 30*time.Second, "a worker without a heartbeat for this long is stale (core.Config.WorkerStaleAfter)")
	cmd.Flags().DurationVar(&deadAfter, "dead-after", 2*time.Minute, "a worker without a heartbeat for this long is dead (core.Config.WorkerDeadAfter)")
	return cmd
}
