package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"

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
			return a.withReadStore(cmd.Context(), func(st core.Store) error {
				stats, err := st.Stats(cmd.Context())
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
	cmd.AddCommand(a.newQueuePauseCmd(true), a.newQueuePauseCmd(false))
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
			if err := core.ValidateQueueName(q); err != nil {
				return usageError{err}
			}
			ctx := cmd.Context()
			return a.withStore(ctx, func(st core.Store) error {
				cl, err := a.insertClient(st)
				if err != nil {
					return err
				}
				if pause {
					err = cl.PauseQueue(ctx, q)
				} else {
					err = cl.ResumeQueue(ctx, q)
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
	HeartbeatAgeSeconds float64 `json:"heartbeat_age_seconds"`
}

func (a *app) newWorkersCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "workers",
		Short: "List worker processes registered in the store",
		Long: `workers lists the worker processes that registered in the store, with their
host, pid, queues, start time and last heartbeat. AGE is the time since the
last heartbeat: a live worker heartbeats every 10 s, and records left
without one for 2 minutes are removed by maintenance.`,
		Example: "  backlog workers\n  backlog workers -o json",
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.withReadStore(cmd.Context(), func(st core.Store) error {
				ws, err := st.Workers(cmd.Context())
				if err != nil {
					return fmt.Errorf("list workers: %w", err)
				}
				now := time.Now()
				if a.jsonOutput() {
					out := make([]workerView, 0, len(ws))
					for _, w := range ws {
						out = append(out, workerView{WorkerInfo: w, HeartbeatAgeSeconds: now.Sub(w.HeartbeatAt).Seconds()})
					}
					return writeJSON(a.env.stdout, out)
				}
				t := newTable(a.env.stdout, "ID", "HOST", "PID", "QUEUES", "STARTED", "LAST HEARTBEAT", "AGE")
				for _, w := range ws {
					t.row(w.ID, w.Host, strconv.Itoa(w.PID), strings.Join(w.Queues, ","),
						fmtTime(w.StartedAt), fmtTime(w.HeartbeatAt), fmtAge(now, w.HeartbeatAt))
				}
				return t.flush()
			})
		},
	}
}
