// Package postgres is backlog's PostgreSQL store, on github.com/jackc/pgx/v5
// (pgxpool). It implements contract.Store, contract.Migrator, contract.Notifier
// (LISTEN/NOTIFY), contract.TxInserter (pgx.Tx, or *sql.Tx from pgx's stdlib
// driver) and contract.TxCompleter (pgx.Tx, *sql.Tx), and supports both claim
// strategies. docs/postgres.md is the operator's guide.
//
// # Opening
//
//	s, err := postgres.Open(ctx, "postgres://app@db:5432/app?sslmode=disable",
//		postgres.WithSchema("backlog"))
//
// Open creates its own pgxpool.Pool from the connection string (everything
// pgx accepts, minus the backlog parameters listed below); New wraps a
// caller-owned pool. Both migrate the schema (embedded pressly/goose
// migrations, serialised across processes by a PostgreSQL advisory lock)
// unless WithMigrate(false) is given.
//
// # Hot paths
//
// Every hot call is one statement, one round trip, in autocommit:
//
//   - Claim (skip-locked): a CTE selects due ids in priority, run_at, id
//     order with LIMIT n FOR UPDATE SKIP LOCKED and updates them to running
//     with RETURNING. Claim (optimistic): a lock-free read of (id, version)
//     candidates, then one compare-and-set UPDATE … FROM unnest(…).
//   - Finish: UPDATE … FROM unnest(arrays) fenced by worker id and attempt,
//     plus a DELETE … USING unnest(…) for completions with Delete, in one
//     statement.
//   - Insert: INSERT … SELECT FROM unnest(arrays) ON CONFLICT DO NOTHING
//     RETURNING, with the pg_notify of the inserted queues in the same
//     statement. Batches with unique keys run in a transaction, so a key
//     held by a live job is read back as the duplicate result. Key-less
//     batches of 256 jobs or more use COPY in one transaction instead
//     (reserve ids, copy, notify, commit).
//
// Transient errors (serialization failure 40001, deadlock 40P01, lock not
// available 55P03, a connection lost before the statement was sent) are
// retried inside the store with jittered backoff.
//
// # URLs
//
// The package registers the schemes "postgres" and "postgresql" with the
// store registry, and Open reads the same URLs the same way (options
// passed to Open win over the URL's parameters). The backlog parameters
// are removed from the URL before it reaches pgx:
//
//	schema=backlog        schema holding the tables (lower-case identifier)
//	strategy=skip-locked  claim strategy: skip-locked (default) or optimistic
//	notify=false          poll-only mode: no LISTEN/NOTIFY
//	pooler=transaction    behind a transaction pooler such as PgBouncer's
//	                      pool_mode=transaction (WithPooler)
//	listen_host=db:5432   LISTEN on a direct connection to these hosts,
//	                      same user, database and parameters
//	                      (WithListenConnString)
//	migrate=false         do not migrate on open
//	vacuum=false          leave the jobs table to autovacuum alone
//	                      (WithVacuumThreshold(-1, 0))
//
// for example
// "postgres://root@127.0.0.1:5432/test?sslmode=disable&schema=app_jobs&notify=false",
// or through PgBouncer
// "postgres://app@pgbouncer:6432/app?pooler=transaction&listen_host=db:5432".
// Several hosts ("postgres://app@db1:5432,db2:5432/app?target_session_attrs=read-write")
// are pgx's: a new connection tries them in order and keeps the first that
// accepts writes, so the store follows a failover by itself
// (docs/scaling.md).
//
// # Schema
//
// Tables <schema>.jobs, <schema>.queues, <schema>.workers and
// <schema>.settings, plus goose's
// <schema>.goose_db_version. Times are timestamptz (returned in UTC,
// microsecond precision); args, tags, metadata and the errors history are
// jsonb, so args come back normalised (key order, whitespace) but with the
// same meaning.
package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/backlogq/backlog/core/contract"
	"github.com/backlogq/backlog/store/internal/sqlq"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// DefaultSchema is the schema used unless WithSchema says otherwise.
const DefaultSchema = "backlog"

type config struct {
	schema   string
	strategy contract.ClaimStrategy
	notify   bool
	migrate  bool
	maxConns int32
	pooler   Pooler
	listen   string // WithListenConnString; "" = the pool's own

	vacuumMinDead int64   // WithVacuumThreshold; negative: off
	vacuumScale   float64 // WithVacuumThreshold
}

// Option configures Open and New.
type Option func(*config)

// WithSchema sets the schema holding backlog's tables (default "backlog").
// It must be 1..48 bytes of lower-case ASCII letters, digits and '_', not
// starting with a digit. The schema is created on migration if missing.
func WithSchema(schema string) Option { return func(c *config) { c.schema = schema } }

// WithStrategy selects the claim strategy: contract.StrategySkipLocked (the
// default) or contract.StrategyOptimistic. Anything else makes Open and New fail
// with an error wrapping core.ErrUnsupported.
func WithStrategy(s contract.ClaimStrategy) Option { return func(c *config) { c.strategy = s } }

// WithNotify turns LISTEN/NOTIFY on (the default) or off. Off is poll-only
// mode: inserts, pauses and cancels send no notifications and Listen
// returns an error wrapping core.ErrUnsupported, on which the engine stops
// listening and wakes on its poll interval. (Behind a transaction pooler,
// WithPooler and WithListenConnString keep notifications working.)
func WithNotify(on bool) Option { return func(c *config) { c.notify = on } }

// Pooler names what sits between the store and PostgreSQL.
type Pooler string

const (
	// PoolerNone is a direct connection, or a pooler that keeps a server
	// session per client (PgBouncer's pool_mode=session): the default.
	PoolerNone Pooler = "none"
	// PoolerTransaction is a transaction pooler (PgBouncer's
	// pool_mode=transaction, Odyssey, PgCat, Supavisor…): each transaction
	// may run on another server session, so nothing that lives in a
	// session survives it.
	PoolerTransaction Pooler = "transaction"
)

// WithPooler says what sits between the store and PostgreSQL (default
// PoolerNone). Behind PoolerTransaction the store keeps nothing in a
// server session:
//
//   - Open runs statements in pgx's exec mode (unnamed prepared
//     statements, one round trip), unless the connection string sets
//     default_query_exec_mode; New refuses a pool whose mode caches
//     prepared statements (pgx's default), since their names collide on
//     the pooler's shared sessions ("prepared statement … already exists",
//     42P05);
//   - Listen needs a direct connection (WithListenConnString): a LISTEN
//     through the pooler would silently hear nothing, so without one
//     Listen returns an error wrapping core.ErrUnsupported and the engine
//     logs that it wakes on its poll interval instead.
//
// Migrations are serialised by a transaction-scoped advisory lock in every
// mode, so they need nothing more behind a pooler.
func WithPooler(p Pooler) Option { return func(c *config) { c.pooler = p } }

// WithListenConnString gives Listen its own connection string (pgx URL or
// key=value), for notifications over a direct connection to PostgreSQL
// when the pool goes through a transaction pooler (River keeps a separate
// listener connection for the same reason). "" (the default) listens
// through the pool's connection settings.
func WithListenConnString(connString string) Option {
	return func(c *config) { c.listen = connString }
}

// WithMigrate says whether Open and New migrate the schema (default true).
func WithMigrate(migrate bool) Option { return func(c *config) { c.migrate = migrate } }

// WithMaxConns sets the pool size of Open (default: pgx's, max(4,
// GOMAXPROCS), unless the connection string sets pool_max_conns). New
// ignores it: the caller owns that pool.
func WithMaxConns(n int32) Option { return func(c *config) { c.maxConns = n } }

// Store is the PostgreSQL store. All methods are safe for concurrent use by
// many goroutines and processes.
type Store struct {
	*sqlq.Store
	pool    *pgxpool.Pool
	owned   bool
	schema  string
	tables  sqlq.Tables
	channel string
	notify  bool
	pooler  Pooler
	listen  *pgx.ConnConfig // nil: the pool's connection settings
	closed  atomic.Bool
	done    chan struct{} // closed by Close
	q       queries
	db      *poolDB
	retrier sqlq.Retrier

	vacuumMinDead int64
	vacuumScale   float64
	vac           vacuumer
}

// planEachCall returns args led by pgx.QueryExecModeCacheDescribe when
// the pool caches prepared statements (pgx's default), so the statement
// is planned for each call with its actual arguments, and args as they
// are otherwise (a pool in exec, describe or simple-protocol mode plans
// each call already). It serves the statements that update jobs by id
// (finish, optimistic claim, lease renewal): a prepared statement's
// generic plan, settled on while the jobs table had a few pages, scans
// the whole table and stays cached on its connection while the table
// grows (TestPlansCachedWhileSmall, docs/postgres.md "The claim plan").
// Planning them costs a fraction of a millisecond a call.
func (s *Store) planEachCall(args ...any) []any {
	if s.pool.Config().ConnConfig.DefaultQueryExecMode != pgx.QueryExecModeCacheStatement {
		return args
	}
	return append([]any{pgx.QueryExecModeCacheDescribe}, args...)
}

var (
	_ contract.Store           = (*Store)(nil)
	_ contract.Migrator        = (*Store)(nil)
	_ contract.Notifier        = (*Store)(nil)
	_ contract.TxInserter      = (*Store)(nil)
	_ contract.TxCompleter     = (*Store)(nil)
	_ contract.TxRunner        = (*Store)(nil)
	_ contract.Settings        = (*Store)(nil)
	_ contract.QueueLimiter    = (*Store)(nil)
	_ contract.MutableSettings = (*Store)(nil)
	_ contract.Vacuumer        = (*Store)(nil)
	// The shared SQL of store/internal/sqlq, promoted from the embedded
	// *sqlq.Store: the queue history (<prefix>queue_history and
	// <prefix>queue_totals), re-sealing stored values after a key
	// rotation (fenced by the version column), and listing and
	// releasing unique-key holds.
	_ contract.QueueHistory     = (*Store)(nil)
	_ contract.SealedRewriter   = (*Store)(nil)
	_ contract.UniqueHolder     = (*Store)(nil)
	_ contract.ProgressRecorder = (*Store)(nil)
	_ contract.Archiver         = (*Store)(nil)
	// Jobs that wait for other jobs (deps.go, and the settle triggers
	// of schema version 17).
	_ contract.Dependencies = (*Store)(nil)
)

func newConfig(opts []Option) (config, error) {
	c := config{schema: DefaultSchema, strategy: contract.StrategySkipLocked, notify: true, migrate: true,
		vacuumMinDead: DefaultVacuumMinDeadRows, vacuumScale: DefaultVacuumScaleFactor}
	for _, o := range opts {
		o(&c)
	}
	if err := validSchema(c.schema); err != nil {
		return c, err
	}
	switch c.pooler {
	case "":
		c.pooler = PoolerNone
	case PoolerNone, PoolerTransaction:
	default:
		return c, fmt.Errorf("postgres: unknown pooler %q (want %q or %q)", c.pooler, PoolerNone, PoolerTransaction)
	}
	switch c.strategy {
	case "":
		c.strategy = contract.StrategySkipLocked
	case contract.StrategySkipLocked, contract.StrategyOptimistic:
	default:
		return c, fmt.Errorf("postgres: unknown claim strategy %q (want %q or %q): %w", c.strategy, contract.StrategySkipLocked, contract.StrategyOptimistic, contract.ErrUnsupported)
	}
	return c, nil
}

// validSchema accepts 1..48 bytes of lower-case ASCII letters, digits and
// '_' not starting with a digit: the name is pasted into SQL unquoted.
func validSchema(s string) error {
	if s == "" || len(s) > 48 {
		return fmt.Errorf("postgres: schema name %q must be 1..48 bytes", s)
	}
	for i, r := range s {
		if !(r == '_' || r >= 'a' && r <= 'z' || i > 0 && r >= '0' && r <= '9') {
			return fmt.Errorf("postgres: schema name %q may hold only lower-case ASCII letters, digits and '_', and must not start with a digit", s)
		}
	}
	return nil
}

// Open connects to the database named by connString (a pgx connection
// string: URL or key=value), migrates unless WithMigrate(false), and
// returns a store that owns its pool. A "postgres://" or "postgresql://"
// URL means what it means to store.Open and the CLI's --db: backlog's own
// parameters in it (schema, strategy, notify, migrate, vacuum, pooler,
// listen_host; see ParseURL) become options and are removed before pgx
// sees the URL, and opts passed here win over them. A key=value string is
// pgx's alone. Errors: a malformed URL or parameter (see ParseURL), an
// invalid option, and pgx's and the migration's errors, all prefixed
// "postgres:".
func Open(ctx context.Context, connString string, opts ...Option) (*Store, error) {
	connString, opts, err := withURLOptions(connString, opts)
	if err != nil {
		return nil, err
	}
	c, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	pc, err := pgxpool.ParseConfig(connString)
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	if c.maxConns > 0 {
		pc.MaxConns = c.maxConns
	}
	if c.pooler == PoolerTransaction && !setsExecMode(connString) {
		pc.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeExec
	}
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	s, err := newStore(ctx, pool, true, c)
	if err != nil {
		pool.Close()
		return nil, err
	}
	return s, nil
}

// New returns a store on a caller-owned pool, migrating unless
// WithMigrate(false). Close does not close pool.
func New(ctx context.Context, pool *pgxpool.Pool, opts ...Option) (*Store, error) {
	if pool == nil {
		return nil, errors.New("postgres: New: nil pool")
	}
	c, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	return newStore(ctx, pool, false, c)
}

func newStore(ctx context.Context, pool *pgxpool.Pool, owned bool, c config) (*Store, error) {
	if c.pooler == PoolerTransaction && pool.Config().ConnConfig.DefaultQueryExecMode == pgx.QueryExecModeCacheStatement {
		return nil, fmt.Errorf("postgres: behind a transaction pooler the pool must not cache prepared statements: set default_query_exec_mode=exec (or simple_protocol) in its connection string: %w", contract.ErrUnsupported)
	}
	s := &Store{pool: pool, owned: owned, schema: c.schema, notify: c.notify, pooler: c.pooler, done: make(chan struct{}),
		vacuumMinDead: c.vacuumMinDead, vacuumScale: c.vacuumScale}
	if c.listen != "" {
		lc, err := pgx.ParseConfig(c.listen)
		if err != nil {
			return nil, fmt.Errorf("postgres: listen connection string: %w", err)
		}
		s.listen = lc
	}
	s.tables = sqlq.Tables{Jobs: c.schema + ".jobs", Queues: c.schema + ".queues", Workers: c.schema + ".workers", Settings: c.schema + ".settings", Holds: c.schema + ".unique_keys", Rates: c.schema + ".queue_rates", Archive: c.schema + ".jobs_archive", Deps: c.schema + ".job_deps"}
	s.channel = "backlog_" + c.schema
	s.db = &poolDB{pool: pool, closed: &s.closed}
	s.retrier = sqlq.Retrier{Transient: transient, Closed: &s.closed}
	inner, err := sqlq.New(sqlq.Config{
		Dialect:  dialect{},
		DB:       s.db,
		Tables:   s.tables,
		Strategy: c.strategy,
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	s.Store = inner
	s.q = buildQueries(s.schema, s.tables)
	if c.migrate {
		if err := s.Migrate(ctx); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// withURLOptions returns connString without backlog's parameters and
// opts led by the options those parameters name, when connString is a
// "postgres://" or "postgresql://" URL that names any (so that opts,
// applied later, win); connString and opts as they are otherwise, for
// pgx to read as it does (it takes URL forms Go's URL parser refuses,
// such as a host list whose last host has no port).
func withURLOptions(connString string, opts []Option) (string, []Option, error) {
	if !isURL(connString) || !namesParam(connString) {
		return connString, opts, nil
	}
	clean, urlOpts, err := ParseURL(connString)
	if err != nil {
		return "", nil, err
	}
	return clean, append(urlOpts, opts...), nil
}

// isURL reports whether connString is a PostgreSQL URL rather than a
// key=value string (pgx's own test).
func isURL(connString string) bool {
	s := strings.ToLower(connString)
	return strings.HasPrefix(s, "postgres://") || strings.HasPrefix(s, "postgresql://")
}

// setsExecMode reports whether a pgx connection string names
// default_query_exec_mode (URL parameter or key=value).
func setsExecMode(connString string) bool {
	return strings.Contains(connString, "default_query_exec_mode")
}

// Pooler returns what the store was told sits between it and PostgreSQL.
func (s *Store) Pooler() Pooler { return s.pooler }

// Pool returns the underlying pool, for transactions passed to InsertTx and
// CompleteTx.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// Schema returns the schema holding the store's tables.
func (s *Store) Schema() string { return s.schema }

// Channel returns the LISTEN/NOTIFY channel of the store's schema.
func (s *Store) Channel() string { return s.channel }

// Close closes the pool if Open created it. Later calls fail with errors
// wrapping core.ErrClosed; open Listen channels close.
func (s *Store) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	close(s.done)
	if s.owned {
		s.pool.Close()
	}
	return nil
}

// retry runs fn with the store's Retrier: the errors transient reports are
// retried (2 ms doubling to 500 ms, with jitter, 12 times).
func (s *Store) retry(ctx context.Context, fn func() error) error {
	return s.retrier.Do(ctx, fn)
}

// inTx runs fn in a transaction, retrying transient errors.
func (s *Store) inTx(ctx context.Context, fn func(tx pgx.Tx) error) error {
	return s.retry(ctx, func() error { return pgx.BeginFunc(ctx, s.pool, fn) })
}
