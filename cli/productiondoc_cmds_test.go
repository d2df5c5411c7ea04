package cli

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/core/contract"
	"github.com/backlogq/backlog/storetest/dbtest"
)

// shimEnv, when set, makes TestProductionDocBacklogShim run the backlog
// command with the arguments after "--": the test binary stands in for
// backlog in the doc's shell commands.
const shimEnv = "BACKLOG_DOCTEST_SHIM"

// TestProductionDocBacklogShim is the backlog command of the shell
// commands TestProductionDoc* run (see backlogOnPath); run as a test, it
// does nothing.
func TestProductionDocBacklogShim(t *testing.T) {
	if os.Getenv(shimEnv) != "1" {
		return
	}
	args := os.Args
	for i, a := range args {
		if a == "--" {
			args = args[i+1:]
			break
		}
	}
	os.Exit(Main(context.Background(), args))
}

// backlogOnPath returns a directory holding a backlog command that runs
// this test binary as backlog, for the PATH of the doc's commands.
func backlogOnPath(t *testing.T) string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	script := fmt.Sprintf("#!/bin/sh\n%s=1 exec '%s' -test.run='^TestProductionDocBacklogShim$' -- \"$@\"\n", shimEnv, self)
	if err := os.WriteFile(filepath.Join(dir, "backlog"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// docCommands returns the shell block of docs/production.md marked
// <!-- run: name -->.
func docCommands(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(productionDoc)
	if err != nil {
		t.Fatal(err)
	}
	marker := "<!-- run: " + name + " -->\n```sh\n"
	_, rest, ok := strings.Cut(string(b), marker)
	if !ok {
		t.Fatalf("%s has no block marked <!-- run: %s --> followed by ```sh", productionDoc, name)
	}
	block, _, ok := strings.Cut(rest, "```\n")
	if !ok {
		t.Fatalf("%s: the block %s does not end", productionDoc, name)
	}
	return block
}

// runDoc runs the doc's block name with sh -e and the variables vars, the
// backlog command on the PATH, and returns its output; a failure fails t.
func runDoc(t *testing.T, name string, vars map[string]string) string {
	t.Helper()
	for _, tool := range docTools[name] {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed: %v", tool, err)
		}
	}
	block := docCommands(t, name)
	cmd := exec.Command("sh", "-e", "-c", block)
	cmd.Env = append(os.Environ(), "PATH="+backlogOnPath(t)+string(os.PathListSeparator)+os.Getenv("PATH"))
	for k, v := range vars {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("docs/production.md, %s: %v\n--- commands\n%s--- output\n%s", name, err, block, out)
	}
	return string(out)
}

// docTools are the programs each block needs besides sh and backlog.
var docTools = map[string][]string{
	"sqlite-backup":      {"sqlite3"},
	"sqlite-vacuum-into": {"sqlite3"},
	"sqlite-restore":     {"cp"},
	"pg-dump":            {"pg_dump"},
	"pg-restore":         {"pg_restore"},
	"mysql-dump":         {"mysql", "mysqldump", "sed"},
	"mysql-restore":      {"mysql"},
}

// enqueueJobs inserts n jobs of kind k into st.
func enqueueJobs(t *testing.T, st contract.Store, n int) {
	t.Helper()
	now := time.Now()
	ps := make([]core.InsertParams, n)
	for i := range ps {
		p, err := core.NewInsertRaw("k", []byte(fmt.Sprintf(`{"i":%d}`, i)), nil, now)
		if err != nil {
			t.Fatal(err)
		}
		ps[i] = p
	}
	if _, err := st.Insert(context.Background(), now, ps); err != nil {
		t.Fatal(err)
	}
}

// countStoreJobs counts the jobs of the store at db.
func countStoreJobs(t *testing.T, db string) int {
	t.Helper()
	st := openStore(t, db)
	defer st.Close()
	js, err := st.List(context.Background(), core.ListParams{Limit: 100000})
	if err != nil {
		t.Fatal(err)
	}
	return len(js)
}

const upToDate = "the newest; nothing pending"

// The SQLite online backup of docs/production.md, taken while a writer
// inserts jobs, holds every job inserted before it started and passes an
// integrity check; VACUUM INTO does the same; the restore commands put a
// backup in place and migrate status reads it.
func TestProductionDocSQLiteBackupRestore(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "jobs.db")
	db := "sqlite:" + path
	st := openStore(t, db)
	enqueueJobs(t, st, 100)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // the live writer
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
				enqueueJobs(t, st, 10)
			}
		}
	}()
	backup := filepath.Join(dir, "backup.db")
	out := runDoc(t, "sqlite-backup", map[string]string{"DB": path, "BACKUP": backup})
	vacuumed := filepath.Join(dir, "vacuumed.db")
	runDoc(t, "sqlite-vacuum-into", map[string]string{"DB": path, "BACKUP": vacuumed})
	close(stop)
	wg.Wait()
	if strings.TrimSpace(out) != "ok" {
		t.Fatalf("integrity check of the backup: %q", out)
	}
	total := countStoreJobs(t, db)
	for _, b := range []string{backup, vacuumed} {
		if n := countStoreJobs(t, "sqlite:"+b); n < 100 || n > total {
			t.Fatalf("%s holds %d jobs; want 100..%d", filepath.Base(b), n, total)
		}
	}
	st.Close()
	want := countStoreJobs(t, "sqlite:"+backup)
	out = runDoc(t, "sqlite-restore", map[string]string{"DB": path, "BACKUP": backup})
	if !strings.Contains(out, upToDate) {
		t.Fatalf("migrate status after the restore: %q", out)
	}
	if n := countStoreJobs(t, db); n != want {
		t.Fatalf("restored %d jobs; the backup holds %d", n, want)
	}
}

// pg_dump of the store's schema and pg_restore into a fresh database, as
// docs/production.md shows them, carry every job, and the restored schema
// is up to date.
func TestProductionDocPostgresBackupRestore(t *testing.T) {
	t.Parallel()
	src := dbtest.PostgresDSN(t)
	st := openStore(t, src)
	enqueueJobs(t, st, 250)
	st.Close()
	dump := filepath.Join(t.TempDir(), "backlog.dump")
	runDoc(t, "pg-dump", map[string]string{"PGURL": src, "SCHEMA": "backlog", "DUMP": dump})
	dst := dbtest.PostgresDSN(t)
	out := runDoc(t, "pg-restore", map[string]string{"RESTORE_PGURL": dst, "RESTORE_URL": dst, "DUMP": dump})
	if !strings.Contains(out, upToDate) {
		t.Fatalf("migrate status after the restore: %q", out)
	}
	if n := countStoreJobs(t, dst); n != 250 {
		t.Fatalf("restored %d jobs, want 250", n)
	}
	// The restored store takes new jobs: its id sequence came along.
	mustCLI(t, dst, "enqueue", "k", "{}")
	if n := countStoreJobs(t, dst); n != 251 {
		t.Fatalf("%d jobs after an enqueue into the restored store, want 251", n)
	}
}

// mysqldump of the prefixed tables and their restore into a fresh
// database, as docs/production.md shows them, carry every job; tables of
// the application with another prefix stay out of the dump.
func TestProductionDocMySQLBackupRestore(t *testing.T) {
	t.Parallel()
	dsn := dbtest.MySQLDSN(t)
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	host, port, ok := strings.Cut(cfg.Addr, ":")
	if !ok {
		port = "3306"
	}
	storeURL := func(c *mysql.Config) string {
		u := "mysql://" + c.User
		if c.Passwd != "" {
			u += ":" + c.Passwd
		}
		return u + "@" + c.Addr + "/" + c.DBName
	}
	src := storeURL(cfg)
	st := openStore(t, src)
	enqueueJobs(t, st, 250)
	st.Close()
	app, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer app.Close()
	if _, err := app.Exec("CREATE TABLE backlogx_app (id INT PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	dump := filepath.Join(t.TempDir(), "backlog.sql")
	vars := map[string]string{"MYSQL_HOST": host, "MYSQL_PORT": port, "MYSQL_USER": cfg.User, "MYSQL_DB": cfg.DBName, "PREFIX": "backlog_", "DUMP": dump}
	if cfg.Passwd != "" {
		vars["MYSQL_PWD"] = cfg.Passwd
	}
	runDoc(t, "mysql-dump", vars)
	b, err := os.ReadFile(dump)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "CREATE TABLE `backlog_jobs`") || strings.Contains(string(b), "backlogx_app") {
		t.Fatalf("the dump should hold backlog_jobs and not backlogx_app (%d bytes)", len(b))
	}
	dstCfg, err := mysql.ParseDSN(dbtest.MySQLDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	vars["RESTORE_DB"], vars["RESTORE_URL"] = dstCfg.DBName, storeURL(dstCfg)
	out := runDoc(t, "mysql-restore", vars)
	if !strings.Contains(out, upToDate) {
		t.Fatalf("migrate status after the restore: %q", out)
	}
	if n := countStoreJobs(t, vars["RESTORE_URL"]); n != 250 {
		t.Fatalf("restored %d jobs, want 250", n)
	}
}

// This binary on a SQLite schema one version ahead of it, whose next
// migration added a column to every backlog table (the version table
// aside), a table and an index: migrate applies nothing and says the
// schema is already at that version, migrate status says it is newer
// than this backlog's, and work runs a job to completion.
func TestProductionDocOldBinaryOnNewerSchema(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "jobs.db")
	db := "sqlite:" + path
	mustCLI(t, db, "migrate")
	ms := decodeJSON[migrationStatus](t, mustCLI(t, db, "migrate", "status", "-o", "json").stdout)
	raw, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := raw.Query("SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE 'backlog\\_%' ESCAPE '\\' AND name <> 'backlog_goose_db_version'")
	if err != nil {
		t.Fatal(err)
	}
	var tables []string
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			t.Fatal(err)
		}
		tables = append(tables, name)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	rows.Close()
	if len(tables) < 5 {
		t.Fatalf("backlog tables: %v", tables)
	}
	next := ms.Newest + 1
	stmts := []string{
		"CREATE TABLE backlog_future (id INTEGER PRIMARY KEY, note TEXT NOT NULL DEFAULT '')",
		"CREATE INDEX backlog_jobs_future ON backlog_jobs (future_note)",
		fmt.Sprintf("INSERT INTO backlog_goose_db_version (version_id, is_applied) VALUES (%d, 1)", next),
	}
	for i := len(tables) - 1; i >= 0; i-- {
		stmts = append([]string{"ALTER TABLE " + tables[i] + " ADD COLUMN future_note TEXT"}, stmts...)
	}
	for _, s := range stmts {
		if _, err := raw.Exec(s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	raw.Close()

	if out := mustCLI(t, db, "migrate").stdout; !strings.Contains(out, fmt.Sprintf("already at version %d", next)) {
		t.Fatalf("migrate on the newer schema: %q", out)
	}
	if out := mustCLI(t, db, "migrate", "status").stdout; !regexp.MustCompile(fmt.Sprintf(`version %d, newer than this backlog's %d`, next, ms.Newest)).MatchString(out) {
		t.Fatalf("migrate status on the newer schema: %q", out)
	}
	mustCLI(t, db, "enqueue", "k", `{"n":1}`)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r := startRun(t, ctx, "--db", db, "work", "--handler", "k=true", "--poll-interval", "50ms")
	st := openStore(t, db)
	defer st.Close()
	waitFor(t, 20*time.Second, "the job to complete", func() bool {
		js, err := st.List(context.Background(), core.ListParams{Limit: 10})
		return err == nil && len(js) == 1 && js[0].State == core.StateCompleted
	})
	cancel()
	if code := r.wait(t, 20*time.Second); code != 0 {
		t.Fatalf("work exited %d\n%s", code, r)
	}
}

// Every backlog_… metric docs/production.md names in its monitoring
// section is one that docs/metrics.md describes.
func TestProductionDocMetricNames(t *testing.T) {
	b, err := os.ReadFile(productionDoc)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	start, end := strings.Index(doc, "\n## Monitoring and alerts"), strings.Index(doc, "\n## Logs")
	if start < 0 || end < start {
		t.Fatal("docs/production.md has no Monitoring and alerts section before Logs")
	}
	m, err := os.ReadFile("../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	names := regexp.MustCompile("backlog_[a-z_]*[a-z]").FindAllString(doc[start:end], -1)
	if len(names) < 10 {
		t.Fatalf("the monitoring section names %d metrics; want at least 10", len(names))
	}
	for _, n := range names {
		base := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(n, "_bucket"), "_sum"), "_count")
		if !strings.Contains(string(m), "`"+base+"`") {
			t.Errorf("docs/production.md names %s; docs/metrics.md describes no %s", n, base)
		}
	}
}
