package cli

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/backlogq/backlog/core/contract"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/backlogq/backlog/core"
)

// newQueueLimitsCmd is `backlog queues limits NAME`: show the queue's
// cluster-wide concurrency limits, or set them with flags.
func (a *app) newQueueLimitsCmd() *cobra.Command {
	var (
		maxRunning, perPartition int
		perKind                  []string
		clear                    bool
		rate, ratePerPartition   string
		ratePerKind              []string
		fair                     bool
		aging                    time.Duration
		agingMaxSteps            int
		workersPerNode           int
		create                   bool
	)
	cmd := &cobra.Command{
		Use:   "limits NAME",
		Short: "Show or set a queue's cluster-wide limits, rates, fairness and aging",
		Long: `limits shows the claim policy stored for a queue: at most so many
running jobs across every node, per queue, per kind and per partition key;
at most so many starts per period (rates, written N/PERIOD: 10/s, 100/1m);
fair claims across partition keys; priority aging. With flags it sets them
(flags not given keep their value); --clear lifts them all. Every node's
claims obey the stored policy at once. Setting limits of a queue the store
does not hold (no jobs, pause or limits) needs --create. See docs/scheduling.md.`,
		Example: `  backlog queues limits emails
  backlog queues limits emails --max-running 20 --per-kind bulk=2 --per-partition 3
  backlog queues limits emails --per-kind bulk=0   # lift the limit of one kind
  backlog queues limits emails --rate 100/1m --rate-per-kind bulk=1/s --rate-per-partition 10/1m
  backlog queues limits emails --fair --aging 5m --aging-max-steps 4
  backlog queues limits emails --workers-per-node 5   # every node runs 5 at once
  backlog queues limits emails --clear`,
		Args: argsExactly(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			q := args[0]
			if err := contract.ValidateQueueName(q); err != nil {
				return usageError{err}
			}
			fl := cmd.Flags()
			set := clear
			for _, f := range []string{"max-running", "per-kind", "per-partition", "rate", "rate-per-kind", "rate-per-partition", "fair", "aging", "aging-max-steps", "workers-per-node"} {
				set = set || fl.Changed(f)
			}
			ctx := cmd.Context()
			return a.withOps(ctx, opsOpts{write: set}, func(o ops) error {
				l, err := o.QueueLimits(ctx, q)
				if err != nil {
					return fmt.Errorf("queue %s: limits: %w", q, err)
				}
				if set && l.IsZero() && !clear {
					// A queue with limits is known; one without must
					// have jobs or a pause, or --create.
					if err := checkQueueKnown(ctx, o, q, create); err != nil {
						return err
					}
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
					if err := applyPolicyFlags(fl, &l, rate, ratePerPartition, ratePerKind, fair, aging, agingMaxSteps); err != nil {
						return err
					}
					if fl.Changed("workers-per-node") {
						l.WorkersPerNode = workersPerNode
					}
					if l, err = o.SetQueueLimits(ctx, q, l); err != nil {
						return fmt.Errorf("queue %s: set limits: %w", q, err)
					}
				}
				waits, err := o.RateWaits(ctx, q)
				if err != nil {
					return fmt.Errorf("queue %s: rate waits: %w", q, err)
				}
				if a.jsonOutput() {
					out := map[string]any{"queue": q, "limits": l}
					if len(waits) > 0 {
						out["rate_waits"] = waits
					}
					return writeJSON(a.env.stdout, out)
				}
				fmt.Fprintf(a.env.stdout, "queue %s: %s\n", oneLine(q), describeLimits(l))
				for _, w := range waits {
					fmt.Fprintf(a.env.stdout, "  %s waits for its rate until %s\n", oneLine(w.Group), w.NextStart.UTC().Format(time.RFC3339Nano))
				}
				return nil
			})
		},
	}
	fl := cmd.Flags()
	fl.BoolVar(&create, "create", false, "set limits of a queue the store does not hold yet (no jobs, pause or limits); without it such a name is refused as a likely typo")
	fl.IntVar(&maxRunning, "max-running", 0, "running jobs of the queue at most, across every node (0 = no limit)")
	fl.StringArrayVar(&perKind, "per-kind", nil, "KIND=N: running jobs of that kind at most (repeatable; N 0 lifts it)")
	fl.IntVar(&perPartition, "per-partition", 0, "running jobs per partition key at most (0 = no limit)")
	fl.StringVar(&rate, "rate", "", "N/PERIOD: job starts of the queue at most, across every node (10/s, 100/1m; 0 = no rate)")
	fl.StringArrayVar(&ratePerKind, "rate-per-kind", nil, "KIND=N/PERIOD: starts of that kind at most (repeatable; KIND=0 lifts it)")
	fl.StringVar(&ratePerPartition, "rate-per-partition", "", "N/PERIOD: starts per partition key at most (0 = no rate)")
	fl.BoolVar(&fair, "fair", false, "claims take turns across partition keys (--fair=false: strict claim order)")
	fl.DurationVar(&aging, "aging", 0, "raise waiting jobs' priority one step per this long (0 = no aging; at least 1s)")
	fl.IntVar(&agingMaxSteps, "aging-max-steps", 0, "at most this many aging steps (0 = up to the highest priority)")
	fl.IntVar(&workersPerNode, "workers-per-node", 0, "jobs of the queue each node runs at once, replacing its configured max_workers within a poll interval (0 = each node's own)")
	fl.BoolVar(&clear, "clear", false, "lift every limit first")
	return cmd
}

// applyPolicyFlags sets in l the rate, fairness and aging flags given.
func applyPolicyFlags(fl *pflag.FlagSet, l *core.QueueLimits, rate, perPartition string, perKind []string, fair bool, aging time.Duration, agingMaxSteps int) error {
	var err error
	if fl.Changed("rate") {
		if l.Rate, err = core.ParseRateLimit(rate); err != nil {
			return usagef("--rate: %v", err)
		}
	}
	if fl.Changed("rate-per-partition") {
		if l.RatePerPartition, err = core.ParseRateLimit(perPartition); err != nil {
			return usagef("--rate-per-partition: %v", err)
		}
	}
	for _, kv := range perKind {
		k, spec, ok := strings.Cut(kv, "=")
		r, err := core.ParseRateLimit(spec)
		if !ok || k == "" || err != nil {
			return usagef("--rate-per-kind %q must be KIND=N/PERIOD (like bulk=1/s) or KIND=0", kv)
		}
		if l.RatePerKind == nil {
			l.RatePerKind = map[string]core.RateLimit{}
		}
		l.RatePerKind[k] = r
	}
	if fl.Changed("fair") {
		l.Fair = fair
	}
	if fl.Changed("aging") {
		l.Aging.Every = aging
	}
	if fl.Changed("aging-max-steps") {
		l.Aging.MaxSteps = agingMaxSteps
	}
	return nil
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
	if !l.Rate.IsZero() {
		parts = append(parts, "rate "+l.Rate.String())
	}
	var rates []string
	for k, r := range l.RatePerKind {
		if !r.IsZero() {
			rates = append(rates, oneLine(k)+"="+r.String())
		}
	}
	if len(rates) > 0 {
		slices.Sort(rates)
		parts = append(parts, "rate per kind "+strings.Join(rates, ","))
	}
	if !l.RatePerPartition.IsZero() {
		parts = append(parts, "rate per partition "+l.RatePerPartition.String())
	}
	if l.Fair {
		parts = append(parts, "fair across partition keys")
	}
	if !l.Aging.IsZero() {
		a := "aging one step per " + l.Aging.Every.String()
		if l.Aging.MaxSteps > 0 {
			a += fmt.Sprintf(", at most %d", l.Aging.MaxSteps)
		}
		parts = append(parts, a)
	}
	if l.WorkersPerNode > 0 {
		parts = append(parts, fmt.Sprintf("%d workers per node", l.WorkersPerNode))
	}
	if len(parts) == 0 {
		return "no limits"
	}
	return strings.Join(parts, "; ")
}
