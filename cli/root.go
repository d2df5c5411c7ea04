package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"sync/atomic"

	"github.com/backlogq/backlog/core/contract"

	mysqldriver "github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/spf13/cobra"

	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/store"
	_ "github.com/backlogq/backlog/store/mysql"    // registers mysql:
	_ "github.com/backlogq/backlog/store/postgres" // registers postgres: and postgresql:
	_ "github.com/backlogq/backlog/store/sqlite"   // registers sqlite:
)

// defaultDB is the store URL used when neither --db nor BACKLOG_DB is set.
const defaultDB = "sqlite:backlog.db"

// app holds the environment and the root flags shared by every command of
// one command tree.
type app struct {
	env *env

	dbURL     string
	dbGiven   bool   // --db or BACKLOG_DB was set, not the default
	server    string // job server URL (--server, BACKLOG_SERVER); "" = the store of --db
	token     string // bearer token for server (--token, BACKLOG_TOKEN)
	logLevel  string
	logFormat string // text or json (--log-format, BACKLOG_LOG_FORMAT)
	output    string

	log *slog.Logger
	// waitingForDB is set while start-up retries an unreachable database:
	// driver log lines, one per attempt, are then debug output.
	waitingForDB atomic.Bool
}

// newRootCmd builds the whole command tree writing to e. Every call returns
// a fresh tree with its own flag values.
func newRootCmd(e *env) *cobra.Command {
	a := &app{env: e}
	dbDefault := defaultDB
	if e.getenv != nil {
		if v := e.getenv("BACKLOG_DB"); v != "" {
			dbDefault = v
		}
	}
	logFormatDefault := "text"
	if e.getenv != nil {
		if v := e.getenv("BACKLOG_LOG_FORMAT"); v != "" {
			logFormatDefault = v
		}
	}
	root := &cobra.Command{
		Use:   "backlog",
		Short: "Durable background jobs in the database you already run",
		Long: `backlog manages a backlog job store: migrate its schema, enqueue and
inspect jobs, pause queues, and run workers whose handlers are shell commands.

The store is chosen by --db (or $BACKLOG_DB), a URL such as
sqlite:backlog.db or sqlite:/var/lib/backlog/jobs.db?prefix=app_.

Operators without database credentials give --server URL (or
$BACKLOG_SERVER) instead, with --token (or $BACKLOG_TOKEN): enqueue, jobs,
queues, workers and cron then go through that job server's HTTP API, with
the same output.`,
		SilenceErrors: true,
		SilenceUsage:  true,
		Args:          noArgs,
		RunE:          helpOrUnknown,
		PersistentPreRunE: func(cmd *cobra.Command, args []string) error {
			if err := a.setup(); err != nil {
				return err
			}
			return a.resolveTarget(cmd)
		},
	}
	root.SetIn(e.stdin)
	root.SetOut(e.stdout)
	root.SetErr(e.stderr)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })

	pf := root.PersistentFlags()
	pf.StringVar(&a.dbURL, "db", dbDefault, "store URL (env BACKLOG_DB), e.g. sqlite:backlog.db")
	pf.StringVar(&a.server, "server", "", "job server URL (env BACKLOG_SERVER), e.g. http://127.0.0.1:8080: enqueue, jobs, queues, workers and cron go through its HTTP API instead of --db")
	pf.StringVar(&a.token, "token", "", "bearer token for --server (env BACKLOG_TOKEN): producer role to enqueue and read, admin role for the rest")
	pf.StringVar(&a.logLevel, "log-level", "info", "log level: debug, info, warn or error (logs go to stderr)")
	pf.StringVar(&a.logFormat, "log-format", logFormatDefault, "log format (env BACKLOG_LOG_FORMAT): text (key=value lines) or json (one JSON object a line)")
	pf.StringVarP(&a.output, "output", "o", "table", "output format: table or json")

	root.AddCommand(
		markTarget(a.newMigrateCmd(), targetDB),
		markTarget(a.newEnqueueCmd(), targetEither),
		markTarget(a.newJobsCmd(), targetEither),
		markTarget(a.newWorkflowsCmd(workflowKind), targetEither),
		markTarget(a.newWorkflowsCmd(batchKind), targetEither),
		markTarget(a.newQueuesCmd(), targetEither),
		markTarget(a.newWorkersCmd(), targetEither),
		markTarget(a.newUniqueCmd(), targetEither),
		markTarget(a.newCronCmd(), targetEither),
		markTarget(a.newKindsCmd(), targetEither),
		markTarget(a.newKeysCmd(), targetDB),
		markTarget(a.newWorkCmd("work"), targetDB),
		markTarget(a.newWorkCmd("serve"), targetDB),
		markTarget(a.newBenchCmd(), targetDB),
		a.newVersionCmd(),
	)
	root.Version = readBuildVersion().String()
	root.SetVersionTemplate("{{.Version}}\n")
	return root
}

// setup validates the root flags and builds the logger.
func (a *app) setup() error {
	switch a.output {
	case "table", "json":
	default:
		return usagef("--output must be table or json, not %q", a.output)
	}
	var lvl slog.Level
	switch strings.ToLower(a.logLevel) {
	case "debug":
		lvl = slog.LevelDebug
	case "info", "":
		lvl = slog.LevelInfo
	case "warn", "warning":
		lvl = slog.LevelWarn
	case "error":
		lvl = slog.LevelError
	default:
		return usagef("--log-level must be debug, info, warn or error, not %q", a.logLevel)
	}
	opts := &slog.HandlerOptions{Level: lvl}
	switch strings.ToLower(a.logFormat) {
	case "text", "":
		a.log = slog.New(slog.NewTextHandler(a.env.stderr, opts))
	case "json":
		a.log = slog.New(slog.NewJSONHandler(a.env.stderr, opts))
	default:
		return usagef("--log-format must be text or json, not %q", a.logFormat)
	}
	if a.env.setDriverLogger != nil {
		a.env.setDriverLogger(a.driverLog)
	}
	return nil
}

// driverLog logs a line of a database driver's own log: a warning, or
// debug output while start-up waits for the database.
func (a *app) driverLog(v ...any) {
	lvl := slog.LevelWarn
	if a.waitingForDB.Load() {
		lvl = slog.LevelDebug
	}
	a.log.Log(context.Background(), lvl, "database driver: "+strings.TrimSpace(fmt.Sprint(v...)))
}

func (a *app) jsonOutput() bool { return a.output == "json" }

// openStore opens the store named by --db. The error names the URL without
// its password and, for an unknown scheme, lists the known ones.
func (a *app) openStore(ctx context.Context) (contract.Store, error) {
	return openStoreURL(ctx, a.dbURL)
}

func openStoreURL(ctx context.Context, rawURL string) (contract.Store, error) {
	if strings.TrimSpace(rawURL) == "" {
		return nil, usagef("--db is empty; set it (or BACKLOG_DB) to a store URL such as %s", defaultDB)
	}
	if _, err := url.Parse(rawURL); err != nil {
		// url.Error repeats the whole URL, password included: don't pass it on.
		return nil, fmt.Errorf("open store %s: malformed URL (want e.g. %s)", redactURL(rawURL), defaultDB)
	}
	st, err := store.Open(ctx, rawURL)
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w", redactURL(rawURL), err)
	}
	if st == nil {
		return nil, fmt.Errorf("open store %s: the store adapter returned no store", redactURL(rawURL))
	}
	return st, nil
}

// withReadStore is withStore for commands that only read: the store is
// opened without migrating its schema, and a SQLite file that does not
// exist is an error instead of a new, empty database.
func (a *app) withReadStore(ctx context.Context, fn func(contract.Store) error) error {
	st, err := openStoreURL(ctx, readOnlyURL(a.dbURL))
	if errors.Is(err, core.ErrNotFound) {
		return fmt.Errorf("no database at %s: the file does not exist (backlog migrate creates it)", redactURL(a.dbURL))
	}
	if err != nil {
		return err
	}
	defer st.Close()
	if err := fn(st); err != nil && schemaMismatch(err) {
		// Read commands do not migrate: a schema older than this binary
		// fails its reads.
		return fmt.Errorf("%w (if the database's schema predates this backlog, run backlog migrate)", err)
	} else if err != nil {
		return err
	}
	return nil
}

// schemaMismatch reports whether err is a database's answer that a table,
// column or function does not exist: what reading a schema older than
// this binary fails with (PostgreSQL SQLSTATE 42P01, 42703, 42883; MySQL
// and MariaDB 1146, 1054; SQLite "no such table/column"). A connection
// refused or a server shutting down is not one.
func schemaMismatch(err error) bool {
	if errors.Is(err, core.ErrNotFound) || errors.Is(err, core.ErrInvalidState) {
		return false
	}
	if pe := (*pgconn.PgError)(nil); errors.As(err, &pe) {
		return pe.Code == "42P01" || pe.Code == "42703" || pe.Code == "42883"
	}
	if me := (*mysqldriver.MySQLError)(nil); errors.As(err, &me) {
		return me.Number == 1146 || me.Number == 1054
	}
	msg := err.Error()
	return strings.Contains(msg, "no such table") || strings.Contains(msg, "no such column")
}

// readOnlyURL adds migrate=false (and, for SQLite, create=false) to a
// store URL of a SQL store, unless the URL sets them.
func readOnlyURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return raw // openStoreURL reports it
	}
	q := u.Query()
	switch strings.ToLower(u.Scheme) {
	case "sqlite":
		if u.Opaque == ":memory:" {
			return raw
		}
		if !q.Has("create") {
			q.Set("create", "false")
		}
		fallthrough
	case "postgres", "postgresql", "mysql":
		if !q.Has("migrate") {
			q.Set("migrate", "false")
		}
	default:
		return raw
	}
	u.RawQuery = q.Encode()
	return u.String()
}

// withStore opens the store, runs fn, and closes the store.
func (a *app) withStore(ctx context.Context, fn func(contract.Store) error) error {
	st, err := a.openStore(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	return fn(st)
}

// migrate runs the store's migrations when it has any. It reports whether
// the store has a schema to migrate.
func migrate(ctx context.Context, st contract.Store) (bool, error) {
	m, ok := st.(contract.Migrator)
	if !ok {
		return false, nil
	}
	if err := m.Migrate(ctx); err != nil {
		return true, fmt.Errorf("migrate: %w", err)
	}
	return true, nil
}

// redactURL is store.RedactURL: u without its passwords, for printing.
func redactURL(u string) string { return store.RedactURL(u) }

// noArgs rejects positional arguments as a usage error.
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return unknownCommand(cmd, args[0])
	}
	return nil
}

// unknownCommand is the usage error of a word that names no subcommand of
// cmd, with cobra's "Did you mean this?" suggestions (names within two
// edits, or starting with the word) when there are any.
func unknownCommand(cmd *cobra.Command, word string) error {
	msg := fmt.Sprintf("unknown command %q for %q", word, cmd.CommandPath())
	if cmd.SuggestionsMinimumDistance <= 0 {
		cmd.SuggestionsMinimumDistance = 2 // cobra's default, which it sets only on its own path
	}
	if s := cmd.SuggestionsFor(word); len(s) > 0 {
		msg += "\n\nDid you mean this?\n  " + strings.Join(s, "\n  ")
	}
	return usageError{errors.New(msg)}
}

// helpOrUnknown is the RunE of commands that only group subcommands.
func helpOrUnknown(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return unknownCommand(cmd, args[0])
	}
	return cmd.Help()
}

// argsExactly, argsAtLeast and argsRange are cobra argument validators
// whose failures are usage errors.
func argsExactly(n int) cobra.PositionalArgs { return usageArgs(cobra.ExactArgs(n)) }
func argsAtLeast(n int) cobra.PositionalArgs { return usageArgs(cobra.MinimumNArgs(n)) }
func argsRange(lo, hi int) cobra.PositionalArgs {
	return usageArgs(cobra.RangeArgs(lo, hi))
}

func usageArgs(v cobra.PositionalArgs) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if err := v(cmd, args); err != nil {
			return usageError{fmt.Errorf("%s: %w", cmd.CommandPath(), err)}
		}
		return nil
	}
}
