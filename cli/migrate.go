package cli

import (
	"fmt"

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
			rep, err := a.migrateAndReport(cmd.Context())
			if err != nil {
				return err
			}
			if a.jsonOutput() {
				return writeJSON(a.env.stdout, rep)
			}
			fmt.Fprintln(a.env.stdout, rep)
			return nil
		},
	}
}
