package cli

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/backlogq/backlog/core/contract"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spf13/cobra"

	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/internal/bench"
	"github.com/backlogq/backlog/internal/dbserver"
)

// pgStore is what bench needs of the PostgreSQL store (store/postgres) to
// read the server's statistics about its tables.
type pgStore interface {
	Pool() *pgxpool.Pool
	Schema() string
}

// privatePG are the flags of a private PostgreSQL server for bench.
type privatePG struct {
	on       bool
	settings []string // name=value
	params   string   // store URL query parameters
}

// newBenchCmd measures the engine on the store named by --db. It writes
// jobs of kind bench.noop into its own queues; run it on a scratch
// database.
func (a *app) newBenchCmd() *cobra.Command {
	var (
		jobs, latencyJobs, growthJobs                     int // --jobs of burndown, latency, growth
		workers, maxClaim, claimAhead, producers, batch   int
		rounds                                            int
		backlogCap, rate                                  int
		reopen, analyzeEmpty                              bool
		duration, interval, poll, retention, maint, pause time.Duration
		ppg                                               privatePG
		cpuProfile                                        string
	)
	tune := func(c *core.Config) {
		if maxClaim > 0 {
			c.MaxClaim = maxClaim
		}
		if poll > 0 {
			c.PollInterval = poll
		}
		for name, q := range c.Queues {
			q.ClaimAhead = claimAhead
			c.Queues[name] = q
		}
	}
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure throughput and wake-up latency on a store (use a scratch database)",
		Long: `bench measures the whole engine (claims, handler executions, batched
finishes) with no-op jobs on the store named by --db (or $BACKLOG_DB); with
neither, on a temporary SQLite file that is removed afterwards:

  burndown  insert --jobs jobs, then time how fast the workers drain them
  steady    producers and workers together for --duration
  latency   idle workers; enqueue one job every --interval and time
            enqueue → handler start (through the store's notifications)
  floor     the same burn-down with plain SQL on a minimal table of the
            store's database: the least a queue can do there
  growth    --rounds burn-downs one after the other on one table with
            completed jobs kept (--retention), and the table after each:
            rows, dead rows, autovacuum and auto-analyze (PostgreSQL)

burndown, steady and latency use the queues "bench", "steady" and "latency"
and delete the jobs they complete; growth keeps them in "bench".

--private-postgres runs on a new PostgreSQL cluster (initdb in a temporary
directory, server defaults, autovacuum on) instead of --db, and removes it
afterwards; with-postgres runs any command next to such a cluster. On a
PostgreSQL server with autovacuum off, bench warns: such a server never
shows what autovacuum does to a table of jobs. Figures for this project's
machines are in docs/benchmarks.md.`,
		Args: noArgs,
		RunE: helpOrUnknown,
	}
	pf := cmd.PersistentFlags()
	pf.IntVar(&workers, "workers", 100, "MaxWorkers of the benchmark queue")
	pf.IntVar(&maxClaim, "max-claim", 0, "jobs per claim at most (0 = the engine default)")
	pf.IntVar(&claimAhead, "claim-ahead", 0, "claimed jobs the benchmark queue may hold waiting for a slot (core.QueueConfig.ClaimAhead; 0 = none, the default; -1 = adapt to the jobs' length)")
	pf.DurationVar(&poll, "poll-interval", 0, "idle queues' poll interval (0 = the engine default, 1s)")
	pf.BoolVar(&ppg.on, "private-postgres", false, "run on a private PostgreSQL cluster made for the run (initdb; needs PostgreSQL's server programs) instead of --db")
	pf.StringArrayVar(&ppg.settings, "pg-set", nil, "server setting name=value of the private PostgreSQL (repeatable), e.g. autovacuum=off or fsync=on")
	pf.StringVar(&ppg.params, "pg-params", "", "store URL query parameters on the private PostgreSQL, e.g. strategy=optimistic&pool_max_conns=8")
	pf.StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of this process over the measured run to FILE (go tool pprof FILE); on SQLite it holds the database's work too, which runs in-process")

	// storeURL is the URL of the store a subcommand runs on.
	var storeURL string
	run := func(name string, fn func(cmd *cobra.Command, st contract.Store) (fmt.Stringer, error)) *cobra.Command {
		return &cobra.Command{
			Use:  name,
			Args: noArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				return a.withBenchStore(cmd.Context(), ppg, func(st contract.Store, u string) error {
					storeURL = u
					stop, err := startCPUProfile(cpuProfile)
					if err != nil {
						return err
					}
					res, err := fn(cmd, st)
					if perr := stop(); err == nil && perr != nil {
						return perr
					}
					if err != nil {
						return err
					}
					if a.jsonOutput() {
						return writeJSON(a.env.stdout, res)
					}
					fmt.Fprintf(a.env.stdout, "%s: %s\n", redactURL(u), res)
					return nil
				})
			},
		}
	}
	burn := run("burndown", func(cmd *cobra.Command, st contract.Store) (fmt.Stringer, error) {
		if analyzeEmpty {
			if err := analyzeEmptyTable(cmd.Context(), st); err != nil {
				return nil, err
			}
		}
		return bench.BurnDown(cmd.Context(), st, bench.Config{Jobs: jobs, Workers: workers, Tune: tune, Server: bench.ServerOf(storeURL)})
	})
	burn.Short = "Insert --jobs no-op jobs, then time how fast they are worked off"
	burn.Flags().IntVar(&jobs, "jobs", 100000, "jobs to insert and burn down")
	burn.Flags().BoolVar(&analyzeEmpty, "analyze-empty", false, "PostgreSQL: ANALYZE the jobs table while it is still empty, so the planner believes it holds no rows when the jobs arrive")

	steady := run("steady", func(cmd *cobra.Command, st contract.Store) (fmt.Stringer, error) {
		return bench.Steady(cmd.Context(), st, bench.SteadyConfig{Duration: duration, Producers: producers, Batch: batch, Workers: workers, MaxBacklog: backlogCap, Rate: rate, Tune: tune, Server: bench.ServerOf(storeURL)})
	})
	steady.Short = "Producers and workers together for --duration; throughput and commit → start latency"
	steady.Long = `steady runs --producers goroutines enqueueing batches of --batch jobs and
a worker client with --workers workers together for --duration, in the
queue "steady". Producers pause while more than --backlog-cap jobs are
inserted but not completed, so when they insert faster than the workers
complete, the run measures the workers with a bounded backlog.

It prints the insert and completion rates, the pending count (inserted −
completed: mean and at the end), how long the producers were paused at the
cap, which side was the bottleneck (workers: the producers waited at the
cap; producers: completions kept up with inserts and pending stayed near
zero), and for every job that started during the run the time from its
insert's commit (EnqueueMany returning) to its handler's start:
p50/p90/p99/max. With the backlog held at the cap that time is mostly
queueing: about cap ÷ completion rate. --rate paces the producers at a fixed
insert rate instead: below the workers' capacity the backlog stays near
zero and the latency is the engine's own delay under that load.`
	steady.Flags().DurationVar(&duration, "duration", 10*time.Second, "measured time")
	steady.Flags().IntVar(&producers, "producers", 2, "goroutines enqueueing")
	steady.Flags().IntVar(&batch, "batch", 100, "jobs per enqueue call")
	steady.Flags().IntVar(&backlogCap, "backlog-cap", 20000, "producers pause while more jobs than this are inserted but not completed")
	steady.Flags().IntVar(&rate, "rate", 0, "pace the producers at this many jobs/s in all, to measure latency at a load below capacity (0 = as fast as they can)")

	latency := run("latency", func(cmd *cobra.Command, st contract.Store) (fmt.Stringer, error) {
		// A second handle on the same database, so the wake-up crosses
		// connection pools as it would between processes.
		other, err := openStoreURL(cmd.Context(), storeURL)
		if err != nil {
			return nil, err
		}
		defer other.Close()
		return bench.Latency(cmd.Context(), st, other, bench.LatencyConfig{Jobs: latencyJobs, Interval: interval, Tune: tune})
	})
	latency.Short = "Time from enqueue to handler start with idle workers"
	latency.Flags().IntVar(&latencyJobs, "jobs", 200, "jobs to enqueue one by one")
	latency.Flags().DurationVar(&interval, "interval", 10*time.Millisecond, "pause between enqueues")

	var floorJobs, floorClaimers int
	floor := run("floor", func(cmd *cobra.Command, st contract.Store) (fmt.Stringer, error) {
		if floorJobs < 0 || floorClaimers < 1 {
			return nil, usagef("bench floor: --jobs must be 0 or more and --claimers 1 or more (got %d and %d)", floorJobs, floorClaimers)
		}
		d, err := floorDB(st, storeURL)
		if err != nil {
			return nil, err
		}
		return bench.Floor(cmd.Context(), d, bench.FloorConfig{Jobs: floorJobs, Claimers: floorClaimers, Server: bench.ServerOf(storeURL)})
	})
	floor.Short = "The least work a claim-and-complete queue can do: plain SQL on a minimal table"
	floor.Long = `floor measures the database under the engine rather than the engine: it
creates a scratch table floor_jobs (in the store's schema, or with its
table prefix) with the fewest columns a queue needs (id, queue, state,
run_at, args) and one index on pending jobs in claim order (partial on
PostgreSQL and SQLite), inserts --jobs jobs in batches of 1,000, then
claims and completes them in batches of 1,000 with plain SQL from
--claimers goroutines (1 on SQLite): PostgreSQL UPDATE … WHERE id IN
(SELECT … FOR UPDATE SKIP LOCKED) RETURNING id; MySQL/MariaDB SELECT … FOR
UPDATE SKIP LOCKED and UPDATE in a transaction; SQLite UPDATE … RETURNING.
Each batch is then marked completed by id. The table is dropped at the
end. Compare its jobs/s with burndown's on the same store: the difference
is what backlog's schema and engine cost.`
	floor.Flags().IntVar(&floorJobs, "jobs", 100000, "jobs to insert, claim and complete")
	floor.Flags().IntVar(&floorClaimers, "claimers", 4, "concurrent claimers (always 1 on SQLite)")

	var (
		fairBacklog, fairLate int
		fairJobTime, fairWait time.Duration
		fairOn                bool
	)
	fair := run("fair", func(cmd *cobra.Command, st contract.Store) (fmt.Stringer, error) {
		w := 20
		if cmd.Flags().Changed("workers") {
			w = workers
		}
		return bench.Fair(cmd.Context(), st, bench.FairConfig{Backlog: fairBacklog, Late: fairLate, Workers: w, JobTime: fairJobTime, Fair: fairOn, Tune: tune}, fairWait)
	})
	fair.Short = "How long a late tenant's jobs wait behind another tenant's backlog in one queue"
	fair.Long = `fair enqueues --backlog jobs of tenant A (partition key tenant-a) into the
queue "fair", starts the workers (20 unless --workers is given) on jobs that
take --job-time each, then enqueues --late jobs of tenant B and reports how
long they waited to start. With --fair (the default) the queue claims fairly
across partition keys (core.QueueLimits.Fair); --fair=false shows strict
claim order, where B waits behind A's backlog. Run it on a fresh database.`
	fair.Flags().IntVar(&fairBacklog, "backlog", 100000, "tenant A's jobs, enqueued first")
	fair.Flags().IntVar(&fairLate, "late", 100, "tenant B's jobs, enqueued once A's run")
	fair.Flags().DurationVar(&fairJobTime, "job-time", 10*time.Millisecond, "how long each job runs")
	fair.Flags().BoolVar(&fairOn, "fair", true, "claim fairly across partition keys")
	fair.Flags().DurationVar(&fairWait, "max-wait", 2*time.Minute, "give up waiting for B's jobs after this long")

	growth := &cobra.Command{
		Use:   "growth",
		Short: "Consecutive burn-downs on one table with completed jobs kept, and the table after each",
		Long: `growth runs --rounds burn-downs of --jobs jobs one after the other in the
queue "bench", keeping completed jobs for --retention (the engine's default,
24h), so each round works on a table the previous ones filled. After each
round (and --pause) it prints the burn-down rate and the jobs table: rows,
and on PostgreSQL live and dead tuples (pg_stat_user_tables), the share of
HOT updates during the round, index entries read per scan of the claim
index, table and index sizes, and autovacuum / auto-analyze runs during the
round with the time of the last one. Statistics are PostgreSQL's estimates
and lag the round by up to a second or two; elsewhere only rows are known.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.withBenchStore(cmd.Context(), ppg, func(st contract.Store, u string) error {
				cfg := bench.GrowthConfig{
					Config:              bench.Config{Jobs: growthJobs, Workers: workers, Tune: tune, Server: bench.ServerOf(u)},
					Rounds:              rounds,
					Retention:           &core.Retention{Completed: retention, Cancelled: core.DefaultRetention.Cancelled, Discarded: core.DefaultRetention.Discarded},
					MaintenanceInterval: maint,
					Pause:               pause,
				}
				if reopen {
					cfg.Reopen = func(ctx context.Context) (contract.Store, error) { return openStoreURL(ctx, u) }
				}
				if pg, ok := st.(pgStore); ok {
					cfg.Probe = bench.PostgresProbe(pg.Pool(), pg.Schema(), "jobs", "jobs_claim")
				}
				var each func(bench.GrowthRound)
				var tw *streamTable
				if !a.jsonOutput() {
					fmt.Fprintf(a.env.stdout, "%s: growth, %d rounds × %d jobs, %d workers, completed jobs kept %s\n", redactURL(u), rounds, growthJobs, workers, retention)
					tw = newStreamTable(a.env.stdout, bench.GrowthHeader)
					each = func(r bench.GrowthRound) { tw.line(r.Line()) }
				}
				res, err := bench.Growth(cmd.Context(), st, cfg, each)
				if err != nil {
					return err
				}
				if a.jsonOutput() {
					return writeJSON(a.env.stdout, res)
				}
				return nil
			})
		},
	}
	growth.Flags().IntVar(&growthJobs, "jobs", 100000, "jobs per round")
	growth.Flags().IntVar(&rounds, "rounds", 5, "consecutive burn-downs")
	growth.Flags().DurationVar(&retention, "retention", core.DefaultRetention.Completed, "how long completed jobs are kept (0 deletes each as it completes)")
	growth.Flags().DurationVar(&maint, "maintenance-interval", 0, "the workers' maintenance interval (0 = the engine default; negative = none)")
	growth.Flags().BoolVar(&reopen, "reopen", false, "open the store anew for each round (new connections with no cached plans, as after a restart of the workers)")
	growth.Flags().DurationVar(&pause, "pause", 2*time.Second, "wait after each round before sampling the table and starting the next")

	withPG := &cobra.Command{
		Use:   "with-postgres -- COMMAND [ARG...]",
		Short: "Run a command next to a private PostgreSQL cluster, then remove the cluster",
		Long: `with-postgres makes a private PostgreSQL cluster (initdb in a temporary
directory; server defaults, autovacuum on; --pg-set changes settings),
runs COMMAND with its address in the environment, waits for it, and
stops and removes the cluster. COMMAND gets

  BACKLOG_DB   store URL of the database "test" (with --pg-params)
  PG_URL       postgres://root@127.0.0.1:PORT (no database)
  PG_ADMIN_DB  test
  PG_PARAMS    sslmode=disable

so several programs (benchmarks/river/run.sh, scripts/bench-compare.sh)
can share one server. The superuser root needs no password.`,
		Args: usageArgs(cobra.MinimumNArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withPrivatePG(cmd.Context(), ppg, func(srv *dbserver.Server, storeURL string) error {
				c := exec.CommandContext(cmd.Context(), args[0], args[1:]...)
				c.Stdin, c.Stdout, c.Stderr = a.env.stdin, a.env.stdout, a.env.stderr
				environ := os.Environ
				if a.env.environ != nil {
					environ = a.env.environ
				}
				c.Env = append(environ(),
					"BACKLOG_DB="+storeURL,
					"PG_URL=postgres://root@127.0.0.1:"+strconv.Itoa(srv.Port()),
					"PG_ADMIN_DB=test",
					"PG_PARAMS=sslmode=disable")
				if err := c.Start(); err != nil {
					return err
				}
				// Ctrl-C reaches the command too (same process group); wait
				// for it, then remove the cluster.
				var stop func()
				if a.env.notifySignals != nil {
					_, stop = a.env.notifySignals()
					defer stop()
				}
				if err := c.Wait(); err != nil {
					return fmt.Errorf("%s: %w", args[0], err)
				}
				return nil
			})
		},
	}

	cpu := &cobra.Command{
		Use:   "cpu -- COMMAND [ARG...]",
		Short: "Run another benchmark command and add its CPU split (client, database server) to its JSON",
		Long: `cpu runs COMMAND (for example River's riverbench from benchmarks/river)
and prints its JSON output with the fields backlog's own modes report added:
client_core_seconds (the command's CPU), server_core_seconds (the CPU of the
database server of --db over the run, when it runs on this machine) and
core_ms_per_1000_jobs, per the output's "completed" (else "jobs") count.
Linux only; elsewhere the output is printed as it came.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			out, err := bench.Measured(cmd.Context(), bench.ServerOf(a.dbURL), args, a.env.stderr)
			if err != nil {
				return err
			}
			_, err = fmt.Fprintln(a.env.stdout, string(out))
			return err
		},
	}
	cmd.AddCommand(burn, steady, latency, floor, growth, fair, withPG, cpu)
	return cmd
}

// sqlStore is what bench floor needs of the SQLite and MySQL stores.
type sqlStore interface {
	DB() *sql.DB
	Prefix() string
}

// floorDB returns the database of st, opened from storeURL, for bench
// floor: the store's own pool or *sql.DB, and its schema or table prefix.
func floorDB(st contract.Store, storeURL string) (bench.FloorDB, error) {
	scheme := ""
	if u, err := url.Parse(storeURL); err == nil {
		scheme = strings.ToLower(u.Scheme)
	}
	if pg, ok := st.(pgStore); ok {
		return bench.FloorDB{Dialect: bench.DialectPostgres, Pool: pg.Pool(), Schema: pg.Schema()}, nil
	}
	if s, ok := st.(sqlStore); ok {
		switch scheme {
		case "sqlite":
			return bench.FloorDB{Dialect: bench.DialectSQLite, DB: s.DB(), Prefix: s.Prefix()}, nil
		case "mysql":
			return bench.FloorDB{Dialect: bench.DialectMySQL, DB: s.DB(), Prefix: s.Prefix()}, nil
		}
	}
	return bench.FloorDB{}, usagef("bench floor runs on sqlite:, postgres: and mysql: stores, not %s", redactURL(storeURL))
}

// analyzeEmptyTable runs ANALYZE on the jobs table of a PostgreSQL store
// that holds no jobs: the statistics of a table analyzed while empty,
// which the claim must survive once jobs arrive.
func analyzeEmptyTable(ctx context.Context, st contract.Store) error {
	pg, ok := st.(pgStore)
	if !ok {
		return usagef("--analyze-empty applies to PostgreSQL stores only")
	}
	table := pg.Schema() + ".jobs"
	var rows int64
	if err := pg.Pool().QueryRow(ctx, "SELECT count(*) FROM "+table).Scan(&rows); err != nil {
		return err
	}
	if rows > 0 {
		return fmt.Errorf("--analyze-empty: %s holds %d jobs; use an empty database", table, rows)
	}
	_, err := pg.Pool().Exec(ctx, "ANALYZE "+table)
	return err
}

// withPrivatePG starts a private PostgreSQL server, calls fn with it and
// the store URL of its database "test", and stops and removes it.
func (a *app) withPrivatePG(ctx context.Context, ppg privatePG, fn func(srv *dbserver.Server, storeURL string) error) error {
	settings := map[string]string{}
	for _, kv := range ppg.settings {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return usagef("--pg-set %q: want name=value", kv)
		}
		settings[k] = v
	}
	if _, err := url.ParseQuery(ppg.params); err != nil {
		return usagef("--pg-params %q: %v", ppg.params, err)
	}
	srv, err := dbserver.StartPostgres(ctx, dbserver.Options{Settings: settings})
	if err != nil {
		return fmt.Errorf("private PostgreSQL: %w", err)
	}
	defer func() {
		if err := srv.Stop(dbserver.StopFast); err != nil {
			fmt.Fprintf(a.env.stderr, "bench: stop the private PostgreSQL: %v\n", err)
		}
		_ = srv.Close()
	}()
	storeURL := srv.DSN()
	if ppg.params != "" {
		storeURL += "&" + strings.TrimPrefix(ppg.params, "&")
	}
	fmt.Fprintf(a.env.stderr, "bench: private PostgreSQL at %s (psql -h 127.0.0.1 -p %d -U root test), directory %s, log %s\n",
		storeURL, srv.Port(), srv.Dir(), srv.LogPath())
	return fn(srv, storeURL)
}

// withBenchStore opens the store bench runs on (--db, or a private
// PostgreSQL with --private-postgres), migrates it, warns when it is a
// PostgreSQL server with autovacuum off, and calls fn with the store and a
// URL.
func (a *app) withBenchStore(ctx context.Context, ppg privatePG, fn func(st contract.Store, storeURL string) error) error {
	open := func(storeURL string) error {
		st, err := openStoreURL(ctx, storeURL)
		if err != nil {
			return err
		}
		defer st.Close()
		if _, err := migrate(ctx, st); err != nil {
			return err
		}
		if pg, ok := st.(pgStore); ok {
			server, table, err := bench.PostgresAutovacuum(ctx, pg.Pool(), pg.Schema(), "jobs")
			switch {
			case err != nil:
				fmt.Fprintf(a.env.stderr, "bench: cannot read the autovacuum setting: %v\n", err)
			case !server:
				fmt.Fprintln(a.env.stderr, "WARNING: autovacuum is OFF on this PostgreSQL server: dead rows are never vacuumed in the background, so these figures say nothing about a server with production defaults (try --private-postgres)")
			case !table:
				fmt.Fprintf(a.env.stderr, "WARNING: autovacuum is OFF for the table %s.jobs (autovacuum_enabled=false): these figures say nothing about production defaults\n", pg.Schema())
			}
		}
		return fn(st, storeURL)
	}
	if ppg.on {
		return a.withPrivatePG(ctx, ppg, func(_ *dbserver.Server, storeURL string) error { return open(storeURL) })
	}
	if len(ppg.settings) > 0 || ppg.params != "" {
		return usagef("--pg-set and --pg-params apply to --private-postgres only")
	}
	if !a.dbGiven {
		// No --db and no BACKLOG_DB: a scratch SQLite file, not
		// backlog.db in the current directory.
		dir, err := os.MkdirTemp("", "backlog-bench-")
		if err != nil {
			return fmt.Errorf("bench: temporary database: %w", err)
		}
		defer os.RemoveAll(dir)
		u := "sqlite:" + filepath.Join(dir, "bench.db")
		fmt.Fprintf(a.env.stderr, "bench: no --db or BACKLOG_DB given: running on a temporary SQLite database, removed afterwards (%s)\n", u)
		return open(u)
	}
	return open(a.dbURL)
}

// streamTable prints rows of tab-separated columns as they come, each
// column as wide as its header or the widest value so far.
type streamTable struct {
	w      io.Writer
	widths []int
}

func newStreamTable(w io.Writer, header string) *streamTable {
	t := &streamTable{w: w}
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
	fmt.Fprintln(t.w, b.String())
}

// startCPUProfile starts writing a CPU profile of this process to path
// (runtime/pprof) and returns the function that stops it and closes the
// file. An empty path profiles nothing.
func startCPUProfile(path string) (stop func() error, err error) {
	if path == "" {
		return func() error { return nil }, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("--cpuprofile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("--cpuprofile: %w", err)
	}
	return func() error {
		pprof.StopCPUProfile()
		return f.Close()
	}, nil
}
