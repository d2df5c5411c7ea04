package dbserver

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// KindPgBouncer is a PgBouncer connection pooler in front of a PostgreSQL
// Server (StartPgBouncer).
const KindPgBouncer Kind = "pgbouncer"

// PgBouncer pool modes (PgBouncer's pool_mode setting).
const (
	// PoolTransaction gives a client a server connection for one
	// transaction at a time: the mode that lets thousands of clients share
	// a few server connections, and the one that breaks session state
	// (prepared statements, LISTEN, session advisory locks, SET).
	PoolTransaction = "transaction"
	// PoolSession gives a client one server connection for its whole
	// session.
	PoolSession = "session"
)

// PgBouncerOptions configures StartPgBouncer. The zero value is ready to
// use: transaction pooling, 20 server connections per database and user.
type PgBouncerOptions struct {
	// Options are the common options: Port, Dir, BinDir (of the pgbouncer
	// program), OSUser (default postgres: PgBouncer refuses to run as
	// root), StartTimeout. Settings are extra [pgbouncer] settings, name →
	// value, over this package's defaults.
	Options
	// PoolMode is PoolTransaction (default) or PoolSession.
	PoolMode string
	// PoolSize is default_pool_size, the server connections per database
	// and user pair (default 20).
	PoolSize int
}

// StartPgBouncer starts a PgBouncer (Debian's /usr/sbin/pgbouncer, or
// pgbouncer on PATH) on 127.0.0.1:opts.Port (a free port when 0) in front of
// the PostgreSQL server upstream: every database of upstream is served
// under its own name, user root with trust authentication, in
// opts.PoolMode (transaction pooling by default). The returned Server is
// the pooler: DSN and URL point at it, Stop (StopFast is PgBouncer's safe
// shutdown, SIGINT, which waits for transactions; StopImmediate is SIGTERM),
// Kill and Start act on it alone, and CreateDatabase creates the database
// on upstream. Its LogPath is PgBouncer's log. Errors wrap ErrUnavailable
// when PgBouncer is not installed (scripts/install-cluster-packages.sh
// installs it). Close the pooler before its upstream.
func StartPgBouncer(ctx context.Context, upstream *Server, opts PgBouncerOptions) (*Server, error) {
	if upstream == nil || upstream.Kind() != KindPostgres {
		return nil, fmt.Errorf("dbserver: StartPgBouncer needs a PostgreSQL upstream")
	}
	var cands []string
	if opts.BinDir != "" {
		cands = []string{filepath.Join(opts.BinDir, "pgbouncer")}
	} else {
		cands = []string{"/usr/sbin/pgbouncer", "pgbouncer"}
	}
	bin, ok := lookBin(cands...)
	if !ok {
		return nil, fmt.Errorf("%w: pgbouncer not found among %v", ErrUnavailable, cands)
	}
	mode := opts.PoolMode
	switch mode {
	case "":
		mode = PoolTransaction
	case PoolTransaction, PoolSession:
	default:
		return nil, fmt.Errorf("dbserver: PgBouncer pool mode %q: want %q or %q", mode, PoolTransaction, PoolSession)
	}
	size := opts.PoolSize
	if size <= 0 {
		size = 20
	}
	im := &pgbouncerImpl{bin: bin, upstream: upstream, mode: mode, size: size}
	s, err := newServer(KindPgBouncer, opts.Options, "postgres", im)
	if err != nil {
		return nil, err
	}
	s.settings = opts.Settings
	ok = false
	defer func() {
		if !ok {
			_ = s.Close()
		}
	}()
	// The user list: root, trusted (auth_type trust still wants the user
	// listed).
	users := filepath.Join(s.dir, "userlist.txt")
	if err := os.WriteFile(users, []byte(`"root" ""`+"\n"), 0o644); err != nil {
		return nil, fmt.Errorf("dbserver: %w", err)
	}
	if err := s.chown(users); err != nil {
		return nil, err
	}
	if err := s.startFirst(ctx, opts.Port == 0); err != nil {
		return nil, err
	}
	ok = true
	return s, nil
}

type pgbouncerImpl struct {
	bin      string
	upstream *Server
	mode     string
	size     int
}

func (p *pgbouncerImpl) iniPath(s *Server) string { return filepath.Join(s.dir, "pgbouncer.ini") }

// command writes the configuration (the port may have changed since the
// last start) and returns the argv.
func (p *pgbouncerImpl) command(s *Server) []string {
	def := map[string]string{
		"listen_addr":       "127.0.0.1",
		"listen_port":       strconv.Itoa(s.port),
		"unix_socket_dir":   "",
		"auth_type":         "trust",
		"auth_file":         filepath.Join(s.dir, "userlist.txt"),
		"admin_users":       "root",
		"pool_mode":         p.mode,
		"default_pool_size": strconv.Itoa(p.size),
		"max_client_conn":   "2000",
		"pidfile":           filepath.Join(s.dir, "pgbouncer.pid"),
		// Drivers send these at startup; PgBouncer refuses unknown ones.
		"ignore_startup_parameters": "extra_float_digits,search_path",
		// Report a dead upstream quickly instead of queueing for long.
		"server_connect_timeout": "3",
		"server_login_retry":     "1",
	}
	var b strings.Builder
	fmt.Fprintf(&b, "[databases]\n* = host=127.0.0.1 port=%d\n\n[pgbouncer]\n", p.upstream.Port())
	for _, kv := range settingArgs(def, s.settings, func(k, v string) []string { return []string{k + " = " + v} }) {
		b.WriteString(kv + "\n")
	}
	ini := p.iniPath(s)
	// An error here shows as PgBouncer failing to start with its reason
	// in the log.
	if err := os.WriteFile(ini, []byte(b.String()), 0o644); err == nil {
		_ = s.chown(ini)
	}
	return []string{p.bin, ini}
}

func (p *pgbouncerImpl) driverName() string { return "pgx" }

func (p *pgbouncerImpl) url(s *Server, database string) string { return postgresURL(s.port, database) }

func (p *pgbouncerImpl) driverDSN(s *Server, database string) string { return p.url(s, database) }

// ping asks PgBouncer's admin console, which answers without an upstream.
func (p *pgbouncerImpl) ping(ctx context.Context, s *Server) error {
	db, err := sql.Open("pgx", p.url(s, "pgbouncer")+"&connect_timeout=2&default_query_exec_mode=simple_protocol")
	if err != nil {
		return err
	}
	defer db.Close()
	rows, err := db.QueryContext(ctx, "SHOW VERSION")
	if err != nil {
		return err
	}
	return rows.Close()
}

func (p *pgbouncerImpl) createDatabase(ctx context.Context, _ *Server, name string) error {
	return p.upstream.impl.createDatabase(ctx, p.upstream, name)
}

// stop: StopFast is PgBouncer's safe shutdown (SIGINT: waits for every
// transaction to end), StopImmediate its immediate one (SIGTERM).
func (p *pgbouncerImpl) stop(_ context.Context, _ *Server, proc *process, mode StopMode) error {
	if mode == StopFast {
		return proc.signal(syscall.SIGINT)
	}
	return proc.signal(syscall.SIGTERM)
}
