// Package postgres is backlog's PostgreSQL store, on github.com/jackc/pgx/v5
// (pgxpool). It implements core.Store, core.Migrator, core.Notifier
// (LISTEN/NOTIFY), core.TxInserter (pgx.Tx, or *sql.Tx from pgx's stdlib
// driver) and core.TxCompleter (pgx.Tx, *sql.Tx), and supports both claim
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
// store registry. The backlog parameters are removed from the URL before it
// reaches pgx:
//
//	schema=backlog        schema holding the tables (lower-case identifier)
//	strategy=skip-locked  claim strategy: skip-locked (default) or optimistic
//	notify=false          poll-only mode: no LISTEN/NOTIFY (PgBouncer
//	                      transaction pooling)
//	migrate=false         do not migrate on open
//
// for example
// "postgres://root@127.0.0.1:5432/test?sslmode=disable&schema=app_jobs&notify=false".
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
	"sync/atomic"

	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/store/internal/sqlq"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// DefaultSchema is the schema used unless WithSchema says otherwise.
const DefaultSchema = "backlog"

type config struct {
	schema   string
	strategy core.ClaimStrategy
	notify   bool
	migrate  bool
	maxConns int32

	vacuumMinDead int64   // WithVacuumThreshold; negative: off
	vacuumScale   float64 // WithVacuumThreshold
}

// Option configures Open and New.
type Option func(*config)

// WithSchema sets the schema holding backlog's tables (default "backlog").
// It must be 1..48 bytes of lower-case ASCII letters, digits and '_', not
// starting with a digit. The schema is created on migration if missing.
func WithSchema(schema string) Option { return func(c *config) { c.schema = schema } }

// WithStrategy selects the claim strategy: core.StrategySkipLocked (the
// default) or core.StrategyOptimistic. Anything else makes Open and New fail
// with an error wrapping core.ErrUnsupported.
func WithStrategy(s core.ClaimStrategy) Option { return func(c *config) { c.strategy = s } }

// WithNotify turns LISTEN/NOTIFY on (the default) or off. Off is poll-only
// mode, for connections through PgBouncer in transaction pooling, which
// cannot hold a LISTEN: inserts, pauses and cancels send no notifications
// and Listen returns an error wrapping core.ErrUnsupported, on which the
// engine stops listening and wakes on its poll interval.
func WithNotify(on bool) Option { return func(c *config) { c.notify = on } }

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
	closed  atomic.Bool
	done    chan struct{} // closed by Close
	q       queries
	db      *poolDB
	retrier sqlq.Retrier

	vacuumMinDead int64
	vacuumScale   float64
	vac           vacuumer
}

var (
	_ core.Store           = (*Store)(nil)
	_ core.Migrator        = (*Store)(nil)
	_ core.Notifier        = (*Store)(nil)
	_ core.TxInserter      = (*Store)(nil)
	_ core.TxCompleter     = (*Store)(nil)
	_ core.Settings        = (*Store)(nil)
	_ core.QueueLimiter    = (*Store)(nil)
	_ core.MutableSettings = (*Store)(nil)
	_ core.Vacuumer        = (*Store)(nil)
)

func newConfig(opts []Option) (config, error) {
	c := config{schema: DefaultSchema, strategy: core.StrategySkipLocked, notify: true, migrate: true,
		vacuumMinDead: DefaultVacuumMinDeadRows, vacuumScale: DefaultVacuumScaleFactor}
	for _, o := range opts {
		o(&c)
	}
	if err := validSchema(c.schema); err != nil {
		return c, err
	}
	switch c.strategy {
	case "":
		c.strategy = core.StrategySkipLocked
	case core.StrategySkipLocked, core.StrategyOptimistic:
	default:
		return c, fmt.Errorf("postgres: unknown claim strategy %q (want %q or %q): %w", c.strategy, core.StrategySkipLocked, core.StrategyOptimistic, core.ErrUnsupported)
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
// string: URL or key=value; backlog's URL parameters are not accepted here,
// use options), migrates unless WithMigrate(false), and returns a store that
// owns its pool.
func Open(ctx context.Context, connString string, opts ...Option) (*Store, error) {
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
	s := &Store{pool: pool, owned: owned, schema: c.schema, notify: c.notify, done: make(chan struct{}),
		vacuumMinDead: c.vacuumMinDead, vacuumScale: c.vacuumScale}
	s.tables = sqlq.Tables{Jobs: c.schema + ".jobs", Queues: c.schema + ".queues", Workers: c.schema + ".workers", Settings: c.schema + ".settings", Holds: c.schema + ".unique_keys", Rates: c.schema + ".queue_rates"}
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
