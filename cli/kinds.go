package cli

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/backlogq/backlog/core"
)

// newKindsCmd is `backlog kinds`: the job server's kinds with their
// defaults (GET /v1/kinds).
func (a *app) newKindsCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "kinds",
		Short: "List a job server's kinds with their attempts, retry schedule and timeout",
		Long: `kinds lists the kinds a job server knows (the handlers of its config file and
its retry_by_kind entries, for kinds its remote workers run) with what their
jobs get: the attempts of a job enqueued without --max-attempts, the retry
schedule (exponential backoff, or a list of delays whose last repeats) and the
bound of one attempt; the last line is what any other kind gets. It reads the
server's own configuration, so it needs --server (or BACKLOG_SERVER). See
docs/cli.md.`,
		Example: `  backlog --server http://127.0.0.1:8080 kinds
  backlog --server http://127.0.0.1:8080 -o json kinds`,
		Args: argsRange(0, 0),
		RunE: func(cmd *cobra.Command, args []string) error {
			if a.server == "" {
				return usagef("kinds reads a job server's configuration: give --server (or BACKLOG_SERVER)")
			}
			so, err := a.serverOps()
			if err != nil {
				return err
			}
			kinds, unknown, err := so.c.KindPolicies(cmd.Context())
			if err = so.check(err, roleProducer); err != nil {
				return err
			}
			if a.jsonOutput() {
				return writeJSON(a.env.stdout, map[string]any{"kinds": kinds, "unknown": unknown})
			}
			t := newTable(a.env.stdout, "KIND", "RUNS HERE", "MAX ATTEMPTS", "RETRY", "TIMEOUT")
			for _, k := range append(kinds, unknown) {
				name, here := k.Kind, yesNo(k.Handled)
				if name == "" {
					name, here = "(any other)", "-"
				}
				timeout := "-"
				if k.TimeoutSeconds > 0 {
					timeout = secondsText(k.TimeoutSeconds)
				}
				t.row(name, here, strconv.Itoa(k.MaxAttempts), retryText(k.Retry), timeout)
			}
			return t.flush()
		},
	}
}

// retryText is a retry policy in one short line: "exponential 1s..24h
// ±25%", "delays 10s, 1m, 5m (last repeats)" or "custom (set in Go)".
func retryText(r core.RetryDescription) string {
	switch r.Policy {
	case "exponential":
		return fmt.Sprintf("exponential %s..%s ±%.0f%%", secondsText(r.BaseSeconds), secondsText(r.MaxSeconds), r.Jitter*100)
	case "delays":
		if len(r.DelaysSeconds) == 0 {
			return "at once"
		}
		parts := make([]string, len(r.DelaysSeconds))
		for i, d := range r.DelaysSeconds {
			parts[i] = secondsText(d)
		}
		return "delays " + strings.Join(parts, ", ") + " (last repeats)"
	}
	return "custom (set in Go)"
}

// secondsText prints a number of seconds as a Go duration ("1m30s").
func secondsText(s float64) string {
	return (time.Duration(s * float64(time.Second))).String()
}
