package main

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/backlogq/backlog/core"
)

// newQueueLimitsCmd is `backlog queues limits NAME`: show the queue's
// cluster-wide concurrency limits, or set them with flags.
func (a *app) newQueueLimitsCmd() *cobra.Command {
	var (
		maxRunning, perPartition int
		perKind                  []string
		clear                    bool
	)
	cmd := &cobra.Command{
		Use:   "limits NAME",
		Short: "Show or set a queue's cluster-wide concurrency limits",
		Long: `limits shows the concurrency limits stored for a queue: at most so many
running jobs across every node, per queue, per kind and per partition key.
With flags it sets them (flags not given keep their value); --clear lifts
them all. Every node's claims obey the stored limits at once. See
docs/scheduling.md.`,
		Example: `  backlog queues limits emails
  backlog queues limits emails --max-running 20 --per-kind bulk=2 --per-partition 3
  backlog queues limits emails --per-kind bulk=0   # lift the limit of one kind
  backlog queues limits emails --clear`,
		Args: argsExactly(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			q := args[0]
			if err := core.ValidateQueueName(q); err != nil {
				return usageError{err}
			}
			fl := cmd.Flags()
			set := clear || fl.Changed("max-running") || fl.Changed("per-kind") || fl.Changed("per-partition")
			ctx := cmd.Context()
			return a.withOps(ctx, opsOpts{write: set}, func(o ops) error {
				l, err := o.QueueLimits(ctx, q)
				if err != nil {
					return fmt.Errorf("queue %s: limits: %w", q, err)
				}
				if set {
					if clear {
						l = core.QueueLimits{}
					}
					if fl.Changed("max-running") {
						l.MaxRunning = maxRunning
					}
					if fl.Changed("per-partition") {
						l.MaxRunningPerPartition = perPartition
					}
					for _, kv := range perKind {
						k, v, ok := strings.Cut(kv, "=")
						n, err := strconv.Atoi(v)
						if !ok || k == "" || err != nil || n < 0 {
							return usagef("--per-kind %q must be KIND=N with N ≥ 0", kv)
						}
						if l.MaxRunningPerKind == nil {
							l.MaxRunningPerKind = map[string]int{}
						}
						l.MaxRunningPerKind[k] = n
					}
					if l, err = o.SetQueueLimits(ctx, q, l); err != nil {
						return fmt.Errorf("queue %s: set limits: %w", q, err)
					}
				}
				if a.jsonOutput() {
					return writeJSON(a.env.stdout, map[string]any{"queue": q, "limits": l})
				}
				fmt.Fprintf(a.env.stdout, "queue %s: %s\n", oneLine(q), describeLimits(l))
				return nil
			})
		},
	}
	fl := cmd.Flags()
	fl.IntVar(&maxRunning, "max-running", 0, "running jobs of the queue at most, across every node (0 = no limit)")
	fl.StringArrayVar(&perKind, "per-kind", nil, "KIND=N: running jobs of that kind at most (repeatable; N 0 lifts it)")
	fl.IntVar(&perPartition, "per-partition", 0, "running jobs per partition key at most (0 = no limit)")
	fl.BoolVar(&clear, "clear", false, "lift every limit first")
	return cmd
}

// describeLimits is limits in one line: "no limits" or
// "max running 20; per kind bulk=2; per partition 3".
func describeLimits(l core.QueueLimits) string {
	var parts []string
	if l.MaxRunning > 0 {
		parts = append(parts, fmt.Sprintf("max running %d", l.MaxRunning))
	}
	var kinds []string
	for k, n := range l.MaxRunningPerKind {
		if n > 0 {
			kinds = append(kinds, fmt.Sprintf("%s=%d", oneLine(k), n))
		}
	}
	if len(kinds) > 0 {
		slices.Sort(kinds)
		parts = append(parts, "per kind "+strings.Join(kinds, ","))
	}
	if l.MaxRunningPerPartition > 0 {
		parts = append(parts, fmt.Sprintf("per partition %d", l.MaxRunningPerPartition))
	}
	if len(parts) == 0 {
		return "no limits"
	}
	return strings.Join(parts, "; ")
}
