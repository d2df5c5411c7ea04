package dbserver

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx"
)

// pgBins are the PostgreSQL programs used.
type pgBins struct{ initdb, pgCtl, postgres string }

// findPostgres locates initdb, pg_ctl and postgres: in binDir if given,
// else in /usr/lib/postgresql/15/bin, the newest /usr/lib/postgresql/*/bin,
// or next to initdb on PATH.
func findPostgres(binDir string) (pgBins, error) {
	var dirs []string
	if binDir != "" {
		dirs = []string{binDir}
	} else {
		dirs = append(dirs, "/usr/lib/postgresql/15/bin")
		if m, _ := filepath.Glob("/usr/lib/postgresql/*/bin"); len(m) > 0 {
			slices.SortFunc(m, func(a, b string) int { return pgMajor(b) - pgMajor(a) })
			dirs = append(dirs, m...)
		}
		if p, ok := lookBin("initdb"); ok {
			dirs = append(dirs, filepath.Dir(p))
		}
	}
	for _, d := range dirs {
		b := pgBins{filepath.Join(d, "initdb"), filepath.Join(d, "pg_ctl"), filepath.Join(d, "postgres")}
		_, ok1 := lookBin(b.initdb)
		_, ok2 := lookBin(b.pgCtl)
		_, ok3 := lookBin(b.postgres)
		if ok1 && ok2 && ok3 {
			return b, nil
		}
	}
	return pgBins{}, fmt.Errorf("%w: PostgreSQL server programs (initdb, pg_ctl, postgres) not found in %v", ErrUnavailable, dirs)
}

// pgMajor is the version number in /usr/lib/postgresql/N/bin, or 0.
func pgMajor(dir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(dir)))
	return n
}

// StartPostgres makes a new PostgreSQL cluster (initdb) and starts its
// server, listening on 127.0.0.1:opts.Port (a free port when 0) and on a
// unix socket in the server's directory, with trust authentication for
// the superuser root, and creates the database "test". It waits until the
// server accepts connections (Options.StartTimeout). Errors wrap
// ErrUnavailable when PostgreSQL is not installed or the postgres OS user
// is missing while running as root; on any error nothing is left behind.
// Close the server when done.
func StartPostgres(ctx context.Context, opts Options) (*Server, error) {
	bins, err := findPostgres(opts.BinDir)
	if err != nil {
		return nil, err
	}
	im := &postgresImpl{bins: bins, fsync: opts.Fsync}
	s, err := newServer(KindPostgres, opts, "postgres", im)
	if err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			_ = s.Close()
		}
	}()
	initArgs := []string{bins.initdb, "-D", s.dataDir, "--username=root", "--auth=trust", "--encoding=UTF8", "--no-locale"}
	if !opts.Fsync {
		initArgs = append(initArgs, "--no-sync")
	}
	if err := s.runTool(ctx, initArgs...); err != nil {
		return nil, err
	}
	if err := s.startFirst(ctx, opts.Port == 0); err != nil {
		return nil, err
	}
	if err := im.createDatabase(ctx, s, "test"); err != nil {
		return nil, fmt.Errorf("dbserver: create database test: %w", err)
	}
	ok = true
	return s, nil
}

type postgresImpl struct {
	bins  pgBins
	fsync bool
}

func (p *postgresImpl) command(s *Server) []string {
	def := map[string]string{
		"listen_addresses":        "127.0.0.1",
		"unix_socket_directories": s.dir,
		"max_connections":         "300",
	}
	if !p.fsync {
		def["fsync"] = "off"
		def["full_page_writes"] = "off"
	}
	argv := []string{p.bins.postgres, "-D", s.dataDir, "-p", strconv.Itoa(s.port)}
	return append(argv, settingArgs(def, s.settings, func(k, v string) []string { return []string{"-c", k + "=" + v} })...)
}

func (p *postgresImpl) driverName() string { return "pgx" }

func (p *postgresImpl) url(s *Server, database string) string { return postgresURL(s.port, database) }

// postgresURL is the backlog store URL of database as user root on
// 127.0.0.1:port: a PostgreSQL server's, or a pooler's in front of one.
func postgresURL(port int, database string) string {
	u := url.URL{
		Scheme:   "postgres",
		User:     url.User("root"),
		Host:     "127.0.0.1:" + strconv.Itoa(port),
		Path:     "/" + database,
		RawQuery: "sslmode=disable",
	}
	return u.String()
}

func (p *postgresImpl) driverDSN(s *Server, database string) string { return p.url(s, database) }

func (p *postgresImpl) ping(ctx context.Context, s *Server) error {
	db, err := sql.Open("pgx", p.url(s, "postgres")+"&connect_timeout=2")
	if err != nil {
		return err
	}
	defer db.Close()
	return db.PingContext(ctx)
}

func (p *postgresImpl) createDatabase(ctx context.Context, s *Server, name string) error {
	db, err := sql.Open("pgx", p.url(s, "postgres"))
	if err != nil {
		return err
	}
	defer db.Close()
	_, err = db.ExecContext(ctx, `CREATE DATABASE "`+name+`"`)
	return err
}

// stop runs pg_ctl stop in mode; it returns once pg_ctl has seen the
// postmaster go (-w), or with pg_ctl's error.
func (p *postgresImpl) stop(ctx context.Context, s *Server, proc *process, mode StopMode) error {
	err := s.runTool(ctx, p.bins.pgCtl, "stop", "-D", s.dataDir, "-m", string(mode), "-w", "-t", "60")
	if err != nil && proc.exited() {
		return nil
	}
	if err != nil {
		if _, serr := os.Stat(filepath.Join(s.dataDir, "postmaster.pid")); errors.Is(serr, os.ErrNotExist) {
			// pg_ctl found no postmaster.pid: the server is already on its
			// way out; the caller waits for the process.
			return nil
		}
	}
	return err
}
