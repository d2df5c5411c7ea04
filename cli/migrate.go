package cli

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/backlogq/backlog/core/contract"
)

func (a *app) newMigrateCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "migrate",
		Short: "Create or upgrade the store's schema",
		Long: `migrate brings the store's schema to the newest version. It is safe to
run repeatedly and from several processes at once. Stores without a schema
(memory) have nothing to do.

"migrate status" shows the schema's version and the migrations pending;
"migrate sql" prints their SQL, for teams that apply migrations with their
own tool. Neither changes the database.`,
		Example: "  backlog migrate --db sqlite:jobs.db\n  backlog migrate status --db postgres://app@db/app?schema=jobs\n  backlog migrate sql --db postgres://app@db/app?schema=jobs > backlog.sql",
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
	cmd.AddCommand(a.newMigrateStatusCmd(), a.newMigrateSQLCmd())
	return cmd
}

// migrationScripter is implemented by the SQL stores (sqlite, postgres,
// mysql): the names of the migrations Migrate would apply now, oldest
// first, and their SQL as one script rendered for the store's schema or
// table prefix, including the inserts that record their versions.
type migrationScripter interface {
	MigrationSQL(ctx context.Context) (pending []string, script string, err error)
}

// migrationStatus is what migrate status and migrate sql report.
type migrationStatus struct {
	DB      string   `json:"db"`
	Version int64    `json:"version"` // newest migration applied; 0: none
	Newest  int64    `json:"newest"`  // newest migration this backlog has
	Pending []string `json:"pending"` // names of the migrations migrate would apply, oldest first
	SQL     string   `json:"sql,omitempty"`
}

// readMigrationStatus opens the store of --db without migrating it (and,
// for SQLite, without creating the file) and reads its schema version and
// pending migrations. A store without a schema (memory) is an error.
func (a *app) readMigrationStatus(ctx context.Context, withSQL bool) (migrationStatus, error) {
	ms := migrationStatus{DB: redactURL(a.dbURL), Pending: []string{}}
	err := a.withReadStore(ctx, func(st contract.Store) error {
		sv, ok1 := st.(schemaVersioner)
		sc, ok2 := st.(migrationScripter)
		if !ok1 || !ok2 {
			return fmt.Errorf("%s: this store has no schema to migrate", ms.DB)
		}
		var err error
		if ms.Version, ms.Newest, err = sv.SchemaVersion(ctx); err != nil {
			return err
		}
		pending, script, err := sc.MigrationSQL(ctx)
		if err != nil {
			return err
		}
		ms.Pending = append(ms.Pending, pending...)
		if withSQL {
			ms.SQL = script
		}
		return nil
	})
	return ms, err
}

func (a *app) newMigrateStatusCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "status",
		Short: "Show the schema's version and the migrations pending, changing nothing",
		Long: `status prints the newest migration applied to the store's schema (0: none
yet) and the newest this backlog has, and names the migrations "backlog
migrate" would apply. -o json prints {"db", "version", "newest", "pending"}.
A SQLite file that does not exist is an error.`,
		Example: "  backlog migrate status --db sqlite:jobs.db",
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ms, err := a.readMigrationStatus(cmd.Context(), false)
			if err != nil {
				return err
			}
			if a.jsonOutput() {
				return writeJSON(a.env.stdout, ms)
			}
			out := a.env.stdout
			switch {
			case ms.Version > ms.Newest:
				fmt.Fprintf(out, "%s: schema at version %d, newer than this backlog's %d: upgrade backlog before running it against this store\n", ms.DB, ms.Version, ms.Newest)
			case len(ms.Pending) == 0:
				fmt.Fprintf(out, "%s: schema at version %d, the newest; nothing pending\n", ms.DB, ms.Version)
			default:
				fmt.Fprintf(out, "%s: schema at version %d; this backlog has version %d: %d pending (backlog migrate applies them, backlog migrate sql prints them)\n",
					ms.DB, ms.Version, ms.Newest, len(ms.Pending))
				for _, p := range ms.Pending {
					fmt.Fprintf(out, "  %s\n", p)
				}
			}
			return nil
		},
	}
}

func (a *app) newMigrateSQLCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "sql",
		Short: "Print the SQL of the pending migrations, applying nothing",
		Long: `sql prints, on stdout, the SQL that "backlog migrate" would run on this
store now: the pending migrations rendered for the URL's schema (PostgreSQL)
or table prefix, each in a transaction, each followed by the insert that
records its version in the version table (goose_db_version), so that
backlog's own migrate later finds it applied; a store without versions gets
the version table (and, on PostgreSQL, the schema) first. Apply it with your
own migration tool or psql/mysql/sqlite3. Nothing pending prints nothing
(and a note on stderr). -o json prints {"db", "version", "newest",
"pending", "sql"}. The database is only read; a SQLite file that does not
exist is an error.`,
		Example: "  backlog migrate sql --db 'postgres://app@db/app?schema=jobs' > backlog-migrations.sql",
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ms, err := a.readMigrationStatus(cmd.Context(), true)
			if err != nil {
				return err
			}
			if a.jsonOutput() {
				return writeJSON(a.env.stdout, ms)
			}
			if len(ms.Pending) == 0 {
				fmt.Fprintf(a.env.stderr, "backlog: %s: schema at version %d; no migration pending\n", ms.DB, ms.Version)
				return nil
			}
			fmt.Fprintf(a.env.stdout, "-- backlog: migrations %s for %s (schema version %d to %d)\n\n%s",
				strings.Join(ms.Pending, ", "), ms.DB, ms.Version, ms.Newest, ms.SQL)
			return nil
		},
	}
}
