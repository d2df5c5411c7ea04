package sqlq

import (
	"context"
	"database/sql"
	"fmt"
	"io/fs"
	"slices"
	"strconv"
	"strings"

	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/database"
)

// Migration is one migration of a rendered migration set: its version,
// its file name without ".sql" (00013_claim_no_seqscan) and its Up
// statements, each ending in ";".
type Migration struct {
	Version    int64
	Name       string
	Statements []string
	// NoTransaction is set for a migration marked
	// "-- +goose NO TRANSACTION": goose runs it outside a transaction.
	NoTransaction bool
}

// PendingMigrations returns the migrations in fsys (as RenderMigrations
// returns them) newer than applied, oldest first, with their Up
// statements: the lines between "-- +goose Up" and "-- +goose Down",
// without goose's own annotations.
func PendingMigrations(fsys fs.FS, applied int64) ([]Migration, error) {
	entries, err := fs.ReadDir(fsys, ".")
	if err != nil {
		return nil, err
	}
	var out []Migration
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".sql") {
			continue
		}
		v, err := goose.NumericComponent(e.Name())
		if err != nil || v <= applied {
			continue
		}
		raw, err := fs.ReadFile(fsys, e.Name())
		if err != nil {
			return nil, err
		}
		out = append(out, Migration{
			Version: v, Name: strings.TrimSuffix(e.Name(), ".sql"), Statements: upStatements(string(raw)),
			NoTransaction: strings.Contains(string(raw), "-- +goose NO TRANSACTION"),
		})
	}
	slices.SortFunc(out, func(a, b Migration) int { return int(a.Version - b.Version) })
	return out, nil
}

// upStatements splits the Up part of a goose SQL migration into
// statements: a statement ends at a line ending in ";" outside a
// StatementBegin/StatementEnd block, or at StatementEnd.
func upStatements(src string) []string {
	var (
		stmts     []string
		cur       strings.Builder
		up, block bool
	)
	flush := func() {
		if s := strings.TrimSpace(cur.String()); s != "" {
			stmts = append(stmts, s)
		}
		cur.Reset()
	}
	for line := range strings.Lines(src) {
		t := strings.TrimSpace(line)
		if strings.HasPrefix(t, "-- +goose") {
			switch strings.TrimSpace(strings.TrimPrefix(t, "-- +goose")) {
			case "Up":
				up = true
			case "Down":
				flush()
				return stmts
			case "StatementBegin":
				flush()
				block = true
			case "StatementEnd":
				flush()
				block = false
			}
			continue
		}
		if !up {
			continue
		}
		cur.WriteString(line)
		if !block && strings.HasSuffix(t, ";") {
			flush()
		}
	}
	flush()
	return stmts
}

// MigrationScript returns the names of the migrations in fsys newer than
// applied (oldest first) and one SQL script that applies them as goose
// would: when applied is 0, the statements of first (PostgreSQL's CREATE
// SCHEMA) and the creation of versionTable; then each migration's
// statements, in a transaction unless it is marked NO TRANSACTION, with
// the statement recording its version in versionTable. No pending
// migration: no names and an empty script.
func MigrationScript(fsys fs.FS, dialect goose.Dialect, versionTable string, applied int64, first ...string) ([]string, string, error) {
	pending, err := PendingMigrations(fsys, applied)
	if err != nil || len(pending) == 0 {
		return nil, "", err
	}
	versions := make([]int64, len(pending))
	for i, m := range pending {
		versions[i] = m.Version
	}
	create, record, err := VersionTableSQL(dialect, versionTable, versions)
	if err != nil {
		return nil, "", err
	}
	var b strings.Builder
	names := make([]string, len(pending))
	if applied == 0 {
		b.WriteString("-- backlog: the version table\n")
		for _, s := range append(append([]string{}, first...), create...) {
			b.WriteString(s + "\n")
		}
		b.WriteString("\n")
	}
	for i, m := range pending {
		names[i] = m.Name
		fmt.Fprintf(&b, "-- backlog migration %s\n", m.Name)
		if !m.NoTransaction {
			b.WriteString("BEGIN;\n")
		}
		for _, s := range m.Statements {
			b.WriteString(s + "\n")
		}
		b.WriteString(record[i] + "\n")
		if !m.NoTransaction {
			b.WriteString("COMMIT;\n")
		}
		b.WriteString("\n")
	}
	return names, b.String(), nil
}

// VersionTableSQL returns the statements with which goose creates its
// version table versionTable in dialect (with the row of version 0 it
// adds), and, for each version, the statement recording it as applied:
// what goose itself runs, with the values written in.
func VersionTableSQL(dialect goose.Dialect, versionTable string, versions []int64) (create []string, record []string, err error) {
	st, err := database.NewStore(dialect, versionTable)
	if err != nil {
		return nil, nil, err
	}
	rec := &recorder{dialect: dialect}
	ctx := context.Background()
	if err := st.CreateVersionTable(ctx, rec); err != nil {
		return nil, nil, err
	}
	if err := st.Insert(ctx, rec, database.InsertRequest{Version: 0}); err != nil {
		return nil, nil, err
	}
	create, rec.stmts = rec.stmts, nil
	for _, v := range versions {
		if err := st.Insert(ctx, rec, database.InsertRequest{Version: v}); err != nil {
			return nil, nil, err
		}
	}
	return create, rec.stmts, nil
}

// recorder is a database.DBTxConn that keeps the statements executed on it,
// their arguments (integers and booleans) written in, and runs nothing.
type recorder struct {
	dialect goose.Dialect
	stmts   []string
}

func (r *recorder) ExecContext(_ context.Context, query string, args ...any) (sql.Result, error) {
	for i, a := range args {
		var lit string
		switch v := a.(type) {
		case int64:
			lit = strconv.FormatInt(v, 10)
		case bool:
			lit = strconv.FormatBool(v)
			if r.dialect != goose.DialectPostgres {
				lit = map[bool]string{true: "1", false: "0"}[v]
			}
		default:
			return nil, fmt.Errorf("version table statement: argument %T not supported", a)
		}
		if r.dialect == goose.DialectPostgres {
			query = strings.Replace(query, "$"+strconv.Itoa(i+1), lit, 1)
		} else {
			query = strings.Replace(query, "?", lit, 1)
		}
	}
	r.stmts = append(r.stmts, strings.TrimSpace(query)+";")
	return nil, nil
}

func (r *recorder) QueryContext(context.Context, string, ...any) (*sql.Rows, error) {
	return nil, fmt.Errorf("version table statement: queries not supported")
}

func (r *recorder) QueryRowContext(context.Context, string, ...any) *sql.Row { return nil }
