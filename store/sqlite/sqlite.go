// Package sqlite is backlog's SQLite store, on modernc.org/sqlite (pure Go,
// no cgo). It implements contract.Store, contract.Migrator, contract.TxInserter and
// contract.TxCompleter (with *sql.Tx or *sqlx.Tx), and contract.Notifier by
// watching the file for other connections' commits (PRAGMA data_version,
// see Listen), so a job enqueued by another process starts within
// milliseconds instead of at the next poll.
//
// # Opening
//
//	s, err := sqlite.Open(ctx, "jobs.db", sqlite.WithPrefix("app_"))
//
// Open configures the connection for several writers, including several
// processes sharing one file: WAL journal, BEGIN IMMEDIATE for every write
// transaction (_txlock=immediate), a busy timeout, synchronous=NORMAL and
// foreign keys on. Writers of one process are serialised in Go; writers of
// different processes wait on SQLite's lock, and SQLITE_BUSY that outlasts
// the busy timeout is retried with jittered backoff inside the store.
// ":memory:" opens a private in-memory database on a single connection.
// Open applies the embedded schema migrations (pressly/goose, tracked in
// <prefix>goose_db_version) unless WithMigrate(false) is given; concurrent
// migrations from several processes are serialised by a lock row in
// <prefix>migrate_lock.
//
// New wraps a caller-owned *sql.DB opened with the "sqlite" driver. Its DSN
// should carry the same settings Open uses, at least
// "_txlock=immediate&_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)";
// without _txlock=immediate, write transactions upgrade from read locks and
// fail with SQLITE_BUSY under contention (the store retries those, slowly).
//
// # URLs
//
// The package registers the scheme "sqlite" with the store registry, so
// store.Open (and the CLI's --db) accepts these URLs; Open takes them too,
// with the same meaning, options passed to it winning over the URL's
// parameters:
//
//	sqlite:path/to/file.db          relative path
//	sqlite:///abs/path/file.db      absolute path (also sqlite:/abs/path/file.db)
//	sqlite::memory:                 private in-memory database
//
// with optional query parameters:
//
//	prefix=backlog_       table prefix (ASCII letters, digits, '_')
//	strategy=serialized   claim strategy; the only one SQLite supports
//	migrate=false         do not migrate on open
//	create=false          open an existing file only: a missing one is an error (core.ErrNotFound)
//	busy_timeout=5s       SQLite busy timeout (a Go duration)
//	notify_interval=20ms  how often Listen checks for other writers' commits (0 = no notifications)
//
// for example "sqlite:data/jobs.db?prefix=app_&busy_timeout=10s". Unknown
// parameters are an error, and so are a parameter given twice and a query
// that does not parse ("prefix=app_;migrate=false": parameters are
// separated by '&').
//
// # Schema
//
// Tables <prefix>jobs, <prefix>queues, <prefix>workers, <prefix>settings
// (default prefix "backlog_"), and those later versions added, such as
// <prefix>job_deps (the edges of job dependencies, settled by triggers:
// deps.go). Times are INTEGER unix microseconds in UTC; args, tags,
// metadata and the errors history are JSON text. Claims use the optimistic
// strategy in its single-writer form: candidate read and
// claim in one UPDATE … WHERE id IN (SELECT … LIMIT n) RETURNING statement,
// exclusive because SQLite runs one writer at a time (claim.go).
package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/url"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/backlogq/backlog/core/contract"
	"github.com/backlogq/backlog/store"
	"github.com/backlogq/backlog/store/internal/sqlq"
	"modernc.org/sqlite" // also registers the "sqlite" database/sql driver
	sqlite3 "modernc.org/sqlite/lib"
)

// DefaultPrefix is the table prefix used unless WithPrefix says otherwise.
const DefaultPrefix = "backlog_"

// DefaultBusyTimeout is how long a connection waits on another process's
// write lock before SQLITE_BUSY (which the store then retries).
const DefaultBusyTimeout = 5 * time.Second

type config struct {
	prefix      string
	strategy    contract.ClaimStrategy
	busyTimeout time.Duration
	migrate     bool
	maxConns    int
	notifyEvery time.Duration
}

// Option configures Open and New.
type Option func(*config)

// WithPrefix sets the table prefix (default "backlog_"; "" allowed). It must
// be ASCII letters, digits and '_', not starting with a digit.
func WithPrefix(prefix string) Option { return func(c *config) { c.prefix = prefix } }

// WithStrategy selects the claim strategy. SQLite supports only
// contract.StrategySerialized (the default: SQLite runs one write transaction
// at a time, and a claim reads and updates its jobs in one); any other
// makes Open and New fail with an error wrapping core.ErrUnsupported.
func WithStrategy(s contract.ClaimStrategy) Option { return func(c *config) { c.strategy = s } }

// WithBusyTimeout sets SQLite's busy timeout (Open only; default 5s,
// millisecond resolution).
func WithBusyTimeout(d time.Duration) Option { return func(c *config) { c.busyTimeout = d } }

// WithMigrate says whether Open and New migrate the schema (default true).
func WithMigrate(migrate bool) Option { return func(c *config) { c.migrate = migrate } }

// WithNotifyInterval sets how often Listen checks the file for commits of
// other connections (default DefaultNotifyInterval); 0 disables
// notifications (Listen then returns core.ErrUnsupported).
func WithNotifyInterval(d time.Duration) Option { return func(c *config) { c.notifyEvery = d } }

// WithMaxOpenConns bounds the connection pool of Open (default
// max(4, 2×GOMAXPROCS); ":memory:" always uses one connection).
func WithMaxOpenConns(n int) Option { return func(c *config) { c.maxConns = n } }

// Store is the SQLite store. All methods are safe for concurrent use.
type Store struct {
	*sqlq.Store
	db     *sql.DB
	owned  bool
	memory bool
	prefix string
	stmts  *sqlq.StmtCache
	closed atomic.Bool
	// sdb, retrier and sql run the statements the store owns: Claim,
	// Insert, Finish and ExtendLeases (queries.go).
	sdb     *sqlq.GuardedDB
	retrier sqlq.Retrier
	sql     statements
	// notifyEvery is Listen's polling interval; 0 disables it.
	notifyEvery time.Duration
}

var (
	_ contract.Store           = (*Store)(nil)
	_ contract.Migrator        = (*Store)(nil)
	_ contract.TxInserter      = (*Store)(nil)
	_ contract.TxCompleter     = (*Store)(nil)
	_ contract.TxRunner        = (*Store)(nil)
	_ contract.Notifier        = (*Store)(nil)
	_ contract.Settings        = (*Store)(nil)
	_ contract.MutableSettings = (*Store)(nil)
	_ contract.QueueLimiter    = (*Store)(nil)
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
	// Job dependencies, workflows and batches (deps.go): settled by the
	// triggers of schema version 15, in the statement that ends a job.
	_ contract.Dependencies = (*Store)(nil)
)

func newConfig(opts []Option) (config, error) {
	c := config{prefix: DefaultPrefix, strategy: contract.StrategySerialized, busyTimeout: DefaultBusyTimeout, migrate: true, notifyEvery: DefaultNotifyInterval}
	for _, o := range opts {
		o(&c)
	}
	if err := sqlq.ValidPrefix(c.prefix); err != nil {
		return c, fmt.Errorf("sqlite: %w", err)
	}
	switch c.strategy {
	case contract.StrategySerialized, "":
		c.strategy = contract.StrategySerialized
	default:
		return c, fmt.Errorf("sqlite: claim strategy %q: SQLite supports only %q (one writer at a time: a claim reads and updates its jobs in one write transaction): %w", c.strategy, contract.StrategySerialized, contract.ErrUnsupported)
	}
	if c.busyTimeout < 0 {
		return c, errors.New("sqlite: negative busy timeout")
	}
	if c.notifyEvery < 0 {
		return c, errors.New("sqlite: negative notify interval")
	}
	return c, nil
}

// isMemory reports whether path names a private in-memory database.
func isMemory(path string) bool { return path == ":memory:" || path == "" }

// DSN returns the modernc.org/sqlite data source name Open uses for path:
// WAL, BEGIN IMMEDIATE, busy timeout, synchronous=NORMAL, foreign keys.
func DSN(path string, busyTimeout time.Duration) string {
	q := url.Values{}
	q.Set("_txlock", "immediate")
	q.Add("_pragma", "busy_timeout("+strconv.FormatInt(busyTimeout.Milliseconds(), 10)+")")
	if !isMemory(path) {
		q.Add("_pragma", "journal_mode(WAL)")
	} else {
		path = ":memory:"
	}
	q.Add("_pragma", "synchronous(NORMAL)")
	q.Add("_pragma", "foreign_keys(1)")
	return path + "?" + q.Encode()
}

// Open opens (creating if needed) the SQLite database at path (":memory:"
// for a private in-memory one), migrates it unless WithMigrate(false), and
// returns the store, which owns the database handle. path may also be a
// "sqlite:" URL ("sqlite:data/jobs.db?prefix=app_", see the package doc),
// which means what it means to store.Open and the CLI's --db; options
// passed to Open win over its parameters. A plain path holding '?' is
// refused: parameters belong in a "sqlite:" URL. Errors: a malformed URL
// or parameter, an invalid option, a file that cannot be opened, and the
// migration's errors, all prefixed "sqlite:".
func Open(ctx context.Context, path string, opts ...Option) (*Store, error) {
	if isURL(path) {
		u, err := store.ParseURL(path)
		if err != nil {
			return nil, fmt.Errorf("sqlite: %w", err)
		}
		if path, opts, err = fromURL(u, opts); err != nil {
			return nil, err
		}
	} else if strings.ContainsRune(path, '?') {
		return nil, fmt.Errorf("sqlite: database path %q holds '?': give parameters in a URL, as in sqlite:%s", path, path)
	}
	c, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	db, err := sql.Open("sqlite", DSN(path, c.busyTimeout))
	if err != nil {
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	mem := isMemory(path)
	n := c.maxConns
	if n <= 0 {
		n = max(4, 2*runtime.GOMAXPROCS(0))
	}
	if mem {
		n = 1 // every connection to ":memory:" is its own database
	}
	db.SetMaxOpenConns(n)
	db.SetMaxIdleConns(n)
	db.SetConnMaxIdleTime(0)
	db.SetConnMaxLifetime(0)
	if err := warmUp(ctx, db); err != nil {
		db.Close()
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	s, err := newStore(ctx, db, true, mem, c)
	if err != nil {
		db.Close()
		return nil, err
	}
	return s, nil
}

// New returns a store on a caller-owned *sql.DB opened with the "sqlite"
// driver (see the package doc for the DSN it should use). It migrates
// unless WithMigrate(false). Close does not close db.
func New(ctx context.Context, db *sql.DB, opts ...Option) (*Store, error) {
	c, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	return newStore(ctx, db, false, false, c)
}

func newStore(ctx context.Context, db *sql.DB, owned, mem bool, c config) (*Store, error) {
	s := &Store{db: db, owned: owned, memory: mem, prefix: c.prefix, notifyEvery: c.notifyEvery}
	if !mem {
		// ":memory:" has one connection, which a write transaction holds:
		// there is none left to prepare statements on.
		s.stmts = &sqlq.StmtCache{DB: db}
	}
	s.sdb = &sqlq.GuardedDB{StdDB: sqlq.StdDB{DB: db, WriteLock: &sync.Mutex{}, Stmts: s.stmts}, Closed: &s.closed}
	s.retrier = sqlq.Retrier{Transient: dialect{}.Transient}
	s.sql = newStatements(sqlq.PrefixTables(c.prefix))
	inner, err := sqlq.New(sqlq.Config{
		Dialect:  dialect{},
		DB:       s.sdb,
		Tables:   sqlq.PrefixTables(c.prefix),
		Strategy: c.strategy,
	})
	if err != nil {
		return nil, fmt.Errorf("sqlite: %w", err)
	}
	s.Store = inner
	if c.migrate {
		if err := s.Migrate(ctx); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// warmUp opens the first connection, retrying the errors SQLite reports
// while another process is creating the same file or switching it to WAL
// (busy, locked, cannot open, I/O errors on the -shm/-wal files). Once one
// connection has switched the file to WAL, which persists, later
// connections open without contention.
func warmUp(ctx context.Context, db *sql.DB) error {
	var err error
	for i := 0; i < 60; i++ {
		if err = db.PingContext(ctx); err == nil || !openRetryable(err) {
			return err
		}
		t := time.NewTimer(10*time.Millisecond + rand.N(40*time.Millisecond))
		select {
		case <-ctx.Done():
			t.Stop()
			return errors.Join(err, ctx.Err())
		case <-t.C:
		}
	}
	return err
}

// openRetryable reports the errors warmUp and migrations retry.
func openRetryable(err error) bool {
	var e *sqlite.Error
	if !errors.As(err, &e) {
		return false
	}
	switch e.Code() & 0xff {
	case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED, sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_IOERR, sqlite3.SQLITE_PROTOCOL:
		return true
	}
	return false
}

// DB returns the underlying *sql.DB, for transactions passed to InsertTx and
// CompleteTx.
func (s *Store) DB() *sql.DB { return s.db }

// Prefix returns the table prefix.
func (s *Store) Prefix() string { return s.prefix }

// Migrate brings the schema to the newest version. It is safe to run
// repeatedly and from several processes at once.
func (s *Store) Migrate(ctx context.Context) error {
	if s.closed.Load() {
		return contract.ErrClosed
	}
	var err error
	for i := 0; i < 20; i++ {
		if err = migrate(ctx, s.db, s.prefix, !s.memory); err == nil || !openRetryable(err) {
			return err
		}
		t := time.NewTimer(10*time.Millisecond + rand.N(40*time.Millisecond))
		select {
		case <-ctx.Done():
			t.Stop()
			return errors.Join(err, ctx.Err())
		case <-t.C:
		}
	}
	return err
}

// Close closes the database handle if Open created it. Later calls return
// errors wrapping core.ErrClosed.
func (s *Store) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	if s.stmts != nil {
		s.stmts.Close()
	}
	if s.owned {
		return s.db.Close()
	}
	return nil
}

// inTx runs fn in one write transaction of s (BEGIN IMMEDIATE, behind the
// process's writer mutex), retrying SQLITE_BUSY and SQLITE_LOCKED, and
// returns what its last run returned.
func inTx[T any](ctx context.Context, s *Store, fn func(sqlq.Conn) (T, error)) (T, error) {
	var out T
	err := s.retrier.Do(ctx, func() error {
		return s.sdb.InTx(ctx, func(c sqlq.Conn) (err error) {
			out, err = fn(c)
			return err
		})
	})
	return out, err
}

// txConn accepts the transaction types InsertTx and CompleteTx support.
func txConn(tx any) (sqlq.Conn, error) { return sqlq.TxConn("sqlite", tx) }

// InsertTx inserts jobs inside the caller's transaction (*sql.Tx or
// *sqlx.Tx on this database); they become visible when it commits. Other
// transaction types return an error wrapping core.ErrUnsupported.
// Semantics otherwise match Insert.
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
// (*sql.Tx or *sqlx.Tx). It returns an error wrapping core.ErrLeaseLost when
// the fence fails, and core.ErrUnsupported for other transaction types.
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
