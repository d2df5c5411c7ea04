// Package dbserver starts private PostgreSQL and MariaDB servers for tests
// and benchmarks.
//
// Each Server has a data directory of its own (in a fresh temporary
// directory unless Options.Dir names one), listens on 127.0.0.1 on a port
// of its own (and on a unix socket in that directory), and can be stopped,
// killed and started again on the same port and data. A test can therefore
// stage database outages without disturbing the shared servers on 5432 and
// 3306 that other test packages use at the same time.
//
//	srv := dbserver.Postgres(t, dbserver.Options{}) // skips when PostgreSQL is not installed
//	st, err := store.Open(ctx, srv.DSN())           // postgres://root@127.0.0.1:PORT/test?sslmode=disable
//	…
//	srv.Stop(dbserver.StopImmediate)                // or srv.Kill()
//	srv.Start(ctx)                                  // same port, same data
//
// # Servers
//
// PostgreSQL: the server binaries of /usr/lib/postgresql/15/bin (else the
// newest /usr/lib/postgresql/*/bin, else initdb on PATH). initdb makes a
// cluster whose superuser is root with trust authentication; the server
// listens on 127.0.0.1 only, and a database named test is created. Autovacuum
// keeps its production default (on).
//
// MariaDB: mariadb-install-db and mariadbd (mysql_install_db and mysqld
// where those are the names), run with --no-defaults so no configuration of
// the machine applies. root has no password; a database named test is
// created with CHARACTER SET utf8mb4 COLLATE utf8mb4_bin.
//
// MariaDB Galera (StartGalera, Galera): n mariadbd processes (three in
// tests) on loopback, each a Server with ports of its own for SQL, group
// communication (gmcast.listen_addr), incremental state transfer
// (ist.recv_addr) and full state transfer (--wsrep-sst-receive-address:
// without it every node would take 4444), with the provider of Debian's
// galera-4 package, rsync state transfer, binlog-format=ROW and
// innodb-autoinc-lock-mode=2. Node 1 bootstraps the cluster
// (--wsrep-new-cluster, on its first start only) and is set up like a
// plain MariaDB server; nodes 2… start from an empty data directory and
// receive node 1's by rsync, one after the other, so a start takes about
// ten seconds. A node counts as started once it is Synced. A node killed
// and started again first recovers its replication position
// (mariadbd --wsrep-recover, as MariaDB's service does) and then catches
// up on what it missed from a donor's write-set cache (an incremental
// state transfer, a few seconds); a full rsync transfer is the fallback
// when the cache no longer holds it. Data directories belong to the mysql
// user, which rsync needs. Memory is kept modest for machines that run several
// servers: innodb-buffer-pool-size=64M, gcache.size=32M,
// performance-schema off (Options.Settings overrides each).
//
// Both allow more connections than their defaults (PostgreSQL
// max_connections=300, MariaDB max-connections=500), for many worker
// processes with a pool each; Options.Settings overrides any setting.
//
// Neither server flushes to disk by default (PostgreSQL fsync=off and
// full_page_writes=off, MariaDB innodb_flush_log_at_trx_commit=2): committed
// data survive a kill or an immediate stop of the server, not a crash of the
// machine. Options.Fsync restores the durable defaults.
//
// # Standby and failover
//
// StartStandby (test helper PostgresPair, which starts both) makes a
// synchronous streaming standby of a private PostgreSQL: pg_basebackup -R
// -X stream -c fast from the running primary into a data directory of its
// own, the standby on its own port, and the primary's
// synchronous_standby_names set to the standby's application name; it
// returns once the primary reports the standby "sync", so every commit
// acknowledged from then on is flushed on both. The pair is up in about
// three seconds. Failover is scripted, not automatic: the test plays the
// failover manager, kills the primary (Kill: every process of it, as when
// its machine dies) and calls Promote on the standby (pg_ctl promote; it
// waits until the server leaves recovery and clears its
// synchronous_standby_names so its commits wait for no standby), a tenth of
// a second. The standby retries streaming 100 ms after losing its primary
// (wal_retrieve_retry_interval; PostgreSQL takes a promotion requested
// during that wait only when it ends, and with the default 5 s one
// promotion in eight took 5.1 s). FailoverURL is the multi-host store URL
// of the pair (target_session_attrs=read-write): clients reach whichever
// server accepts writes, and reconnect to the promoted standby by
// themselves.
//
// pg_auto_failover (Debian's postgresql-15-auto-failover and
// pg-auto-failover-cli) installs and runs on Debian 12, but its monitor
// declares a primary dead only after node_considered_unhealthy_timeout
// (20 s by default), and a promotion took 32 s after the kill; a keeper
// left alive restarts its killed postgres as a primary that still waits
// for its standby, so a machine's loss must kill the keeper too. A
// scripted promote keeps the tests within seconds; the times to resume
// they measure leave out a failover manager's detection delay, which a
// deployment adds to them.
//
// # HAProxy
//
// StartHAProxy (HAProxyFor in tests) runs Debian's haproxy in the
// foreground as a child process, on a configuration it writes to a
// directory of its own: a frontend on 127.0.0.1:PORT and a list of
// backends, in mode http (job servers; health check GET /healthz) or tcp
// (databases), balance roundrobin or first (one writer at a time: a
// primary and its standby, one Galera node), backups if any. A backend is
// checked every 500 ms and leaves the rotation after 2 failed checks
// (back after 1 good one), so a dead one is out within about a second; a
// refused connection is tried again on another backend (retries 3, option
// redispatch), which is safe for any request since none of it was sent.
// HAProxy.Servers reads each backend's state and counters from the admin
// socket. The frontend keeps its port across Kill, Stop and Start.
//
// # Poolers
//
// StartPgBouncer (test helper PgBouncer) puts Debian's PgBouncer in front
// of a private PostgreSQL, in transaction pooling by default: the setup
// that breaks session state (prepared statements, LISTEN, session advisory
// locks), which backlog's PostgreSQL store must survive. The pooler is a
// Server of its own kind, stopped, killed and started again like the
// databases.
//
// # Users
//
// PostgreSQL refuses to run as root, and MariaDB needs to be told. When the
// calling process is root, every server program runs as the postgres or
// mysql OS user (Options.OSUser overrides) and the directory is given to
// that user; otherwise everything runs as the calling user.
//
// Server processes get SIGKILL when the process that started them dies
// (Linux parent-death signal), so a test binary that panics or times out
// leaves no server behind. This package works on Linux only; elsewhere every
// start fails with an error wrapping ErrUnavailable.
package dbserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Kind names a database server program.
type Kind string

// The kinds of server this package starts.
const (
	KindPostgres Kind = "postgres"
	KindMariaDB  Kind = "mariadb"
)

// StopMode says how Stop shuts a server down.
type StopMode string

const (
	// StopFast is a clean shutdown: PostgreSQL's "fast" mode (pg_ctl stop
	// -m fast: sessions are ended, their transactions rolled back, a
	// checkpoint is written); MariaDB's normal shutdown (SIGTERM).
	StopFast StopMode = "fast"
	// StopImmediate is PostgreSQL's "immediate" mode (pg_ctl stop -m
	// immediate): every process quits at once without a checkpoint, and
	// the next start runs crash recovery. MariaDB has no such mode: it sets
	// innodb_fast_shutdown=2 (no flush, crash recovery at the next start)
	// and then shuts down normally, so its sessions are still ended
	// cleanly. Use Kill for an abrupt end on either server.
	StopImmediate StopMode = "immediate"
)

// ErrUnavailable is wrapped by the Start functions when the server cannot
// run on this machine: its programs are not installed, the OS user it must
// run as does not exist, or the platform is not Linux. The test helpers
// (Postgres, MariaDB) skip on it.
var ErrUnavailable = errors.New("dbserver: database server unavailable")

// Options configures a server. The zero value is ready to use.
type Options struct {
	// Port is the TCP port on 127.0.0.1. 0 picks a free port below the
	// kernel's ephemeral range, so outgoing connections cannot take it
	// while the server is stopped.
	Port int
	// Dir is the directory for the data, the socket and the log. It must
	// not exist yet or be empty. "" makes a temporary directory, which
	// Close removes; a given Dir is left in place.
	Dir string
	// BinDir is the directory of the server programs (initdb, pg_ctl,
	// postgres; or mariadbd and mariadb-install-db). "" searches the usual
	// places (see the package documentation).
	BinDir string
	// OSUser is the user the server runs as when the caller is root. ""
	// means postgres or mysql. Ignored when the caller is not root.
	OSUser string
	// Fsync keeps the server's durable defaults (fsync on). Off by default:
	// see the package documentation.
	Fsync bool
	// Settings are extra server settings, name → value: PostgreSQL's
	// "-c name=value", MariaDB's "--name=value". They override this
	// package's defaults.
	Settings map[string]string
	// StartTimeout bounds each start of the server until it accepts
	// connections, crash recovery included (initialisation of the data
	// directory is not counted). 0 means 2 minutes.
	StartTimeout time.Duration
}

// Server is one private database server. Its methods are safe for
// concurrent use; Stop, Kill, Start and Close are serialised.
type Server struct {
	kind         Kind
	dir          string // everything lives here
	ownsDir      bool
	dataDir      string
	logPath      string
	port         int
	settings     map[string]string
	startTimeout time.Duration
	cred         *osUser // nil: run as the caller
	impl         impl

	mu     sync.Mutex // serialises Stop, Kill, Start, Close
	proc   *process   // nil when not running
	closed bool
}

// impl is what differs between PostgreSQL and MariaDB.
type impl interface {
	// command returns the server's argv.
	command(s *Server) []string
	// ping returns nil once the server accepts connections.
	ping(ctx context.Context, s *Server) error
	// stop shuts the running server down in mode; the caller waits for the
	// process to exit.
	stop(ctx context.Context, s *Server, p *process, mode StopMode) error
	// driverDSN is the database/sql DSN of database on s.
	driverDSN(s *Server, database string) string
	// url is the backlog store URL of database on s.
	url(s *Server, database string) string
	driverName() string
	createDatabase(ctx context.Context, s *Server, name string) error
}

// preparer is implemented by servers with work to do before each start
// (a Galera node recovers its replication position after a crash).
type preparer interface {
	prepare(ctx context.Context, s *Server) error
}

// Kind reports which server this is.
func (s *Server) Kind() Kind { return s.kind }

// Port is the server's TCP port on 127.0.0.1. It stays the same across
// restarts.
func (s *Server) Port() int { return s.port }

// Dir is the directory holding the data directory, the unix socket and the
// log.
func (s *Server) Dir() string { return s.dir }

// LogPath is the server's log file (its stdout and stderr, across restarts).
func (s *Server) LogPath() string { return s.logPath }

// DSN is the backlog store URL of the server's database "test", as accepted
// by store.Open and the backlog CLI's --db:
// postgres://root@127.0.0.1:PORT/test?sslmode=disable or
// mysql://root@127.0.0.1:PORT/test.
func (s *Server) DSN() string { return s.impl.url(s, "test") }

// URL is the backlog store URL of the named database on the server (create
// it first with CreateDatabase).
func (s *Server) URL(database string) string { return s.impl.url(s, database) }

// DriverName is the database/sql driver name DriverDSN is meant for: "pgx"
// (github.com/jackc/pgx/v5/stdlib) or "mysql" (github.com/go-sql-driver/mysql).
// This package registers both drivers.
func (s *Server) DriverName() string { return s.impl.driverName() }

// DriverDSN is the database/sql data source name of the named database on
// the server, for the driver DriverName names.
func (s *Server) DriverDSN(database string) string { return s.impl.driverDSN(s, database) }

// CreateDatabase creates an empty database named name (letters, digits and
// underscores only) on the running server. It returns an error if the name
// is not allowed, the server does not answer or the database exists.
func (s *Server) CreateDatabase(ctx context.Context, name string) error {
	if !validName(name) {
		return fmt.Errorf("dbserver: database name %q: want letters, digits and underscores", name)
	}
	if err := s.impl.createDatabase(ctx, s, name); err != nil {
		return fmt.Errorf("dbserver: create database %s: %w", name, err)
	}
	return nil
}

func validName(name string) bool {
	if name == "" || len(name) > 63 {
		return false
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_') {
			return false
		}
	}
	return true
}

// PID is the process id of the running server (PostgreSQL's postmaster), or
// 0 when it is not running.
func (s *Server) PID() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil || s.proc.exited() {
		return 0
	}
	return s.proc.pid
}

// Running reports whether the server process is alive (it may still be
// starting up or recovering).
func (s *Server) Running() bool { return s.PID() != 0 }

// Start starts the stopped or killed server again on the same port and data
// directory and waits until it accepts connections (after crash recovery,
// if it needs one), for at most Options.StartTimeout. It returns an error if
// the server is running or closed, or does not come up in time (the error
// quotes the end of its log).
func (s *Server) Start(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errors.New("dbserver: Start on a closed server")
	}
	if s.proc != nil && !s.proc.exited() {
		return errors.New("dbserver: Start: the server is running")
	}
	return s.startLocked(ctx)
}

// Stop shuts the server down in the given mode and waits until its process
// has exited (at most a minute; then it is killed and an error returned).
// Stopping a server that is not running does nothing; a mode other than
// StopFast and StopImmediate is an error.
func (s *Server) Stop(mode StopMode) error {
	if mode != StopFast && mode != StopImmediate {
		return fmt.Errorf("dbserver: unknown stop mode %q", mode)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.proc
	if p == nil || p.exited() {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := s.impl.stop(ctx, s, p, mode)
	if werr := p.wait(ctx); werr != nil {
		_ = s.killLocked()
		return fmt.Errorf("dbserver: %s did not stop (%v), killed it: %w", s.kind, err, werr)
	}
	// The process is gone; a complaint of the stop tool (pg_ctl losing a
	// race with the postmaster's exit, say) no longer matters.
	s.proc = nil
	return nil
}

// Kill sends SIGKILL to the server: for PostgreSQL to the postmaster and to
// every process it started (a postmaster alone would leave its backends
// serving, and a restart would refuse the still-attached shared memory),
// for MariaDB to its one process. It waits until they are gone (at most 30
// seconds). Killing a server that is not running does nothing.
func (s *Server) Kill() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.killLocked()
}

func (s *Server) killLocked() error {
	p := s.proc
	if p == nil || p.exited() {
		s.proc = nil
		return nil
	}
	err := p.killTree()
	s.proc = nil
	return err
}

// Close kills the server if it runs and removes its directory when this
// package made it. It is idempotent; after Close, Start fails.
func (s *Server) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	err := s.killLocked()
	if s.ownsDir {
		if rerr := os.RemoveAll(s.dir); rerr != nil && err == nil {
			err = fmt.Errorf("dbserver: remove %s: %w", s.dir, rerr)
		}
	}
	return err
}

// startLocked spawns the server and waits until it answers.
func (s *Server) startLocked(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, s.startTimeout)
	defer cancel()
	if pr, ok := s.impl.(preparer); ok {
		if err := pr.prepare(ctx, s); err != nil {
			return err
		}
	}
	p, err := s.spawn(s.impl.command(s))
	if err != nil {
		return err
	}
	s.proc = p
	if err := s.waitReady(ctx, p); err != nil {
		_ = s.killLocked()
		return err
	}
	return nil
}

// waitReady pings the server until it answers, its process exits, or ctx
// ends.
func (s *Server) waitReady(ctx context.Context, p *process) error {
	var last error
	for {
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		last = s.impl.ping(pctx, s)
		cancel()
		if last == nil {
			return nil
		}
		select {
		case <-p.done:
			return fmt.Errorf("dbserver: %s exited while starting (%v); end of %s:\n%s", s.kind, p.err, s.logPath, s.logTail())
		case <-ctx.Done():
			return fmt.Errorf("dbserver: %s did not accept connections in time (last error: %v); end of %s:\n%s", s.kind, last, s.logPath, s.logTail())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// logTail returns the last lines of the server log.
func (s *Server) logTail() string { return fileTail(s.logPath, 3000) }

// fileTail returns up to the last n bytes of a file, from a line start.
func fileTail(path string, n int64) string {
	f, err := os.Open(path)
	if err != nil {
		return "(" + err.Error() + ")"
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "(" + err.Error() + ")"
	}
	off := max(fi.Size()-n, 0)
	b, _ := io.ReadAll(io.NewSectionReader(f, off, fi.Size()-off))
	if off > 0 {
		if i := strings.IndexByte(string(b), '\n'); i >= 0 {
			b = b[i+1:]
		}
	}
	return string(b)
}

// newServer prepares the directory, the user and the port of a server.
func newServer(kind Kind, opts Options, defUser string, im impl) (*Server, error) {
	s := &Server{kind: kind, impl: im, settings: opts.Settings, startTimeout: opts.StartTimeout}
	if s.startTimeout <= 0 {
		s.startTimeout = 2 * time.Minute
	}
	cred, err := credential(opts.OSUser, defUser)
	if err != nil {
		return nil, err
	}
	s.cred = cred
	if opts.Dir == "" {
		d, err := os.MkdirTemp("", "backlog-"+string(kind)+"-")
		if err != nil {
			return nil, fmt.Errorf("dbserver: %w", err)
		}
		s.dir, s.ownsDir = d, true
	} else {
		d, err := filepath.Abs(opts.Dir)
		if err != nil {
			return nil, fmt.Errorf("dbserver: %w", err)
		}
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("dbserver: %w", err)
		}
		if ents, err := os.ReadDir(d); err != nil || len(ents) > 0 {
			return nil, fmt.Errorf("dbserver: directory %s must be empty (%v)", d, err)
		}
		s.dir = d
	}
	if err := s.chown(s.dir); err != nil {
		s.cleanupDir()
		return nil, err
	}
	s.dataDir = filepath.Join(s.dir, "data")
	s.logPath = filepath.Join(s.dir, "server.log")
	s.port = opts.Port
	return s, nil
}

func (s *Server) cleanupDir() {
	if s.ownsDir {
		_ = os.RemoveAll(s.dir)
	}
}

// chown gives path to the server's OS user (when running as root).
func (s *Server) chown(path string) error {
	if s.cred == nil {
		return nil
	}
	if err := os.Chown(path, s.cred.uid, s.cred.gid); err != nil {
		return fmt.Errorf("dbserver: give %s to user %s: %w", path, s.cred.name, err)
	}
	return nil
}

// env is the environment of the server programs: the caller's, without
// the variables PostgreSQL and MariaDB tools read (PGDATA, PGPORT, MYSQL_…),
// with HOME in the server's directory.
func (s *Server) env() []string {
	var out []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "PG") || strings.HasPrefix(k, "MYSQL") || strings.HasPrefix(k, "MARIADB") || k == "HOME" {
			continue
		}
		out = append(out, kv)
	}
	return append(out, "HOME="+s.dir, "LC_ALL=C")
}

// runTool runs a helper program (initdb, pg_ctl, mariadb-install-db) as the
// server's user and returns its output in the error when it fails.
func (s *Server) runTool(ctx context.Context, argv ...string) error {
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = s.dir
	cmd.Env = s.env()
	cmd.SysProcAttr = sysProcAttr(s.cred, false)
	out, err := cmd.CombinedOutput()
	if err != nil {
		o := string(out)
		if len(o) > 3000 {
			o = "…" + o[len(o)-3000:]
		}
		return fmt.Errorf("dbserver: %s: %w:\n%s", filepath.Base(argv[0]), err, o)
	}
	return nil
}

// startFirst starts a freshly initialised server, trying other ports when
// the one picked was taken meanwhile (only when the caller chose none).
func (s *Server) startFirst(ctx context.Context, pickPort bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var err error
	for range 4 {
		if pickPort {
			if s.port, err = freePort(); err != nil {
				return err
			}
		}
		err = s.startLocked(ctx)
		if err == nil || !pickPort || !strings.Contains(strings.ToLower(err.Error()), "address already in use") {
			return err
		}
	}
	return err
}

// freePort returns a TCP port on 127.0.0.1 that nothing listens on, chosen
// at random below the kernel's ephemeral port range (so no outgoing
// connection takes it while the server is down), or a kernel-assigned one
// if none was found there.
func freePort() (int, error) {
	lo := 32768
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if v, err := strconv.Atoi(f[0]); err == nil {
				lo = v
			}
		}
	}
	const floor = 20000
	if lo > floor+1000 {
		for range 100 {
			p := floor + rand.IntN(lo-floor)
			if p == 5432 || p == 3306 {
				continue
			}
			l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
			if err != nil {
				continue
			}
			_ = l.Close()
			return p, nil
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("dbserver: find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// lookBin returns the first existing executable among candidates (bare
// names are looked up on PATH).
func lookBin(candidates ...string) (string, bool) {
	for _, c := range candidates {
		if c == "" {
			continue
		}
		if !strings.Contains(c, "/") {
			if p, err := exec.LookPath(c); err == nil {
				return p, true
			}
			continue
		}
		if fi, err := os.Stat(c); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return c, true
		}
	}
	return "", false
}

// settingArgs merges defaults with user settings (user wins) and renders
// each with format, sorted by name for a stable command line.
func settingArgs(defaults, user map[string]string, format func(k, v string) []string) []string {
	all := map[string]string{}
	for k, v := range defaults {
		all[k] = v
	}
	for k, v := range user {
		all[k] = v
	}
	keys := make([]string, 0, len(all))
	for k := range all {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var out []string
	for _, k := range keys {
		out = append(out, format(k, all[k])...)
	}
	return out
}
