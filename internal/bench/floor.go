package bench

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Dialects of FloorDB.
const (
	DialectPostgres = "postgres"
	DialectMySQL    = "mysql" // MySQL and MariaDB
	DialectSQLite   = "sqlite"
)

// FloorDB is the database a floor run uses: the store's own connections.
type FloorDB struct {
	Dialect string        // DialectPostgres, DialectMySQL or DialectSQLite
	Pool    *pgxpool.Pool // PostgreSQL
	DB      *sql.DB       // MySQL, SQLite
	// Schema (PostgreSQL) holds the scratch table; Prefix (MySQL,
	// SQLite) starts its name.
	Schema, Prefix string
}

// FloorTable is the scratch table's name without schema or prefix.
const FloorTable = "floor_jobs"

// Table is the scratch table's qualified name: <schema>.floor_jobs on
// PostgreSQL, <prefix>floor_jobs elsewhere.
func (d FloorDB) Table() string {
	if d.Dialect == DialectPostgres {
		return d.Schema + "." + FloorTable
	}
	return d.Prefix + FloorTable
}

// FloorConfig describes one floor run.
type FloorConfig struct {
	Jobs int // jobs inserted, then claimed and completed
	// Claimers is the number of goroutines claiming and completing
	// concurrently; 0 = 4 (always 1 on SQLite, which has one writer).
	Claimers int
	// Batch is the jobs per insert statement and per claim; 0 = 1,000.
	Batch int
	// Keep leaves the scratch table in place after the run (for
	// inspection); by default it is dropped.
	Keep bool
	// Server says where the database server runs (ServerOf the store
	// URL), for the result's split of CPU between this process and the
	// server; with the zero Server the server's CPU is omitted.
	Server Server
}

// FloorResult is one floor run's measurements.
type FloorResult struct {
	Dialect    string        `json:"dialect"`
	Claimers   int           `json:"claimers"`
	Batch      int           `json:"batch"`
	Jobs       int           `json:"jobs"`
	Insert     time.Duration `json:"insert_ns"`    // time to insert every job
	Work       time.Duration `json:"burndown_ns"`  // from the first claim to the last completion
	JobsPerSec float64       `json:"jobs_per_sec"` // Jobs / Work
	// Claims is the number of claim statements that returned jobs.
	Claims int64 `json:"claims"`
	// CPU is the machine's CPU use during the claims and completions (nil
	// off Linux).
	CPU *CPU `json:"machine_cpu,omitempty"`
	// ProcCPU splits that CPU between this process and the database
	// server (nil off Linux).
	*ProcCPU
}

func (r FloorResult) String() string {
	return fmt.Sprintf("floor (%s, minimal table, %d claimers × %d): %d jobs: insert %s (%.0f/s), claim and complete %s (%.0f jobs/s%s%s)",
		r.Dialect, r.Claimers, r.Batch, r.Jobs, r.Insert.Round(time.Millisecond), float64(r.Jobs)/r.Insert.Seconds(),
		r.Work.Round(time.Millisecond), r.JobsPerSec, cpuText(r.CPU, int64(r.Jobs), "completed"), procText(r.ProcCPU))
}

// floorSQL is one dialect's statements; the table is %[1]s.
type floorSQL struct {
	create []string
	drop   string
	// insert inserts n jobs of queue 'floor' with args '{}' and run_at now.
	insert func(ctx context.Context, n int) error
	// claim marks up to n pending jobs running and returns their ids;
	// complete marks the jobs of ids completed.
	claim    func(ctx context.Context, n int) ([]int64, error)
	complete func(ctx context.Context, ids []int64) error
	// count returns the number of jobs in state.
	count func(ctx context.Context, state string) (int64, error)
}

// Floor measures the least work a claim-and-complete queue can do on the
// database of d: a scratch table with the fewest columns a queue needs
// (id, queue, state, run_at, args) and one index on pending jobs in claim
// order (partial where the database has partial indexes: not on
// MySQL/MariaDB, whose index leads with state instead); cfg.Jobs jobs
// inserted in batches, then claimed and completed in batches by
// cfg.Claimers goroutines with plain SQL:
//
//   - PostgreSQL: UPDATE … WHERE id IN (SELECT … ORDER BY run_at, id
//     LIMIT n FOR UPDATE SKIP LOCKED) RETURNING id, then UPDATE … SET
//     state = 'completed' WHERE id = ANY($1);
//   - MySQL/MariaDB: in a transaction, SELECT id … FOR UPDATE SKIP LOCKED
//     and UPDATE … SET state = 'running'; then UPDATE … 'completed'
//     WHERE id IN (…);
//   - SQLite: one claimer, UPDATE … WHERE id IN (SELECT … LIMIT n)
//     RETURNING id, then UPDATE … 'completed' WHERE id IN (…).
//
// The table (FloorDB.Table) is dropped first if a previous run left it,
// and at the end unless cfg.Keep. Floor fails when a job is claimed twice
// or the run ends with other than cfg.Jobs jobs completed.
func Floor(ctx context.Context, d FloorDB, cfg FloorConfig) (FloorResult, error) {
	if cfg.Jobs < 0 {
		return FloorResult{}, fmt.Errorf("floor: jobs %d < 0", cfg.Jobs)
	}
	if cfg.Claimers <= 0 {
		cfg.Claimers = 4
	}
	if cfg.Batch <= 0 {
		cfg.Batch = 1000
	}
	q, err := d.statements()
	if err != nil {
		return FloorResult{}, err
	}
	if d.Dialect == DialectSQLite {
		cfg.Claimers = 1
	}
	res := FloorResult{Dialect: d.Dialect, Claimers: cfg.Claimers, Batch: cfg.Batch, Jobs: cfg.Jobs}
	if err := d.exec(ctx, q.drop); err != nil {
		return res, fmt.Errorf("floor: drop %s: %w", d.Table(), err)
	}
	for _, s := range q.create {
		if err := d.exec(ctx, s); err != nil {
			return res, fmt.Errorf("floor: create %s: %w", d.Table(), err)
		}
	}
	if !cfg.Keep {
		defer func() { _ = d.exec(context.WithoutCancel(ctx), q.drop) }()
	}

	t0 := time.Now()
	for left := cfg.Jobs; left > 0; {
		n := min(left, cfg.Batch)
		if err := q.insert(ctx, n); err != nil {
			return res, fmt.Errorf("floor: insert: %w", err)
		}
		left -= n
	}
	res.Insert = time.Since(t0)
	if cfg.Jobs == 0 {
		return res, nil
	}

	var (
		mu      sync.Mutex
		seen    = make(map[int64]struct{}, cfg.Jobs)
		claimed atomic.Int64
		claims  atomic.Int64
		wg      sync.WaitGroup
		errMu   sync.Mutex
		first   error
	)
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	fail := func(err error) {
		errMu.Lock()
		if first == nil {
			first = err
		}
		errMu.Unlock()
		cancel()
	}
	total := int64(cfg.Jobs)
	cpu0 := markCPU()
	proc0 := markProcs(cfg.Server.Procs)
	t1 := time.Now()
	for range cfg.Claimers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var idle time.Time
			for claimed.Load() < total && runCtx.Err() == nil {
				ids, err := q.claim(runCtx, cfg.Batch)
				if err != nil {
					fail(fmt.Errorf("floor: claim: %w", err))
					return
				}
				if len(ids) == 0 {
					// The rest are locked by other claimers, or gone.
					if idle.IsZero() {
						idle = time.Now()
					} else if time.Since(idle) > 10*time.Second {
						fail(fmt.Errorf("floor: %d of %d jobs claimed, and no more to claim for 10s", claimed.Load(), total))
						return
					}
					time.Sleep(time.Millisecond)
					continue
				}
				idle = time.Time{}
				mu.Lock()
				for _, id := range ids {
					if _, dup := seen[id]; dup {
						mu.Unlock()
						fail(fmt.Errorf("floor: job %d claimed twice", id))
						return
					}
					seen[id] = struct{}{}
				}
				mu.Unlock()
				if err := q.complete(runCtx, ids); err != nil {
					fail(fmt.Errorf("floor: complete: %w", err))
					return
				}
				claims.Add(1)
				claimed.Add(int64(len(ids)))
			}
		}()
	}
	wg.Wait()
	if first != nil {
		return res, first
	}
	if err := ctx.Err(); err != nil {
		return res, fmt.Errorf("floor: %d of %d jobs done: %w", claimed.Load(), total, err)
	}
	res.Work = time.Since(t1)
	res.CPU = cpu0.since()
	res.ProcCPU = proc0.since(cfg.Server, total)
	res.JobsPerSec = float64(cfg.Jobs) / res.Work.Seconds()
	res.Claims = claims.Load()
	done, err := q.count(ctx, "completed")
	if err != nil {
		return res, fmt.Errorf("floor: count: %w", err)
	}
	if done != total || claimed.Load() != total {
		return res, fmt.Errorf("floor: %d jobs claimed and %d completed, want %d", claimed.Load(), done, total)
	}
	return res, nil
}

// exec runs one statement without arguments.
func (d FloorDB) exec(ctx context.Context, s string) error {
	if d.Dialect == DialectPostgres {
		_, err := d.Pool.Exec(ctx, s)
		return err
	}
	_, err := d.DB.ExecContext(ctx, s)
	return err
}

func (d FloorDB) statements() (floorSQL, error) {
	t := d.Table()
	switch d.Dialect {
	case DialectPostgres:
		if d.Pool == nil {
			return floorSQL{}, errors.New("floor: PostgreSQL without a pool")
		}
		return d.postgres(t), nil
	case DialectMySQL:
		if d.DB == nil {
			return floorSQL{}, errors.New("floor: MySQL without a database")
		}
		return d.mysql(t), nil
	case DialectSQLite:
		if d.DB == nil {
			return floorSQL{}, errors.New("floor: SQLite without a database")
		}
		return d.sqlite(t), nil
	}
	return floorSQL{}, fmt.Errorf("floor: no floor for the dialect %q (postgres, mysql and sqlite have one)", d.Dialect)
}

func (d FloorDB) postgres(t string) floorSQL {
	p := d.Pool
	claimSQL := `UPDATE ` + t + ` SET state = 'running' WHERE id IN (
		SELECT id FROM ` + t + ` WHERE queue = 'floor' AND state = 'available' AND run_at <= now()
		ORDER BY run_at, id LIMIT $1 FOR UPDATE SKIP LOCKED) RETURNING id`
	return floorSQL{
		create: []string{
			`CREATE TABLE ` + t + ` (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, queue text NOT NULL,
				state text NOT NULL DEFAULT 'available', run_at timestamptz NOT NULL DEFAULT now(), args jsonb NOT NULL)`,
			`CREATE INDEX ` + FloorTable + `_claim ON ` + t + ` (queue, run_at, id) WHERE state = 'available'`,
		},
		drop: `DROP TABLE IF EXISTS ` + t,
		insert: func(ctx context.Context, n int) error {
			args := make([]string, n)
			for i := range args {
				args[i] = `{}`
			}
			_, err := p.Exec(ctx, `INSERT INTO `+t+` (queue, args) SELECT 'floor', a FROM unnest($1::jsonb[]) a`, args)
			return err
		},
		claim: func(ctx context.Context, n int) ([]int64, error) {
			rows, err := p.Query(ctx, claimSQL, n)
			if err != nil {
				return nil, err
			}
			defer rows.Close()
			var ids []int64
			for rows.Next() {
				var id int64
				if err := rows.Scan(&id); err != nil {
					return nil, err
				}
				ids = append(ids, id)
			}
			return ids, rows.Err()
		},
		complete: func(ctx context.Context, ids []int64) error {
			_, err := p.Exec(ctx, `UPDATE `+t+` SET state = 'completed' WHERE id = ANY($1)`, ids)
			return err
		},
		count: func(ctx context.Context, state string) (n int64, err error) {
			err = p.QueryRow(ctx, `SELECT count(*) FROM `+t+` WHERE state = $1`, state).Scan(&n)
			return n, err
		},
	}
}

// inList is "(?,?,…)" with n marks, and ids as arguments.
func inList(ids []int64) (string, []any) {
	args := make([]any, len(ids))
	for i, id := range ids {
		args[i] = id
	}
	return "(?" + strings.Repeat(",?", len(ids)-1) + ")", args
}

// sqlInsert inserts n rows of ('floor', run_at, '{}') with one statement.
func sqlInsert(ctx context.Context, db *sql.DB, t string, n int, now any) error {
	var b strings.Builder
	b.WriteString(`INSERT INTO ` + t + ` (queue, run_at, args) VALUES `)
	args := make([]any, 0, 2*n)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`('floor', ?, ?)`)
		args = append(args, now, `{}`)
	}
	_, err := db.ExecContext(ctx, b.String(), args...)
	return err
}

func scanIDs(rows *sql.Rows) ([]int64, error) {
	defer rows.Close()
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, rows.Err()
}

func sqlComplete(ctx context.Context, db *sql.DB, t string, ids []int64) error {
	in, args := inList(ids)
	_, err := db.ExecContext(ctx, `UPDATE `+t+` SET state = 'completed' WHERE id IN `+in, args...)
	return err
}

func sqlCount(ctx context.Context, db *sql.DB, t, state string) (n int64, err error) {
	err = db.QueryRowContext(ctx, `SELECT count(*) FROM `+t+` WHERE state = ?`, state).Scan(&n)
	return n, err
}

func (d FloorDB) mysql(t string) floorSQL {
	db := d.DB
	return floorSQL{
		create: []string{
			// No partial indexes: the claim index leads with state.
			`CREATE TABLE ` + t + ` (id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY, queue VARCHAR(128) NOT NULL,
				state VARCHAR(16) NOT NULL DEFAULT 'available', run_at DATETIME(6) NOT NULL, args JSON NOT NULL,
				INDEX ` + t + `_claim (state, queue, run_at, id)) ENGINE=InnoDB`,
		},
		drop: `DROP TABLE IF EXISTS ` + t,
		insert: func(ctx context.Context, n int) error {
			return sqlInsert(ctx, db, t, n, time.Now().UTC())
		},
		claim: func(ctx context.Context, n int) (ids []int64, err error) {
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				return nil, err
			}
			defer func() {
				if err != nil {
					_ = tx.Rollback()
				}
			}()
			rows, err := tx.QueryContext(ctx, `SELECT id FROM `+t+` WHERE state = 'available' AND queue = 'floor' AND run_at <= ?
				ORDER BY run_at, id LIMIT ? FOR UPDATE SKIP LOCKED`, time.Now().UTC(), n)
			if err != nil {
				return nil, err
			}
			if ids, err = scanIDs(rows); err != nil {
				return nil, err
			}
			if len(ids) > 0 {
				in, args := inList(ids)
				if _, err = tx.ExecContext(ctx, `UPDATE `+t+` SET state = 'running' WHERE id IN `+in, args...); err != nil {
					return nil, err
				}
			}
			return ids, tx.Commit()
		},
		complete: func(ctx context.Context, ids []int64) error { return sqlComplete(ctx, db, t, ids) },
		count:    func(ctx context.Context, state string) (int64, error) { return sqlCount(ctx, db, t, state) },
	}
}

func (d FloorDB) sqlite(t string) floorSQL {
	db := d.DB
	return floorSQL{
		create: []string{
			`CREATE TABLE ` + t + ` (id INTEGER PRIMARY KEY, queue TEXT NOT NULL, state TEXT NOT NULL DEFAULT 'available',
				run_at INTEGER NOT NULL, args TEXT NOT NULL)`,
			`CREATE INDEX ` + t + `_claim ON ` + t + ` (queue, run_at, id) WHERE state = 'available'`,
		},
		drop: `DROP TABLE IF EXISTS ` + t,
		insert: func(ctx context.Context, n int) error {
			return sqlInsert(ctx, db, t, n, time.Now().UnixMicro())
		},
		claim: func(ctx context.Context, n int) ([]int64, error) {
			rows, err := db.QueryContext(ctx, `UPDATE `+t+` SET state = 'running' WHERE id IN (
				SELECT id FROM `+t+` WHERE queue = 'floor' AND state = 'available' AND run_at <= ?
				ORDER BY run_at, id LIMIT ?) RETURNING id`, time.Now().UnixMicro(), n)
			if err != nil {
				return nil, err
			}
			return scanIDs(rows)
		},
		complete: func(ctx context.Context, ids []int64) error { return sqlComplete(ctx, db, t, ids) },
		count:    func(ctx context.Context, state string) (int64, error) { return sqlCount(ctx, db, t, state) },
	}
}
