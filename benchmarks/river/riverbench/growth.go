package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// tableStats is one sample of river_job, with the JSON names and meaning
// of backlog's bench.TableStats (internal/bench/growth.go), so the two
// growth runs can be read side by side. The claim index is River's
// river_job_prioritized_fetching_index.
type tableStats struct {
	Rows             int64      `json:"rows"`
	LiveTuples       int64      `json:"live_tuples"`
	DeadTuples       int64      `json:"dead_tuples"`
	Updates          int64      `json:"updates"`
	HotUpdates       int64      `json:"hot_updates"`
	Deletes          int64      `json:"deletes"`
	Autovacuums      int64      `json:"autovacuums"`
	Autoanalyzes     int64      `json:"autoanalyzes"`
	LastAutovacuum   *time.Time `json:"last_autovacuum"`
	LastAutoanalyze  *time.Time `json:"last_autoanalyze"`
	TableBytes       int64      `json:"table_bytes"`
	IndexBytes       int64      `json:"index_bytes"`
	ClaimIndexBytes  int64      `json:"claim_index_bytes"`
	ClaimIndexScans  int64      `json:"claim_index_scans"`
	ClaimIndexReads  int64      `json:"claim_index_reads"`
	ClaimIndexFetchs int64      `json:"claim_index_fetchs"`
}

// growthRound has the JSON shape of backlog's bench.GrowthRound.
type growthRound struct {
	Round   int       `json:"round"`
	Started time.Time `json:"started"`
	burnResult
	Table                  tableStats `json:"table"`
	Autovacuums            int64      `json:"round_autovacuums"`
	Autoanalyzes           int64      `json:"round_autoanalyzes"`
	HotPercent             float64    `json:"round_hot_pct"`
	ClaimIndexReadsPerScan float64    `json:"round_claim_index_reads_per_scan"`
}

type growthResult struct {
	Before tableStats    `json:"before"`
	Rounds []growthRound `json:"rounds"`
}

// growthHeader and line print the columns of `backlog bench growth`.
const growthHeader = "round\tjobs/s\tinsert/s\trows\tlive\tdead\tdead%\thot%\tclaim idx reads/scan\ttable+idx MB\tclaim idx MB\tautovacuum (round, last)\tautoanalyze (round, last)"

func (r growthRound) line() string {
	t := r.Table
	dead := "0"
	if t.LiveTuples+t.DeadTuples > 0 {
		dead = fmt.Sprintf("%.0f", 100*float64(t.DeadTuples)/float64(t.LiveTuples+t.DeadTuples))
	}
	opt := func(v float64, f string) string {
		if v < 0 {
			return "-"
		}
		return fmt.Sprintf(f, v)
	}
	ev := func(n int64, last *time.Time) string {
		s := fmt.Sprintf("+%d", n)
		if last != nil {
			s += " " + last.Local().Format("15:04:05")
		}
		return s
	}
	return strings.Join([]string{
		fmt.Sprint(r.Round), fmt.Sprintf("%.0f", r.JobsPerSec), fmt.Sprintf("%.0f", float64(r.Jobs)/r.Insert.Seconds()),
		fmt.Sprint(t.Rows), fmt.Sprint(t.LiveTuples), fmt.Sprint(t.DeadTuples), dead,
		opt(r.HotPercent, "%.0f"), opt(r.ClaimIndexReadsPerScan, "%.1f"),
		fmt.Sprintf("%.1f", float64(t.TableBytes+t.IndexBytes)/(1<<20)), fmt.Sprintf("%.1f", float64(t.ClaimIndexBytes)/(1<<20)),
		ev(r.Autovacuums, t.LastAutovacuum), ev(r.Autoanalyzes, t.LastAutoanalyze),
	}, "\t")
}

// sampleRiverJob reads river_job's row count, statistics and sizes.
func sampleRiverJob(ctx context.Context, pool *pgxpool.Pool, schema string) (tableStats, error) {
	if schema == "" {
		if err := pool.QueryRow(ctx, "SELECT current_schema()").Scan(&schema); err != nil {
			return tableStats{}, err
		}
	}
	lit := func(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
	qt := pgx.Identifier{schema, "river_job"}.Sanitize()
	ci := pgx.Identifier{schema, "river_job_prioritized_fetching_index"}.Sanitize()
	var t tableStats
	err := pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM `+qt+`),
		s.n_live_tup, s.n_dead_tup, s.n_tup_upd, s.n_tup_hot_upd, s.n_tup_del,
		s.autovacuum_count, s.autoanalyze_count, s.last_autovacuum, s.last_autoanalyze,
		pg_table_size(s.relid), pg_indexes_size(s.relid),
		COALESCE(pg_relation_size(i.indexrelid), -1), COALESCE(i.idx_scan, -1),
		COALESCE(i.idx_tup_read, -1), COALESCE(i.idx_tup_fetch, -1)
	FROM pg_stat_user_tables s
	LEFT JOIN pg_stat_all_indexes i ON i.indexrelid = to_regclass(`+lit(ci)+`)
	WHERE s.relid = `+lit(qt)+`::regclass`).Scan(&t.Rows, &t.LiveTuples, &t.DeadTuples, &t.Updates, &t.HotUpdates, &t.Deletes,
		&t.Autovacuums, &t.Autoanalyzes, &t.LastAutovacuum, &t.LastAutoanalyze,
		&t.TableBytes, &t.IndexBytes, &t.ClaimIndexBytes, &t.ClaimIndexScans, &t.ClaimIndexReads, &t.ClaimIndexFetchs)
	if err != nil {
		return tableStats{}, fmt.Errorf("sample %s: %w", qt, err)
	}
	return t, nil
}

// runGrowth runs --rounds burn-downs one after the other on one river_job
// table without emptying it in between: River keeps completed jobs (its
// JobCleaner deletes them after CompletedJobRetentionPeriod, 24 h by
// default), as backlog's `bench growth` keeps them with the engine's
// default retention. After each round (and --pause) it samples the table.
func runGrowth(args []string) error {
	var o opts
	var rounds int
	var pause time.Duration
	var output string
	fs := flag.NewFlagSet("growth", flag.ExitOnError)
	fs.StringVar(&o.url, "database-url", "", "postgres:// URL of the database River uses")
	fs.StringVar(&o.schema, "schema", "", "schema for River's tables (created, migrated and emptied once at the start)")
	fs.IntVar(&o.jobs, "jobs", 100000, "jobs per round")
	fs.IntVar(&rounds, "rounds", 5, "consecutive burn-downs")
	fs.IntVar(&o.workers, "workers", 100, "MaxWorkers of the benchmark queue")
	fs.IntVar(&o.insertBatch, "insert-batch", 1000, "jobs per InsertManyFast call")
	fs.DurationVar(&o.fetchCooldown, "fetch-cooldown", 0, "River Config.FetchCooldown (0 = River's default, 100ms)")
	fs.DurationVar(&o.fetchPoll, "fetch-poll-interval", 0, "River Config.FetchPollInterval (0 = River's default, 1s)")
	fs.DurationVar(&pause, "pause", 2*time.Second, "wait after each round before sampling the table and starting the next")
	fs.StringVar(&output, "o", "table", "output: table (a line per round as it ends) or json (at the end)")
	fs.DurationVar(&o.timeout, "timeout", 60*time.Minute, "give up after this long")
	_ = fs.Parse(args)
	if o.url == "" {
		return errors.New("--database-url is required")
	}
	if output != "table" && output != "json" {
		return errors.New("-o must be table or json")
	}
	ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
	defer cancel()
	pool, err := pgxpool.New(ctx, o.url)
	if err != nil {
		return err
	}
	defer pool.Close()
	if err := prepareSchema(ctx, pool, o.schema); err != nil {
		return err
	}
	var on bool
	if err := pool.QueryRow(ctx, "SELECT current_setting('autovacuum')::bool").Scan(&on); err == nil && !on {
		fmt.Fprintln(os.Stderr, "WARNING: autovacuum is OFF on this PostgreSQL server: dead rows are never vacuumed in the background, so these figures say nothing about a server with production defaults")
	}
	prev, err := sampleRiverJob(ctx, pool, o.schema)
	if err != nil {
		return err
	}
	res := growthResult{Before: prev}
	var tw *streamTable
	if output == "table" {
		fmt.Printf("River: growth, %d rounds × %d jobs, %d workers, completed jobs kept by River's defaults\n", rounds, o.jobs, o.workers)
		tw = newStreamTable(growthHeader)
	}
	for i := 1; i <= rounds; i++ {
		start := time.Now()
		r, err := burnDown(ctx, pool, o)
		if err != nil {
			return fmt.Errorf("round %d: %w", i, err)
		}
		select {
		case <-time.After(pause):
		case <-ctx.Done():
			return ctx.Err()
		}
		t, err := sampleRiverJob(ctx, pool, o.schema)
		if err != nil {
			return fmt.Errorf("round %d: %w", i, err)
		}
		gr := growthRound{Round: i, Started: start, burnResult: r, Table: t,
			Autovacuums: t.Autovacuums - prev.Autovacuums, Autoanalyzes: t.Autoanalyzes - prev.Autoanalyzes,
			HotPercent: -1, ClaimIndexReadsPerScan: -1}
		if upd := t.Updates - prev.Updates; upd > 0 {
			gr.HotPercent = 100 * float64(t.HotUpdates-prev.HotUpdates) / float64(upd)
		}
		if scans := t.ClaimIndexScans - prev.ClaimIndexScans; scans > 0 && prev.ClaimIndexScans >= 0 {
			gr.ClaimIndexReadsPerScan = float64(t.ClaimIndexReads-prev.ClaimIndexReads) / float64(scans)
		}
		res.Rounds = append(res.Rounds, gr)
		if tw != nil {
			tw.line(gr.line())
		}
		prev = t
	}
	if output == "json" {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(res)
	}
	return nil
}

// streamTable prints tab-separated rows as they come, each column as wide
// as the widest value so far (as `backlog bench growth` does).
type streamTable struct{ widths []int }

func newStreamTable(header string) *streamTable {
	t := &streamTable{}
	t.line(header)
	return t
}

func (t *streamTable) line(s string) {
	cols := strings.Split(s, "\t")
	var b strings.Builder
	for i, c := range cols {
		if i == len(t.widths) {
			t.widths = append(t.widths, 0)
		}
		t.widths[i] = max(t.widths[i], utf8.RuneCountInString(c))
		if i == len(cols)-1 {
			b.WriteString(c)
			break
		}
		b.WriteString(c + strings.Repeat(" ", t.widths[i]-utf8.RuneCountInString(c)+2))
	}
	fmt.Println(b.String())
}
