// Package mysql is backlog's MySQL and MariaDB store, on
// github.com/go-sql-driver/mysql, for MariaDB 10.6+ and MySQL 8.0.1+ (the
// optimistic claim strategy also runs on older servers and on Galera or
// Group Replication clusters). Its tests run on MariaDB 10.11 (alone and
// in a Galera cluster); MySQL 8 has not been run (docs/mysql.md). It implements contract.Store, contract.Migrator,
// contract.TxInserter and contract.TxCompleter (with *sql.Tx or *sqlx.Tx),
// contract.Settings, contract.Dependencies (jobs that wait for other jobs,
// settled by the store's own statements: see deps.go), and
// contract.Notifier by polling (see Listen: MySQL has no LISTEN/NOTIFY).
// docs/mysql.md is the operator's guide.
//
// # Opening
//
//	s, err := mysql.Open(ctx, "app:secret@tcp(db:3306)/app", mysql.WithPrefix("jobs_"))
//
// Open takes a go-sql-driver DSN and sets what the store needs on top of
// it: parseTime=true, loc=UTC, timeTruncate=1µs, interpolateParams=true,
// the session time zone '+00:00' and READ COMMITTED isolation (which keeps
// SKIP LOCKED claims free of gap locks). New wraps a caller-owned *sql.DB
// instead; its DSN must use loc=UTC (or parseTime=false), and the store
// then begins its transactions at READ COMMITTED explicitly. Both read the
// server version first and refuse contract.StrategySkipLocked on a server
// without SKIP LOCKED (MySQL < 8.0.1, MariaDB < 10.6) with an error
// wrapping core.ErrUnsupported; both migrate the schema (embedded
// pressly/goose migrations, serialised across processes with GET_LOCK)
// unless WithMigrate(false).
//
// # URLs
//
// The package registers the scheme "mysql" with the store registry:
//
//	mysql://user:password@host:3306/dbname?prefix=backlog_&strategy=skip-locked
//
// Open takes the same URLs
// (and a DSN with backlog's parameters), with the same meaning; options
// passed to Open win over the URL's parameters. Backlog's parameters
// (prefix, strategy, migrate, max_conns, notify_interval) are removed;
// every other parameter is passed to the driver (tls, timeout, …). A
// missing port means 3306; "mysql://user@unix(/run/mysqld/mysqld.sock)/db"
// is not a URL, use Open with a DSN for sockets. Several hosts,
// "mysql://user@h1:3306,h2:3306/dbname", open a store that connects to the
// first that answers and follows the live ones (WithHosts).
//
// # Galera
//
// Open and New detect a Galera node (Store.Galera, Store.Topology). Claims
// stay exclusive across nodes with either strategy (a lost race is a
// certification conflict, retried), and a limited claim writes its
// queue's record so that concurrency limits hold across the cluster.
//
// # Schema
//
// Tables <prefix>jobs, <prefix>queues, <prefix>workers, <prefix>settings,
// <prefix>notifications, <prefix>unique_keys (default prefix "backlog_")
// in utf8mb4_bin, so names compare byte for byte (the scoped keys of
// unique_keys are VARBINARY: no trailing-space padding either). Times are
// DATETIME(6) holding UTC; args, tags, metadata and the errors history are
// JSON columns (on MariaDB LONGTEXT with a JSON_VALID check; on MySQL the
// binary JSON type, so args come back normalised but with the same
// meaning). A stored generated column stands in for the partial index
// MySQL lacks: pending (1 for scheduled, available and retryable jobs),
// leading the claim index (queue, pending, priority, run_at, id). Unique
// keys are held in unique_keys, under its primary key (sqlq.InsertKeyed).
//
// # Errors
//
// Deadlocks (1213, also Galera certification conflicts), lock wait
// timeouts (1205), MariaDB's 1020 and a Galera node's "not ready" (1047)
// are retried inside the store with jittered backoff (2 ms doubling to
// 500 ms, 12 retries); an error that reaches the caller means the call
// took no effect. A connection lost mid-statement is reported, not
// retried: the statement may have committed.
//
// # Notifications
//
// Listen polls, on a connection of its own, every WithNotifyInterval
// (default 10 ms) while anyone listens: one primary-key range read of the
// jobs inserted since the last read (inserts write nothing extra) and of the
// notifications table, where PauseQueue, ResumeQueue, Cancel and Retry write
// a row in their own transaction. Idle, the read finds nothing.
// WithNotifyInterval(0) turns notifications off: Listen then returns an
// error wrapping core.ErrUnsupported and the engine polls.
package mysql

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/backlogq/backlog/core/contract"

	"github.com/go-sql-driver/mysql"

	"github.com/backlogq/backlog/store/internal/sqlq"
)

// DefaultPrefix is the table prefix used unless WithPrefix says otherwise.
const DefaultPrefix = "backlog_"

type config struct {
	prefix      string
	strategy    contract.ClaimStrategy
	migrate     bool
	maxConns    int
	notifyEvery time.Duration
	hosts       []string // WithHosts: several servers, tried in turn (failover.go)
	noReturning bool     // tests: MySQL's statement forms on MariaDB
}

// Option configures Open and New.
type Option func(*config)

// WithPrefix sets the table prefix (default "backlog_"; "" allowed): at
// most 48 bytes of ASCII letters, digits and '_', not starting with a digit.
func WithPrefix(prefix string) Option { return func(c *config) { c.prefix = prefix } }

// WithStrategy selects the claim strategy: contract.StrategySkipLocked (the
// default) or contract.StrategyOptimistic (for Galera and Group Replication
// clusters, and servers without SKIP LOCKED). SKIP LOCKED on a server
// without it, or an unknown strategy, makes Open and New fail with an error
// wrapping core.ErrUnsupported.
func WithStrategy(s contract.ClaimStrategy) Option { return func(c *config) { c.strategy = s } }

// WithMigrate says whether Open and New migrate the schema (default true).
func WithMigrate(migrate bool) Option { return func(c *config) { c.migrate = migrate } }

// WithMaxOpenConns bounds the connection pool of Open (default
// max(8, 4×GOMAXPROCS)). New ignores it: the caller owns that pool.
func WithMaxOpenConns(n int) Option { return func(c *config) { c.maxConns = n } }

// WithNotifyInterval sets how often Listen's poller reads new jobs and
// notifications while anyone listens (default DefaultNotifyInterval,
// 10 ms): the wake-up latency across processes is about half of it plus a
// claim. 0 turns notifications off: Listen returns an error wrapping
// core.ErrUnsupported, and the engine relies on its poll interval. The
// store writes its notification rows either way, for other processes'
// listeners.
func WithNotifyInterval(d time.Duration) Option { return func(c *config) { c.notifyEvery = d } }

// Store is the MySQL/MariaDB store. All methods are safe for concurrent use
// by many goroutines and processes.
type Store struct {
	*sqlq.Store
	db       *sql.DB
	owned    bool
	prefix   string
	t        sqlq.Tables
	d        dialect
	server   serverInfo
	strategy contract.ClaimStrategy
	sdb      *sqlq.GuardedDB
	q        queries // the hot statements (queries.go)
	closed   atomic.Bool
	retries  atomic.Int64 // transient errors retried by this package's methods
	retrier  sqlq.Retrier

	notifyEvery time.Duration
	connector   driver.Connector // Open's, for the poller's own connection; nil with New
	hub         hub
	prunedAt    atomic.Int64 // callers' time of the last prune of notifications, µs
	// notesWritten is set when a settle wrote notification rows (deps.go),
	// so that Finish prunes the table as the calls that write it do.
	notesWritten atomic.Bool
}

var (
	_ contract.Store           = (*Store)(nil)
	_ contract.Migrator        = (*Store)(nil)
	_ contract.TxInserter      = (*Store)(nil)
	_ contract.TxCompleter     = (*Store)(nil)
	_ contract.TxRunner        = (*Store)(nil)
	_ contract.Settings        = (*Store)(nil)
	_ contract.QueueLimiter    = (*Store)(nil)
	_ contract.MutableSettings = (*Store)(nil)
	_ contract.Notifier        = (*Store)(nil)
	_ contract.Dependencies    = (*Store)(nil)
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
)

func newConfig(opts []Option) (config, error) {
	c := config{prefix: DefaultPrefix, strategy: contract.StrategySkipLocked, migrate: true, notifyEvery: DefaultNotifyInterval}
	for _, o := range opts {
		o(&c)
	}
	if err := sqlq.ValidPrefix(c.prefix); err != nil {
		return c, fmt.Errorf("mysql: %w", err)
	}
	if c.notifyEvery < 0 {
		return c, fmt.Errorf("mysql: negative notify interval %s", c.notifyEvery)
	}
	if c.hosts != nil {
		if err := checkHosts(c.hosts); err != nil {
			return c, err
		}
	}
	switch c.strategy {
	case "":
		c.strategy = contract.StrategySkipLocked
	case contract.StrategySkipLocked, contract.StrategyOptimistic:
	default:
		return c, fmt.Errorf("mysql: unknown claim strategy %q (want %q or %q): %w", c.strategy, contract.StrategySkipLocked, contract.StrategyOptimistic, contract.ErrUnsupported)
	}
	return c, nil
}

// DriverConfig returns the go-sql-driver configuration Open uses for dsn:
// the DSN's own settings plus parseTime=true, loc=UTC, timeTruncate=1µs,
// interpolateParams=true, multiStatements off and the session time zone
// '+00:00'. Open adds the READ COMMITTED isolation variable once it knows
// the server.
func DriverConfig(dsn string) (*mysql.Config, error) {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, fmt.Errorf("mysql: malformed DSN: %w", err)
	}
	cfg.ParseTime = true
	cfg.Loc = time.UTC
	if err := cfg.Apply(mysql.TimeTruncate(time.Microsecond)); err != nil {
		return nil, fmt.Errorf("mysql: %w", err)
	}
	cfg.InterpolateParams = true
	cfg.MultiStatements = false
	if cfg.Params == nil {
		cfg.Params = map[string]string{}
	}
	cfg.Params["time_zone"] = "'+00:00'"
	return cfg, nil
}

// Open connects to the database named by dsn, checks the server, migrates
// unless WithMigrate(false), and returns a store that owns its pool. dsn
// is a go-sql-driver DSN such as "user:pass@tcp(host:3306)/db", or a
// "mysql://user:pass@host:3306/db" URL, which means what it means to
// store.Open and the CLI's --db (see ParseURL). Backlog's parameters
// (prefix, strategy, migrate, max_conns, notify_interval) are read from
// either form and removed before the driver sees it; options passed to
// Open win over them. With WithHosts, or several hosts in the URL, it
// connects to the first of several servers that answers instead of the
// DSN's address (see WithHosts). Errors: a malformed DSN, URL or
// parameter, an invalid option, the server's and the migration's errors,
// all prefixed "mysql:".
func Open(ctx context.Context, dsn string, opts ...Option) (*Store, error) {
	dsn, opts, err := withConnOptions(dsn, opts)
	if err != nil {
		return nil, err
	}
	c, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	cfg, err := DriverConfig(dsn)
	if err != nil {
		return nil, err
	}
	hosts := c.hosts
	if hosts != nil {
		if err := checkNet(cfg); err != nil {
			return nil, err
		}
	}
	if len(hosts) == 1 {
		cfg, hosts = hostConfig(cfg, hosts[0]), nil
	}
	server, first, err := probeConfig(ctx, cfg, hosts)
	if err != nil {
		return nil, err
	}
	if _, set := cfg.Params["transaction_isolation"]; !set {
		if _, set := cfg.Params["tx_isolation"]; !set {
			cfg.Params[server.isolationVar()] = "'READ-COMMITTED'"
		}
	}
	conn, err := newConnector(cfg, hosts, first)
	if err != nil {
		return nil, err
	}
	db := sql.OpenDB(conn)
	n := c.maxConns
	if n <= 0 {
		n = max(8, 4*runtime.GOMAXPROCS(0))
	}
	db.SetMaxOpenConns(n)
	db.SetMaxIdleConns(n)
	db.SetConnMaxIdleTime(5 * time.Minute)
	s, err := newStore(ctx, db, true, server, nil, c)
	if err != nil {
		db.Close()
		return nil, err
	}
	s.connector = conn
	return s, nil
}

// probeConfig reads what probe reads on one short-lived connection to
// cfg's address, or to the first of hosts that answers, whose index it
// returns (0 with one address).
func probeConfig(ctx context.Context, cfg *mysql.Config, hosts []string) (serverInfo, int, error) {
	conn, err := newConnector(cfg, hosts, 0)
	if err != nil {
		return serverInfo{}, 0, err
	}
	db := sql.OpenDB(conn)
	defer db.Close()
	db.SetMaxOpenConns(1)
	server, err := probe(ctx, db)
	first := 0
	if f, ok := conn.(*failover); ok {
		first = int(f.last.Load())
	}
	return server, first, err
}

// New returns a store on a caller-owned *sql.DB opened with the "mysql"
// driver. Its DSN must use loc=UTC, or parseTime=false (times are then
// decoded by the store); the store begins its own transactions at READ
// COMMITTED. It migrates unless WithMigrate(false). Close does not close db.
func New(ctx context.Context, db *sql.DB, opts ...Option) (*Store, error) {
	if db == nil {
		return nil, errors.New("mysql: New: nil *sql.DB")
	}
	c, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	if c.hosts != nil {
		return nil, errors.New("mysql: New: WithHosts needs Open (a caller's *sql.DB dials for itself)")
	}
	server, err := probe(ctx, db)
	if err != nil {
		return nil, err
	}
	var probeTime any
	if err := db.QueryRowContext(ctx, "SELECT CAST('2000-01-02 03:04:05' AS DATETIME(6))").Scan(&probeTime); err != nil {
		return nil, fmt.Errorf("mysql: New: %w", err)
	}
	if t, ok := probeTime.(time.Time); ok && t.Location() != time.UTC {
		return nil, fmt.Errorf("mysql: New: the *sql.DB decodes DATETIME in %s; its DSN needs loc=UTC (or parseTime=false)", t.Location())
	}
	return newStore(ctx, db, false, server, &sql.TxOptions{Isolation: sql.LevelReadCommitted}, c)
}

func newStore(ctx context.Context, db *sql.DB, owned bool, server serverInfo, txOpts *sql.TxOptions, c config) (*Store, error) {
	if c.strategy == contract.StrategySkipLocked && !server.skipLocked() {
		return nil, fmt.Errorf("mysql: %s (%s) has no FOR UPDATE SKIP LOCKED (it needs MySQL 8.0.1+ or MariaDB 10.6+); use the %q claim strategy: %w",
			server, server.version, contract.StrategyOptimistic, contract.ErrUnsupported)
	}
	s := &Store{db: db, owned: owned, prefix: c.prefix, t: sqlq.PrefixTables(c.prefix), server: server, strategy: c.strategy, notifyEvery: c.notifyEvery}
	s.d = dialect{server: server, noReturning: c.noReturning}
	s.q = buildQueries(s.t)
	s.retrier = sqlq.Retrier{Transient: transient, Closed: &s.closed, Retried: &s.retries}
	s.sdb = &sqlq.GuardedDB{StdDB: sqlq.StdDB{DB: db, TxOptions: txOpts}, Closed: &s.closed}
	inner, err := sqlq.New(sqlq.Config{
		Dialect:  s.d,
		DB:       hookDB{s.sdb}, // PauseQueue, ResumeQueue, Cancel and Retry write their notification in their transaction (notify.go)
		Tables:   s.t,
		Strategy: c.strategy,
		Settle:   s.settle, // no triggers: Cancel, Delete, Rescue and DiscardExpired settle dependants here (deps.go)
		// …and Prune, Delete and PruneArchive delete the deleted jobs'
		// dependency edges (Finish's deletions do in finishDelete)
		DeleteEdges: true,
	})
	if err != nil {
		return nil, fmt.Errorf("mysql: %w", err)
	}
	s.Store = inner
	if c.migrate {
		if err := s.Migrate(ctx); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// DB returns the underlying *sql.DB, for transactions passed to InsertTx
// and CompleteTx.
func (s *Store) DB() *sql.DB { return s.db }

// Prefix returns the table prefix.
func (s *Store) Prefix() string { return s.prefix }

// Strategy returns the claim strategy in use.
func (s *Store) Strategy() contract.ClaimStrategy { return s.strategy }

// ServerVersion returns the server's VERSION() text, e.g.
// "10.11.19-MariaDB-0+deb12u1".
func (s *Store) ServerVersion() string { return s.server.version }

// Close closes every Listen channel and the pool if Open created it. Later
// calls return errors wrapping core.ErrClosed.
func (s *Store) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	s.hub.closeAll()
	if s.owned {
		return s.db.Close()
	}
	return nil
}

// retry runs fn with the store's Retrier: deadlocks, lock wait timeouts
// and the other errors transient reports are retried (2 ms doubling to
// 500 ms, with jitter, 12 times), and every retry is counted in retries.
func (s *Store) retry(ctx context.Context, fn func() error) error {
	return s.retrier.Do(ctx, fn)
}

// inTx runs fn in one transaction, retrying transient errors.
func (s *Store) inTx(ctx context.Context, fn func(sqlq.Conn) error) error {
	return s.retry(ctx, func() error { return s.sdb.InTx(ctx, fn) })
}

// txConn accepts the transaction types InsertTx and CompleteTx support.
func txConn(tx any) (sqlq.Conn, error) { return sqlq.TxConn("mysql", tx) }

// InsertTx inserts jobs inside the caller's transaction (*sql.Tx or
// *sqlx.Tx on this database); they become visible when it commits and
// vanish on rollback. Other transaction types return an error wrapping
// core.ErrUnsupported. Semantics otherwise match Insert; transient errors
// are not retried (the caller owns the transaction).
func (s *Store) InsertTx(ctx context.Context, tx any, now time.Time, jobs []contract.InsertParams) ([]contract.InsertResult, error) {
	c, err := txConn(tx)
	if err != nil {
		return nil, err
	}
	if s.closed.Load() {
		return nil, contract.ErrClosed
	}
	return s.InsertOn(ctx, c, now, jobs)
}

// CompleteTx applies one fenced outcome inside the caller's transaction
// (*sql.Tx or *sqlx.Tx). It returns an error wrapping core.ErrLeaseLost
// when the fence fails, and core.ErrUnsupported for other transaction
// types.
func (s *Store) CompleteTx(ctx context.Context, tx any, o contract.Outcome) error {
	c, err := txConn(tx)
	if err != nil {
		return err
	}
	if s.closed.Load() {
		return contract.ErrClosed
	}
	res, err := s.FinishOn(ctx, c, []contract.Outcome{o})
	if err != nil {
		return err
	}
	if !res[0].Applied {
		return fmt.Errorf("job %d attempt %d worker %s: %w", o.JobID, o.Attempt, o.WorkerID, contract.ErrLeaseLost)
	}
	return nil
}
