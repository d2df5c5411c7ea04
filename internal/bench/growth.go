package bench

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/core/contract"
	"github.com/jackc/pgx/v5"
)

// GrowthConfig describes a growth run: Rounds consecutive burn-downs of
// Jobs jobs each on one jobs table, completed jobs kept, so every round
// works on a table the previous rounds have filled. It shows what a
// burn-down costs as completed rows and dead row versions pile up, and
// whether the database's background maintenance (PostgreSQL's autovacuum
// and auto-analyze) helps or hurts.
type GrowthConfig struct {
	// Config is every round's burn-down (BurnDown); its Tune runs after
	// the retention and maintenance settings below are applied.
	Config
	// Rounds is the number of consecutive burn-downs; 0 = 5.
	Rounds int
	// Retention of finished jobs; nil = core.DefaultRetention (completed
	// jobs kept 24 h). Completed 0 deletes each job as it completes, as
	// BurnDown alone does.
	Retention *core.Retention
	// MaintenanceInterval is the worker client's (core.Config): 0 = the
	// engine's default, negative = no maintenance. Maintenance prunes
	// finished jobs past their retention, as in production.
	MaintenanceInterval time.Duration
	// Pause is the wait after each round before its table statistics are
	// sampled and the next round starts. On PostgreSQL a backend reports
	// its row counts to pg_stat_user_tables only every second or so (more
	// rarely while idle), so a pause of a second or two lets the figures
	// include the round just run.
	Pause time.Duration
	// Probe samples the jobs table before the first round and after each;
	// nil = CountProbe(store).
	Probe Probe
	// Reopen, if set, opens a new handle on the same database for each
	// round, which runs on it and closes it: every round then works
	// through new connections (new database sessions, with no plans
	// cached), as after a restart of the workers. nil = every round on
	// the store given to Growth.
	Reopen func(ctx context.Context) (contract.Store, error)
}

// Probe samples the jobs table.
type Probe interface {
	TableStats(ctx context.Context) (TableStats, error)
}

// ProbeFunc adapts a function to Probe.
type ProbeFunc func(ctx context.Context) (TableStats, error)

// TableStats calls f.
func (f ProbeFunc) TableStats(ctx context.Context) (TableStats, error) { return f(ctx) }

// TableStats is one sample of the jobs table. Counters the store cannot
// report are -1 (Rows is always known); times it cannot report are nil.
type TableStats struct {
	Rows int64 `json:"rows"` // rows in the jobs table, counted
	// The rest are PostgreSQL's pg_stat_user_tables and size functions.
	LiveTuples       int64      `json:"live_tuples"`        // n_live_tup (an estimate)
	DeadTuples       int64      `json:"dead_tuples"`        // n_dead_tup (an estimate)
	Updates          int64      `json:"updates"`            // n_tup_upd, cumulative
	HotUpdates       int64      `json:"hot_updates"`        // n_tup_hot_upd, cumulative
	Deletes          int64      `json:"deletes"`            // n_tup_del, cumulative
	Autovacuums      int64      `json:"autovacuums"`        // autovacuum_count, cumulative
	Vacuums          int64      `json:"vacuums"`            // vacuum_count (the store's own VACUUM), cumulative
	Autoanalyzes     int64      `json:"autoanalyzes"`       // autoanalyze_count, cumulative
	LastAutovacuum   *time.Time `json:"last_autovacuum"`    //
	LastAutoanalyze  *time.Time `json:"last_autoanalyze"`   //
	TableBytes       int64      `json:"table_bytes"`        // pg_table_size
	IndexBytes       int64      `json:"index_bytes"`        // pg_indexes_size
	ClaimIndexBytes  int64      `json:"claim_index_bytes"`  // the claim index alone
	ClaimIndexScans  int64      `json:"claim_index_scans"`  // its idx_scan, cumulative
	ClaimIndexReads  int64      `json:"claim_index_reads"`  // its idx_tup_read, cumulative
	ClaimIndexFetchs int64      `json:"claim_index_fetchs"` // its idx_tup_fetch, cumulative
}

// unknownStats is a TableStats with every optional counter unknown.
func unknownStats(rows int64) TableStats {
	return TableStats{Rows: rows, LiveTuples: -1, DeadTuples: -1, Updates: -1, HotUpdates: -1, Deletes: -1,
		Autovacuums: -1, Vacuums: -1, Autoanalyzes: -1, TableBytes: -1, IndexBytes: -1, ClaimIndexBytes: -1,
		ClaimIndexScans: -1, ClaimIndexReads: -1, ClaimIndexFetchs: -1}
}

// CountProbe samples any store: the number of jobs in every queue and
// state (contract.Store.Stats), nothing else.
func CountProbe(st contract.Store) Probe {
	return ProbeFunc(func(ctx context.Context) (TableStats, error) {
		qs, err := st.Stats(ctx)
		if err != nil {
			return TableStats{}, err
		}
		var n int64
		for _, q := range qs {
			for _, c := range q.Counts {
				n += int64(c)
			}
		}
		return unknownStats(n), nil
	})
}

// Querier is what PostgresProbe needs of a connection: *pgxpool.Pool,
// *pgx.Conn and pgx.Tx have it.
type Querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// PostgresProbe samples a PostgreSQL table schema.table and its claim index
// (schema.claimIndex; "" = none) through db: an exact row count and the
// table's line of pg_stat_user_tables, its sizes, and the claim index's
// line of pg_stat_all_indexes. backlog's table is <schema>.jobs with the
// claim index jobs_claim.
func PostgresProbe(db Querier, schema, table, claimIndex string) Probe {
	qt := pgx.Identifier{schema, table}.Sanitize()
	ci := "NULL::regclass"
	if claimIndex != "" {
		ci = "to_regclass(" + quoteLiteral(pgx.Identifier{schema, claimIndex}.Sanitize()) + ")"
	}
	q := `SELECT (SELECT count(*) FROM ` + qt + `),
		s.n_live_tup, s.n_dead_tup, s.n_tup_upd, s.n_tup_hot_upd, s.n_tup_del,
		s.autovacuum_count, s.vacuum_count, s.autoanalyze_count, s.last_autovacuum, s.last_autoanalyze,
		pg_table_size(s.relid), pg_indexes_size(s.relid),
		COALESCE(pg_relation_size(i.indexrelid), -1), COALESCE(i.idx_scan, -1),
		COALESCE(i.idx_tup_read, -1), COALESCE(i.idx_tup_fetch, -1)
	FROM pg_stat_user_tables s
	LEFT JOIN pg_stat_all_indexes i ON i.indexrelid = ` + ci + `
	WHERE s.relid = ` + quoteLiteral(qt) + `::regclass`
	return ProbeFunc(func(ctx context.Context) (TableStats, error) {
		var t TableStats
		err := db.QueryRow(ctx, q).Scan(&t.Rows, &t.LiveTuples, &t.DeadTuples, &t.Updates, &t.HotUpdates, &t.Deletes,
			&t.Autovacuums, &t.Vacuums, &t.Autoanalyzes, &t.LastAutovacuum, &t.LastAutoanalyze,
			&t.TableBytes, &t.IndexBytes, &t.ClaimIndexBytes, &t.ClaimIndexScans, &t.ClaimIndexReads, &t.ClaimIndexFetchs)
		if err != nil {
			return TableStats{}, fmt.Errorf("sample %s: %w", qt, err)
		}
		return t, nil
	})
}

// PostgresAutovacuum reports the server's autovacuum setting and the
// table's own autovacuum_enabled storage parameter (true unless the table
// turns it off). A run on a server or table with autovacuum off cannot show
// what autovacuum does to the rounds.
func PostgresAutovacuum(ctx context.Context, db Querier, schema, table string) (server, tableOn bool, err error) {
	qt := pgx.Identifier{schema, table}.Sanitize()
	err = db.QueryRow(ctx, `SELECT current_setting('autovacuum')::bool,
		NOT EXISTS (SELECT 1 FROM pg_class c, unnest(c.reloptions) o
			WHERE c.oid = to_regclass(`+quoteLiteral(qt)+`) AND lower(o) IN ('autovacuum_enabled=false', 'autovacuum_enabled=off'))`).Scan(&server, &tableOn)
	return server, tableOn, err
}

func quoteLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// GrowthRound is one round: the burn-down's figures, the table after it,
// and what changed during it.
type GrowthRound struct {
	Round   int       `json:"round"`
	Started time.Time `json:"started"`
	Result
	Table TableStats `json:"table"` // sampled after the round (and the pause)
	// Changes since the previous sample (-1 where unknown).
	Autovacuums int64 `json:"round_autovacuums"` // autovacuum runs on the table
	Vacuums     int64 `json:"round_vacuums"`     // the store's own VACUUM runs (contract.Vacuumer)
	// VacuumTime is the time the store's own vacuums took during the
	// round (store.vacuumed events of the benchmark's clients).
	VacuumTime   time.Duration `json:"round_vacuum_time"`
	Autoanalyzes int64         `json:"round_autoanalyzes"` // auto-analyze runs on the table
	HotPercent   float64       `json:"round_hot_pct"`      // HOT updates / updates
	// ClaimIndexReadsPerScan is index entries read per scan of the claim
	// index: dead and completed entries the claims step over show here.
	ClaimIndexReadsPerScan float64 `json:"round_claim_index_reads_per_scan"`
}

// GrowthResult is a whole growth run.
type GrowthResult struct {
	Before TableStats    `json:"before"` // the table before the first round
	Rounds []GrowthRound `json:"rounds"`
}

// GrowthHeader names the columns of GrowthRound.Line.
const GrowthHeader = "round\tjobs/s\tinsert/s\trows\tlive\tdead\tdead%\thot%\tclaim idx reads/scan\ttable+idx MB\tclaim idx MB\tautovacuum (round, last)\tautoanalyze (round, last)\tstore vacuums (round, s)"

// Line is the round as tab-separated columns (GrowthHeader).
func (r GrowthRound) Line() string {
	t := r.Table
	dead := "-"
	if t.DeadTuples >= 0 && t.LiveTuples >= 0 {
		dead = "0"
		if t.LiveTuples+t.DeadTuples > 0 {
			dead = fmt.Sprintf("%.0f", 100*float64(t.DeadTuples)/float64(t.LiveTuples+t.DeadTuples))
		}
	}
	cols := []string{
		fmt.Sprint(r.Round),
		fmt.Sprintf("%.0f", r.JobsPerSec),
		fmt.Sprintf("%.0f", float64(r.Jobs)/r.Insert.Seconds()),
		fmt.Sprint(t.Rows),
		count(t.LiveTuples), count(t.DeadTuples), dead,
		pct(r.HotPercent),
		ratio(r.ClaimIndexReadsPerScan),
		mb(t.TableBytes, t.IndexBytes), mb(t.ClaimIndexBytes),
		event(r.Autovacuums, t.LastAutovacuum), event(r.Autoanalyzes, t.LastAutoanalyze),
		vacuums(r.Vacuums, r.VacuumTime),
	}
	return strings.Join(cols, "\t")
}

func vacuums(n int64, took time.Duration) string {
	if n < 0 {
		return "-"
	}
	return fmt.Sprintf("+%d, %.1f", n, took.Seconds())
}

func count(n int64) string {
	if n < 0 {
		return "-"
	}
	return fmt.Sprint(n)
}

func pct(p float64) string {
	if p < 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f", p)
}

func ratio(p float64) string {
	if p < 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f", p)
}

func mb(n ...int64) string {
	var sum int64
	for _, v := range n {
		if v < 0 {
			return "-"
		}
		sum += v
	}
	return fmt.Sprintf("%.1f", float64(sum)/(1<<20))
}

func event(n int64, last *time.Time) string {
	if n < 0 {
		return "-"
	}
	s := fmt.Sprintf("+%d", n)
	if last != nil {
		s += " " + last.Local().Format("15:04:05")
	}
	return s
}

// delta is b-a, or -1 when either is unknown.
func delta(a, b int64) int64 {
	if a < 0 || b < 0 {
		return -1
	}
	return b - a
}

// Growth runs cfg.Rounds burn-downs (BurnDown) one after the other on st
// with completed jobs kept (cfg.Retention), samples the jobs table before
// the first round and after each (cfg.Probe), and calls each, if not nil,
// with every round as it ends. On an error the rounds done so far are
// returned with it.
func Growth(ctx context.Context, st contract.Store, cfg GrowthConfig, each func(GrowthRound)) (GrowthResult, error) {
	if cfg.Rounds <= 0 {
		cfg.Rounds = 5
	}
	ret := core.DefaultRetention
	if cfg.Retention != nil {
		ret = *cfg.Retention
	}
	probe := cfg.Probe
	if probe == nil {
		probe = CountProbe(st)
	}
	bc := cfg.Config
	tune := bc.Tune
	var vacuumNanos atomic.Int64 // store.vacuumed durations of the current round
	bc.Tune = func(c *core.Config) {
		r := ret
		c.Retention = &r
		c.MaintenanceInterval = cfg.MaintenanceInterval
		c.Observers = append(c.Observers, core.ObserverFunc(func(e core.Event) {
			if e.Kind == core.EventStoreVacuumed {
				vacuumNanos.Add(int64(e.Duration))
			}
		}))
		if tune != nil {
			tune(c)
		}
	}
	var res GrowthResult
	prev, err := probe.TableStats(ctx)
	if err != nil {
		return res, err
	}
	res.Before = prev
	for i := 1; i <= cfg.Rounds; i++ {
		start := time.Now()
		vacuumNanos.Store(0)
		r, err := growthRound(ctx, st, cfg.Reopen, bc)
		if err != nil {
			return res, fmt.Errorf("round %d: %w", i, err)
		}
		if cfg.Pause > 0 && !sleep(ctx, cfg.Pause) {
			return res, ctx.Err()
		}
		t, err := probe.TableStats(ctx)
		if err != nil {
			return res, fmt.Errorf("round %d: %w", i, err)
		}
		gr := GrowthRound{Round: i, Started: start, Result: r, Table: t,
			Autovacuums: delta(prev.Autovacuums, t.Autovacuums), Autoanalyzes: delta(prev.Autoanalyzes, t.Autoanalyzes),
			Vacuums: delta(prev.Vacuums, t.Vacuums), VacuumTime: time.Duration(vacuumNanos.Load()),
			HotPercent: -1, ClaimIndexReadsPerScan: -1}
		if upd, hot := delta(prev.Updates, t.Updates), delta(prev.HotUpdates, t.HotUpdates); upd > 0 && hot >= 0 {
			gr.HotPercent = 100 * float64(hot) / float64(upd)
		}
		if scans, reads := delta(prev.ClaimIndexScans, t.ClaimIndexScans), delta(prev.ClaimIndexReads, t.ClaimIndexReads); scans > 0 && reads >= 0 {
			gr.ClaimIndexReadsPerScan = float64(reads) / float64(scans)
		}
		res.Rounds = append(res.Rounds, gr)
		if each != nil {
			each(gr)
		}
		prev = t
	}
	return res, nil
}

// growthRound runs one burn-down on st, or on a store from reopen.
func growthRound(ctx context.Context, st contract.Store, reopen func(context.Context) (contract.Store, error), cfg Config) (Result, error) {
	if reopen == nil {
		return BurnDown(ctx, st, cfg)
	}
	fresh, err := reopen(ctx)
	if err != nil {
		return Result{}, err
	}
	defer fresh.Close()
	return BurnDown(ctx, fresh, cfg)
}

// String is the run as a table (GrowthHeader, then a line per round).
func (r GrowthResult) String() string {
	var b strings.Builder
	b.WriteString(GrowthHeader + "\n")
	for _, gr := range r.Rounds {
		b.WriteString(gr.Line() + "\n")
	}
	return b.String()
}
