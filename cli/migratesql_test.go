package cli

import (
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver

	"github.com/backlogq/backlog/storetest/dbtest"
)

// migrate status and migrate sql change nothing; the SQL printed, applied
// by another tool, brings the schema to the newest version as migrate
// would (rendered for the URL's schema or prefix, the versions recorded),
// after which status has nothing pending, migrate nothing to do, and jobs
// can be enqueued. On SQLite, PostgreSQL and MariaDB.
func TestMigrateStatusAndSQL(t *testing.T) {
	t.Parallel()
	type target struct {
		url, driver, dsn, mark string // mark: what every table name starts with in the SQL
	}
	targets := map[string]func(t *testing.T) target{
		"sqlite": func(t *testing.T) target {
			path := filepath.Join(t.TempDir(), "jobs.db")
			if err := os.WriteFile(path, nil, 0o600); err != nil { // an empty database
				t.Fatal(err)
			}
			return target{url: "sqlite:" + path + "?prefix=app_", driver: "sqlite", dsn: path, mark: "app_jobs"}
		},
		"postgres": func(t *testing.T) target {
			dsn := dbtest.PostgresDSN(t)
			sep := "?"
			if strings.Contains(dsn, "?") {
				sep = "&"
			}
			return target{url: dsn + sep + "schema=sqlexport", driver: "pgx", dsn: dsn, mark: "sqlexport.jobs"}
		},
		"mysql": func(t *testing.T) target {
			dsn := dbtest.MySQLDSN(t)
			cfg, err := mysql.ParseDSN(dsn)
			if err != nil {
				t.Fatal(err)
			}
			url := "mysql://" + cfg.User + ":" + cfg.Passwd + "@" + cfg.Addr + "/" + cfg.DBName + "?prefix=exp_"
			cfg.MultiStatements = true // a migration's statements in one Exec
			return target{url: url, driver: "mysql", dsn: cfg.FormatDSN(), mark: "exp_jobs"}
		},
	}
	for name, mk := range targets {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			tg := mk(t)
			st := decodeJSON[migrationStatus](t, mustCLI(t, tg.url, "-o", "json", "migrate", "status").stdout)
			// Every migration is pending, the newest last (numbers may
			// have gaps: some are reserved for work on other branches).
			if st.Version != 0 || st.Newest < 10 || len(st.Pending) < 10 || !strings.HasPrefix(st.Pending[0], "00001_") ||
				!strings.HasPrefix(st.Pending[len(st.Pending)-1], fmt.Sprintf("%05d_", st.Newest)) {
				t.Fatalf("status of a new store: %+v", st)
			}
			r := mustCLI(t, tg.url, "migrate", "status")
			if !strings.Contains(r.stdout, "schema at version 0; this backlog has version ") || !strings.Contains(r.stdout, "  00001_init\n") {
				t.Errorf("status: %s", r)
			}
			script := mustCLI(t, tg.url, "migrate", "sql").stdout
			if !strings.Contains(script, tg.mark) || !strings.Contains(script, "goose_db_version") || strings.Contains(script, "+goose") || strings.Contains(script, "{{") {
				t.Fatalf("sql:\n%s", script)
			}
			// Printing changed nothing.
			if again := decodeJSON[migrationStatus](t, mustCLI(t, tg.url, "-o", "json", "migrate", "status").stdout); again.Version != 0 {
				t.Fatalf("migrate sql applied something: %+v", again)
			}
			// Another tool applies it.
			db, err := sql.Open(tg.driver, tg.dsn)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			for _, part := range scriptParts(script) {
				if _, err := db.ExecContext(t.Context(), part); err != nil {
					t.Fatalf("apply the printed SQL: %v\n%s", err, part)
				}
			}
			after := decodeJSON[migrationStatus](t, mustCLI(t, tg.url, "-o", "json", "migrate", "status").stdout)
			if after.Version != st.Newest || len(after.Pending) != 0 {
				t.Fatalf("status after applying the SQL: %+v", after)
			}
			if r := mustCLI(t, tg.url, "migrate", "status"); !strings.Contains(r.stdout, "nothing pending") {
				t.Errorf("status after: %s", r)
			}
			if r := mustCLI(t, tg.url, "migrate", "sql"); r.stdout != "" || !strings.Contains(r.stderr, "no migration pending") {
				t.Errorf("sql with nothing pending: %s", r)
			}
			if r := mustCLI(t, tg.url, "migrate"); !strings.Contains(r.stdout, "already at version") {
				t.Errorf("migrate after the SQL was applied: %s", r)
			}
			mustCLI(t, tg.url, "enqueue", "k", "--allow-unknown-kinds")
			if r := mustCLI(t, tg.url, "jobs", "list"); !strings.Contains(r.stdout, "available") {
				t.Errorf("jobs list: %s", r)
			}
		})
	}
	if r := cli(t, "sqlite:"+filepath.Join(t.TempDir(), "none.db"), "migrate", "sql"); r.code != exitRuntime || !strings.Contains(r.stderr, "does not exist") {
		t.Errorf("sql of a missing SQLite file: %s", r)
	}
}

// scriptParts splits a migrate sql script as psql runs it: a migration in
// BEGIN … COMMIT is sent whole; one outside a transaction (CREATE INDEX
// CONCURRENTLY and the like) statement by statement.
func scriptParts(script string) []string {
	var parts []string
	for i, sec := range strings.Split(script, "\n-- backlog migration ") {
		if i > 0 {
			sec = "-- backlog migration " + sec // a comment line again
		}
		if strings.Contains(sec, "\nBEGIN;\n") || !strings.Contains(sec, "\n") {
			parts = append(parts, sec)
			continue
		}
		// Statements end at a line ending in ";" outside a dollar quote.
		var cur strings.Builder
		quote := ""
		for line := range strings.Lines(sec) {
			cur.WriteString(line)
			for _, tag := range dollarTag.FindAllString(line, -1) {
				switch quote {
				case "":
					quote = tag
				case tag:
					quote = ""
				}
			}
			if quote == "" && strings.HasSuffix(strings.TrimSpace(line), ";") {
				parts = append(parts, cur.String())
				cur.Reset()
			}
		}
		if strings.TrimSpace(cur.String()) != "" {
			parts = append(parts, cur.String())
		}
	}
	return parts
}

// dollarTag matches a PostgreSQL dollar-quote tag ($$, $fn$).
var dollarTag = regexp.MustCompile(`\$[A-Za-z_]*\$`)
