package cli

import (
	"context"
	"errors"
	"fmt"
	"slices"
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
				// The WAITING column (jobs waiting for their
				// dependencies) shows only when some queue has such jobs.
				states := slices.DeleteFunc(slices.Clone(core.AllStates), func(s core.State) bool {
					return s == core.StateWaiting && !slices.ContainsFunc(stats, func(q core.QueueStats) bool { return q.Counts[s] > 0 })
				})
				header := []string{"QUEUE", "PAUSED"}
				for _, s := range states {
					header = append(header, strings.ToUpper(string(s)))
				}
				t := newTable(a.env.stdout, header...)
				for _, q := range stats {
					row := []string{q.Queue, yesNo(q.Paused)}
					for _, s := range states {
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
	var create bool
	cmd := &cobra.Command{
		Use:   name + " NAME",
		Short: short,
		Long: short + `. The queue must be one the store holds (it has jobs, a
pause or limits: the queues "backlog queues" lists); a name it does not hold
is refused as a likely typo unless --create is given, which ` + name + `s a
queue before its first job arrives.`,
		Example: fmt.Sprintf("  backlog queues %s emails\n  backlog queues %s reports --create   # no job yet", name, name),
		Args:    argsExactly(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			q := args[0]
			if err := contract.ValidateQueueName(q); err != nil {
				return usageError{err}
			}
			ctx := cmd.Context()
			return a.withOps(ctx, opsOpts{write: true}, func(o ops) error {
				if err := checkQueueKnown(ctx, o, q, create); err != nil {
					return err
				}
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
	cmd.Flags().BoolVar(&create, "create", false, "accept a queue the store does not hold yet (no jobs, pause or limits)")
	return cmd
}

// errUnknownQueue is the error of a queue command naming a queue the
// store does not hold, without --create.
var errUnknownQueue = errors.New("no such queue")

// checkQueueKnown returns nil when the store holds queue q (QueueStats
// lists it: it has jobs, a pause or limits) or create is set, and
// otherwise an error wrapping errUnknownQueue that names the known queues
// closest to q and --create.
func checkQueueKnown(ctx context.Context, o ops, q string, create bool) error {
	if create {
		return nil
	}
	stats, err := o.QueueStats(ctx)
	if err != nil {
		return fmt.Errorf("queue %s: list queues: %w", q, err)
	}
	names := make([]string, 0, len(stats))
	for _, st := range stats {
		if st.Queue == q {
			return nil
		}
		names = append(names, st.Queue)
	}
	hint := ""
	if close := closestNames(q, names, 3); len(close) > 0 {
		hint = fmt.Sprintf(" (did you mean %s?)", strings.Join(close, ", "))
	}
	return fmt.Errorf("queue %s: %w: it has no jobs, pause or limits%s; give --create to act on a new queue", oneLine(q), errUnknownQueue, hint)
}

// closestNames returns up to n of names within two edits of word, or
// starting with it, in the order given.
func closestNames(word string, names []string, n int) []string {
	var out []string
	for _, c := range names {
		if len(out) == n {
			break
		}
		if strings.HasPrefix(c, word) || editDistance(word, c) <= 2 {
			out = append(out, oneLine(c))
		}
	}
	return out
}

// editDistance is the Levenshtein distance between a and b in bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
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
