package dbserver

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/go-sql-driver/mysql" // database/sql driver "mysql"
)

// mariaBins are the MariaDB programs used.
type mariaBins struct{ server, install string }

// findMariaDB locates mariadbd (or mysqld) and mariadb-install-db (or
// mysql_install_db): in binDir if given, else on PATH, /usr/sbin and
// /usr/bin.
func findMariaDB(binDir string) (mariaBins, error) {
	var servers, installs []string
	if binDir != "" {
		servers = []string{filepath.Join(binDir, "mariadbd"), filepath.Join(binDir, "mysqld")}
		installs = []string{filepath.Join(binDir, "mariadb-install-db"), filepath.Join(binDir, "mysql_install_db")}
	} else {
		servers = []string{"mariadbd", "/usr/sbin/mariadbd", "/usr/bin/mariadbd", "mysqld", "/usr/sbin/mysqld"}
		installs = []string{"mariadb-install-db", "/usr/bin/mariadb-install-db", "/usr/scripts/mariadb-install-db", "mysql_install_db", "/usr/bin/mysql_install_db"}
	}
	server, ok1 := lookBin(servers...)
	install, ok2 := lookBin(installs...)
	if !ok1 || !ok2 {
		return mariaBins{}, fmt.Errorf("%w: MariaDB programs not found (server among %v: %v; installer among %v: %v)", ErrUnavailable, servers, ok1, installs, ok2)
	}
	return mariaBins{server: server, install: install}, nil
}

// StartMariaDB makes a new MariaDB data directory (mariadb-install-db) and
// starts mariadbd on 127.0.0.1:opts.Port (a free port when 0) and on a unix
// socket in the server's directory, with user root and no password, and
// creates the database "test". It waits until the server accepts
// connections (Options.StartTimeout). Errors wrap ErrUnavailable when
// MariaDB is not installed or the mysql OS user is missing while running
// as root; on any error nothing is left behind. Close the server when done.
func StartMariaDB(ctx context.Context, opts Options) (*Server, error) {
	bins, err := findMariaDB(opts.BinDir)
	if err != nil {
		return nil, err
	}
	im := &mariaImpl{bins: bins, fsync: opts.Fsync}
	s, err := newServer(KindMariaDB, opts, "mysql", im)
	if err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			_ = s.Close()
		}
	}()
	if err := im.installDB(ctx, s); err != nil {
		return nil, err
	}
	if err := s.startFirst(ctx, opts.Port == 0); err != nil {
		return nil, err
	}
	if err := im.setUp(ctx, s); err != nil {
		return nil, err
	}
	ok = true
	return s, nil
}

// installDB makes the data directory of a new server (mariadb-install-db).
// Its bootstrap server keeps temporary tables in the server's own
// directory (--tmpdir, passed on to mariadbd), as the server does. With
// the shared /tmp, an install that ran while other test binaries started
// servers of their own failed with "Could not remove temporary table
// '/tmp/#sql-temptable-…'" and then "Unknown table 'mysql.tmp_user_sys'".
func (m *mariaImpl) installDB(ctx context.Context, s *Server) error {
	return s.runTool(ctx, m.bins.install, "--no-defaults", "--datadir="+s.dataDir, "--tmpdir="+s.dir,
		"--auth-root-authentication-method=normal", "--skip-test-db", "--skip-name-resolve")
}

// setUp prepares a freshly installed, running server: root@127.0.0.1 and
// the database "test".
func (m *mariaImpl) setUp(ctx context.Context, s *Server) error {
	// mariadb-install-db makes root@localhost and, with
	// --skip-name-resolve, root@127.0.0.1; make sure of the latter, which
	// TCP connections from 127.0.0.1 are matched against.
	db, err := sql.Open("mysql", m.socketDSN(s))
	if err != nil {
		return err
	}
	defer db.Close()
	for _, q := range []string{
		"CREATE USER IF NOT EXISTS 'root'@'127.0.0.1'",
		"GRANT ALL PRIVILEGES ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION",
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("dbserver: set up root@127.0.0.1: %s: %w", q, err)
		}
	}
	if err := m.createDatabase(ctx, s, "test"); err != nil {
		return fmt.Errorf("dbserver: create database test: %w", err)
	}
	return nil
}

type mariaImpl struct {
	bins  mariaBins
	fsync bool
}

func (m *mariaImpl) socket(s *Server) string { return filepath.Join(s.dir, "mysqld.sock") }

func (m *mariaImpl) command(s *Server) []string {
	def := map[string]string{
		"max-connections":      "500",
		"skip-name-resolve":    "1",
		"tmpdir":               s.dir,
		"pid-file":             filepath.Join(s.dir, "mysqld.pid"),
		"character-set-server": "utf8mb4",
		"collation-server":     "utf8mb4_bin",
	}
	if !m.fsync {
		def["innodb-flush-log-at-trx-commit"] = "2"
	}
	argv := []string{m.bins.server, "--no-defaults", "--datadir=" + s.dataDir,
		"--port=" + strconv.Itoa(s.port), "--bind-address=127.0.0.1", "--socket=" + m.socket(s)}
	return append(argv, settingArgs(def, s.settings, func(k, v string) []string { return []string{"--" + k + "=" + v} })...)
}

func (m *mariaImpl) driverName() string { return "mysql" }

func (m *mariaImpl) url(s *Server, database string) string {
	return "mysql://root@127.0.0.1:" + strconv.Itoa(s.port) + "/" + database
}

func (m *mariaImpl) driverDSN(s *Server, database string) string {
	cfg := mysql.NewConfig()
	cfg.User = "root"
	cfg.Net = "tcp"
	cfg.Addr = "127.0.0.1:" + strconv.Itoa(s.port)
	cfg.DBName = database
	cfg.ParseTime = true
	return cfg.FormatDSN()
}

// socketDSN connects as root@localhost through the unix socket.
func (m *mariaImpl) socketDSN(s *Server) string {
	cfg := mysql.NewConfig()
	cfg.User = "root"
	cfg.Net = "unix"
	cfg.Addr = m.socket(s)
	cfg.Timeout = 2 * time.Second
	return cfg.FormatDSN()
}

func (m *mariaImpl) ping(ctx context.Context, s *Server) error {
	db, err := sql.Open("mysql", m.socketDSN(s))
	if err != nil {
		return err
	}
	defer db.Close()
	return db.PingContext(ctx)
}

func (m *mariaImpl) createDatabase(ctx context.Context, s *Server, name string) error {
	db, err := sql.Open("mysql", m.socketDSN(s))
	if err != nil {
		return err
	}
	defer db.Close()
	_, err = db.ExecContext(ctx, "CREATE DATABASE `"+name+"` CHARACTER SET utf8mb4 COLLATE utf8mb4_bin")
	return err
}

// stop shuts mariadbd down with SIGTERM, after innodb_fast_shutdown=2 in
// immediate mode (best effort: a server that does not answer is still
// sent SIGTERM).
func (m *mariaImpl) stop(ctx context.Context, s *Server, p *process, mode StopMode) error {
	if mode == StopImmediate {
		if db, err := sql.Open("mysql", m.socketDSN(s)); err == nil {
			sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			_, _ = db.ExecContext(sctx, "SET GLOBAL innodb_fast_shutdown = 2")
			cancel()
			_ = db.Close()
		}
	}
	return p.signal(syscall.SIGTERM)
}
