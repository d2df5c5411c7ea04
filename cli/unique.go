package cli

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/backlogq/backlog/core/contract"

	"github.com/spf13/cobra"

	"github.com/backlogq/backlog/adapters/httpapi/apitypes"
	"github.com/backlogq/backlog/core"
)

// uniqueOps are the unique-key hold calls of this command line: on the
// store (--db, contract.UniqueHolder) or through the job server (--server,
// GET and DELETE /v1/unique).
type uniqueOps interface {
	holds(ctx context.Context, after string, limit int) ([]core.UniqueHold, string, error)
	release(ctx context.Context, key string, scope core.UniqueScope, queue, kind string) (core.UniqueHold, error)
}

type storeUniqueOps struct{ u contract.UniqueHolder }

func (s storeUniqueOps) holds(ctx context.Context, after string, limit int) ([]core.UniqueHold, string, error) {
	return s.u.UniqueHolds(ctx, contract.UniqueHoldsParams{Now: time.Now().UTC(), After: after, Limit: limit})
}

func (s storeUniqueOps) release(ctx context.Context, key string, scope core.UniqueScope, queue, kind string) (core.UniqueHold, error) {
	p := core.InsertParams{UniqueKey: key, UniqueScope: scope, Queue: queue, Kind: kind}
	return s.u.ReleaseUniqueHold(ctx, contract.ScopedUniqueKey(&p), time.Now().UTC())
}

type serverUniqueOps struct{ s serverOps }

func (o serverUniqueOps) holds(ctx context.Context, after string, limit int) ([]core.UniqueHold, string, error) {
	h, next, err := o.s.c.UniqueHolds(ctx, after, limit)
	return h, next, o.s.check(err, roleAdmin)
}

func (o serverUniqueOps) release(ctx context.Context, key string, scope core.UniqueScope, queue, kind string) (core.UniqueHold, error) {
	h, err := o.s.c.ReleaseUniqueHold(ctx, key, scope, queue, kind)
	return h, o.s.check(err, roleAdmin)
}

// withUniqueOps runs fn with the unique-key hold calls of this command
// line; write opens the store for writing (release).
func (a *app) withUniqueOps(ctx context.Context, write bool, fn func(uniqueOps) error) error {
	if a.server != "" {
		so, err := a.serverOps()
		if err != nil {
			return err
		}
		return fn(serverUniqueOps{so})
	}
	body := func(st contract.Store) error {
		u, ok := st.(contract.UniqueHolder)
		if !ok {
			return fmt.Errorf("this store cannot list or release unique-key holds: %w", core.ErrUnsupported)
		}
		return fn(storeUniqueOps{u})
	}
	if write {
		return a.withStore(ctx, body)
	}
	return a.withReadStore(ctx, body)
}

func (a *app) newUniqueCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "unique",
		Short: "List the unique keys held now; release one whose job is finished or gone",
		Long: `unique lists and releases the holds on unique keys. A job with a unique key
holds it while it lives and for its unique_for window after it finishes, also
once its row is deleted or pruned; meanwhile an enqueue of the key returns the
holding job instead of a new one. Through a job server (--server) these calls
need the admin token.`,
		Example: `  backlog unique list
  backlog unique release invoice-2031
  backlog unique release welcome --scope queue --queue mail`,
		Args: argsRange(0, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return unknownCommand(cmd, args[0])
			}
			return cmd.Help()
		},
	}
	cmd.AddCommand(a.newUniqueListCmd(), a.newUniqueReleaseCmd())
	return cmd
}

func (a *app) newUniqueListCmd() *cobra.Command {
	var after string
	var limit int
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the unique keys held now, by scoped key",
		Long: `list prints the holds on unique keys held now, ordered by scoped key (the key
within its scope: g:KEY, qN:QUEUE:KEY or kN:KIND:KEY): the key, its scope, the
holding job and its state (gone: its row was deleted or pruned, the key stays
held all the same), and when the hold ends (- while the job has not finished).
--after continues after a scoped key (the last one printed).`,
		Example: "  backlog unique list\n  backlog unique list --limit 1000 -o json",
		Args:    argsExactly(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			if limit < 1 || limit > 100000 {
				return usagef("--limit %d: want 1..100000", limit)
			}
			ctx := cmd.Context()
			return a.withUniqueOps(ctx, false, func(o uniqueOps) error {
				var all []core.UniqueHold
				cur := after
				for len(all) < limit {
					page, next, err := o.holds(ctx, cur, min(limit-len(all), contract.MaxUniqueHoldsPage))
					if err != nil {
						return fmt.Errorf("unique holds: %w", err)
					}
					all = append(all, page...)
					if next == "" {
						break
					}
					cur = next
				}
				if a.jsonOutput() {
					out := make([]apitypes.UniqueHold, len(all))
					for i, h := range all {
						out[i] = apitypes.UniqueHoldFromCore(h)
					}
					return writeJSON(a.env.stdout, out)
				}
				t := newTable(a.env.stdout, "KEY", "SCOPE", "QUEUE", "KIND", "JOB", "STATE", "UNTIL")
				for _, h := range all {
					state := string(h.State)
					if h.JobGone {
						state = "gone"
					}
					t.row(oneLine(h.Key), h.Scope.String(), oneLine(h.Queue), oneLine(h.Kind), strconv.FormatInt(h.JobID, 10), state, fmtTime(h.Until))
				}
				return t.flush()
			})
		},
	}
	cmd.Flags().StringVar(&after, "after", "", "list the holds after this scoped key")
	cmd.Flags().IntVar(&limit, "limit", 100, "the most holds to list")
	return cmd
}

func (a *app) newUniqueReleaseCmd() *cobra.Command {
	var scope, queue, kind string
	cmd := &cobra.Command{
		Use:   "release KEY",
		Short: "Release the hold on a unique key whose job is finished or gone",
		Long: `release ends the hold on KEY (in its scope: global unless --scope says queue,
with --queue, or kind, with --kind), so that the next enqueue of the key makes
a new job. A job that has not finished keeps its key: cancel it first. The
holding job's row, if any, is left as it is; retrying it afterwards is refused.`,
		Example: "  backlog unique release invoice-2031\n  backlog unique release welcome --scope queue --queue mail",
		Args:    argsExactly(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			key := args[0]
			sc, err := core.ParseUniqueScope(scope)
			if err != nil {
				return usageError{err}
			}
			switch {
			case key == "":
				return usagef("the unique key is empty")
			case sc == core.UniqueQueue && (queue == "" || kind != ""):
				return usagef("--scope queue needs --queue (and no --kind)")
			case sc == core.UniqueKind && (kind == "" || queue != ""):
				return usagef("--scope kind needs --kind (and no --queue)")
			case sc == core.UniqueGlobal && (queue != "" || kind != ""):
				return usagef("a global key takes no --queue or --kind (give --scope queue or --scope kind)")
			}
			ctx := cmd.Context()
			return a.withUniqueOps(ctx, true, func(o uniqueOps) error {
				h, err := o.release(ctx, key, sc, queue, kind)
				switch {
				case errors.Is(err, core.ErrNotFound):
					return fmt.Errorf("release unique key %s (%s scope): nothing holds it now: %w", oneLine(key), sc, err)
				case errors.Is(err, core.ErrInvalidState):
					return fmt.Errorf("release unique key %s (%s scope): the job holding it has not finished; cancel it first: %w", oneLine(key), sc, err)
				case err != nil:
					return fmt.Errorf("release unique key %s: %w", oneLine(key), err)
				}
				if a.jsonOutput() {
					return writeJSON(a.env.stdout, apitypes.UniqueHoldFromCore(h))
				}
				fmt.Fprintf(a.env.stdout, "unique key %s (%s scope) released from job %d\n", oneLine(h.Key), h.Scope, h.JobID)
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&scope, "scope", "global", "the key's scope: global, queue or kind")
	cmd.Flags().StringVar(&queue, "queue", "", "the queue of a queue-scoped key")
	cmd.Flags().StringVar(&kind, "kind", "", "the kind of a kind-scoped key")
	return cmd
}
