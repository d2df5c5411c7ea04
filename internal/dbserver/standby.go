package dbserver

import (
	"context"
	crand "crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// StartStandby makes a synchronous streaming standby of the running
// PostgreSQL server primary and starts it: pg_basebackup (fast
// checkpoint, WAL streamed alongside, -R so the copy starts in standby
// mode with primary_conninfo pointing at 127.0.0.1:primary.Port()) into a
// new data directory of its own, the server started on its own port
// (opts.Port, a free one when 0) like any other Server, and then the
// primary's synchronous_standby_names set to the standby's application
// name (ALTER SYSTEM, pg_reload_conf()). It returns once the primary
// reports the standby as "sync" in pg_stat_replication: from then on a
// commit on the primary returns only after the standby has flushed its WAL
// (synchronous_commit=on, PostgreSQL's default), so no acknowledged commit
// is lost when the primary dies and the standby is promoted.
//
// The standby's own synchronous_standby_names is empty, so once promoted
// (Promote) its commits wait for nobody. The primary keeps the setting: a
// primary whose standby is stopped or killed blocks in every commit until
// the standby is back (that is what synchronous replication means). A
// second standby of the same primary replaces the first as the synchronous
// one.
//
// The standby tries to stream again 100 ms after it lost its primary
// (wal_retrieve_retry_interval, 5 s by default): PostgreSQL takes a
// promotion requested during that wait only once it is over.
//
// opts is read as for StartPostgres; Fsync and Settings apply to the
// standby only. Options.StartTimeout bounds the copy, the start, and the
// wait for the "sync" state, each. The returned Server is read-only (hot standby) until
// promoted: CreateDatabase fails on it, DSN and URL point at it. Start,
// Stop, Kill and Close act on it alone. Errors wrap ErrUnavailable when
// pg_basebackup is not installed next to the primary's programs; on any
// error nothing is left behind (the primary's setting is changed only
// last). Close the standby when done.
func StartStandby(ctx context.Context, primary *Server, opts Options) (*Server, error) {
	if primary == nil || primary.Kind() != KindPostgres {
		return nil, errors.New("dbserver: StartStandby needs a PostgreSQL primary")
	}
	pim, ok := primary.impl.(*postgresImpl)
	if !ok {
		return nil, errors.New("dbserver: StartStandby needs a PostgreSQL primary")
	}
	if !primary.Running() {
		return nil, errors.New("dbserver: StartStandby: the primary is not running")
	}
	bins := pim.bins
	if opts.BinDir != "" {
		var err error
		if bins, err = findPostgres(opts.BinDir); err != nil {
			return nil, err
		}
	}
	basebackup, ok := lookBin(filepath.Join(filepath.Dir(bins.initdb), "pg_basebackup"))
	if !ok {
		return nil, fmt.Errorf("%w: pg_basebackup not found next to %s", ErrUnavailable, bins.initdb)
	}
	// A promotion requested while the standby waits to try streaming
	// again is taken only once that wait is over: wal_retrieve_retry_interval,
	// 5 s by default: one promotion in eight waited the whole 5 s.
	settings := map[string]string{"wal_retrieve_retry_interval": "100ms"}
	for k, v := range opts.Settings {
		settings[k] = v
	}
	opts.Settings = settings
	im := &postgresImpl{bins: bins, fsync: opts.Fsync}
	s, err := newServer(KindPostgres, opts, "postgres", im)
	if err != nil {
		return nil, err
	}
	done := false
	defer func() {
		if !done {
			_ = s.Close()
		}
	}()

	name := standbyName()
	conn := fmt.Sprintf("host=127.0.0.1 port=%d user=root application_name=%s", primary.Port(), name)
	args := []string{basebackup, "-d", conn, "-D", s.dataDir, "-R", "-X", "stream", "-c", "fast"}
	if !opts.Fsync {
		args = append(args, "--no-sync")
	}
	bctx, bcancel := context.WithTimeout(ctx, s.startTimeout)
	err = s.runTool(bctx, args...)
	bcancel()
	if err != nil {
		return nil, err
	}
	// The copy carries the primary's postgresql.auto.conf, which names an
	// earlier standby when there was one; a later line wins.
	if err := appendConf(filepath.Join(s.dataDir, "postgresql.auto.conf"), "synchronous_standby_names = ''"); err != nil {
		return nil, err
	}
	if err := s.startFirst(ctx, opts.Port == 0); err != nil {
		return nil, err
	}

	wctx, cancel := context.WithTimeout(ctx, s.startTimeout)
	defer cancel()
	pdb, err := sql.Open("pgx", pim.url(primary, "postgres"))
	if err != nil {
		return nil, err
	}
	defer pdb.Close()
	if err := waitSyncState(wctx, pdb, name, "streaming", ""); err != nil {
		return nil, err
	}
	if err := setSyncStandbys(wctx, pdb, `"`+name+`"`); err != nil {
		return nil, fmt.Errorf("dbserver: make the standby synchronous on the primary: %w", err)
	}
	if err := waitSyncState(wctx, pdb, name, "", "sync"); err != nil {
		return nil, err
	}
	done = true
	return s, nil
}

// standbyName is a fresh application name for a standby.
func standbyName() string {
	var b [4]byte
	_, _ = crand.Read(b[:])
	return "standby_" + hex.EncodeToString(b[:])
}

// appendConf appends a line to a PostgreSQL configuration file, keeping
// its owner.
func appendConf(path, line string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return fmt.Errorf("dbserver: %w", err)
	}
	if _, err := fmt.Fprintln(f, line); err != nil {
		f.Close()
		return fmt.Errorf("dbserver: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("dbserver: %w", err)
	}
	return nil
}

// setSyncStandbys sets synchronous_standby_names on the server of db
// (ALTER SYSTEM, then pg_reload_conf()). value is a
// synchronous_standby_names list; "" turns synchronous replication off.
func setSyncStandbys(ctx context.Context, db *sql.DB, value string) error {
	q := "ALTER SYSTEM SET synchronous_standby_names = '" + strings.ReplaceAll(value, "'", "''") + "'"
	if _, err := db.ExecContext(ctx, q); err != nil {
		return err
	}
	_, err := db.ExecContext(ctx, "SELECT pg_reload_conf()")
	return err
}

// waitSyncState polls the primary's pg_stat_replication until the standby
// called name is in state (when not "") with sync_state (when not ""), or
// ctx ends.
func waitSyncState(ctx context.Context, db *sql.DB, name, state, syncState string) error {
	var got, gotSync string
	for {
		err := db.QueryRowContext(ctx,
			`SELECT state, sync_state FROM pg_stat_replication WHERE application_name = $1`, name).Scan(&got, &gotSync)
		if err == nil && (state == "" || got == state) && (syncState == "" || gotSync == syncState) {
			return nil
		}
		if errors.Is(err, sql.ErrNoRows) {
			got, gotSync, err = "(not connected)", "", nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("dbserver: standby %s: want state %q sync_state %q on the primary, have %q %q (%v): %w",
				name, state, syncState, got, gotSync, err, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Promote turns a PostgreSQL standby (StartStandby) into a primary:
// pg_ctl promote, then it waits until pg_is_in_recovery() is false, and
// clears the server's synchronous_standby_names (ALTER SYSTEM,
// pg_reload_conf()) so its commits wait for no standby. It returns once
// the server accepts writes. Promote is the failover step alone: it does
// not check that the old primary is gone (a caller that promotes while
// the old primary still takes writes has two primaries). Errors: the
// server is not PostgreSQL, not running, not a standby (pg_ctl's error),
// or it is still in recovery when ctx ends or Options.StartTimeout has
// passed.
func (s *Server) Promote(ctx context.Context) error {
	im, ok := s.impl.(*postgresImpl)
	if !ok {
		return fmt.Errorf("dbserver: Promote: a %s server has no standby to promote", s.kind)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || s.proc == nil || s.proc.exited() {
		return errors.New("dbserver: Promote: the server is not running")
	}
	ctx, cancel := context.WithTimeout(ctx, s.startTimeout)
	defer cancel()
	if err := s.runTool(ctx, im.bins.pgCtl, "promote", "-D", s.dataDir, "-w", "-t", strconv.Itoa(int(s.startTimeout.Seconds()))); err != nil {
		return err
	}
	db, err := sql.Open("pgx", im.url(s, "postgres")+"&connect_timeout=5")
	if err != nil {
		return err
	}
	defer db.Close()
	for {
		var recovering bool
		err := db.QueryRowContext(ctx, "SELECT pg_is_in_recovery()").Scan(&recovering)
		if err == nil && !recovering {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("dbserver: Promote: still in recovery (%v): %w", err, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
	if err := setSyncStandbys(ctx, db, ""); err != nil {
		return fmt.Errorf("dbserver: Promote: clear synchronous_standby_names: %w", err)
	}
	return nil
}

// FailoverURL is the backlog store URL of database on every one of
// servers, a multi-host URL that connects to whichever of them accepts
// writes, trying them in the order given:
// postgres://root@127.0.0.1:P1,127.0.0.1:P2/database?sslmode=disable&target_session_attrs=read-write.
// pgx (and so the PostgreSQL store) opens each new connection on the first
// host that answers and is not read-only, so a pool that lost its
// connections to a dead primary reconnects to the promoted standby by
// itself. It is for PostgreSQL servers (a primary and its standbys); the
// list must not be empty.
func FailoverURL(database string, servers ...*Server) string {
	hosts := make([]string, len(servers))
	for i, s := range servers {
		hosts[i] = "127.0.0.1:" + strconv.Itoa(s.Port())
	}
	return "postgres://root@" + strings.Join(hosts, ",") + "/" + database + "?sslmode=disable&target_session_attrs=read-write"
}

// PostgresPair starts a private PostgreSQL primary (StartPostgres) with a
// synchronous standby (StartStandby) for t and closes both when t ends.
// opts applies to both, except Port and Dir, which apply to the primary
// (the standby gets a free port and a temporary directory). It skips or
// fails t as Postgres does.
func PostgresPair(t testing.TB, opts Options) (primary, standby *Server) {
	t.Helper()
	primary = Postgres(t, opts)
	sopts := opts
	sopts.Port, sopts.Dir = 0, ""
	return primary, started(t, "PostgreSQL standby", func(ctx context.Context) (*Server, error) {
		return StartStandby(ctx, primary, sopts)
	})
}
