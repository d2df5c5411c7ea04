package cli

import (
	"fmt"

	"github.com/backlogq/backlog/core/contract"

	"github.com/spf13/cobra"
)

func (a *app) newMigrateCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "migrate",
		Short: "Create or upgrade the store's schema",
		Long: `migrate brings the store's schema to the newest version. It is safe to
run repeatedly and from several processes at once. Stores without a schema
(memory) have nothing to do.`,
		Example: "  backlog migrate --db sqlite:jobs.db",
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.withStore(cmd.Context(), func(st contract.Store) error {
				has, err := migrate(cmd.Context(), st)
				if err != nil {
					return err
				}
				status := "migrated"
				if !has {
					status = "no schema"
				}
				if a.jsonOutput() {
					return writeJSON(a.env.stdout, map[string]any{"db": redactURL(a.dbURL), "status": status})
				}
				if has {
					fmt.Fprintf(a.env.stdout, "%s: schema is up to date\n", redactURL(a.dbURL))
				} else {
					fmt.Fprintf(a.env.stdout, "%s: this store has no schema to migrate\n", redactURL(a.dbURL))
				}
				return nil
			})
		},
	}
}
