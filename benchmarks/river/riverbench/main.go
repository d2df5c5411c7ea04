// Command riverbench drives River (github.com/riverqueue/river) through the
// same measurements as `backlog bench`, so the two engines can be put
// side by side on one database server:
//
//	burndown  insert --jobs no-op jobs, then time how fast a client with
//	          --workers workers completes them all
//	steady    --producers goroutines insert batches of --batch jobs while
//	          the client works them, for --duration, with at most
//	          --backlog-cap jobs inserted but not yet completed; also the
//	          time from each insert's commit to its worker's start
//	latency   idle workers; one job every --interval, insert → worker
//	          start
//	growth    --rounds burn-downs one after the other on one river_job
//	          table, completed jobs kept (River's retention), and the table
//	          after each round, as `backlog bench growth` prints it
//
// A job counts as done when River reports it completed (EventKindJobCompleted,
// which the client emits after its batch completer has written the jobs'
// completed state), as backlog's bench counts EventJobCompleted after its
// completer has applied the finish.
//
// Results are printed as JSON with the field names `backlog bench -o json`
// uses. The helper subcommands createdb, dropdb and summarize are used by
// run.sh.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

const queue = "bench"

// noopArgs are the arguments of the benchmark's no-op jobs: empty in a
// burn-down; in a steady run the run and insert call that wrote the job
// (backlog's bench uses the same fields); in a latency run the time just
// before the insert.
type noopArgs struct {
	R    int64 `json:"r,omitempty"`
	B    int64 `json:"b,omitempty"`
	Sent int64 `json:"sent,omitempty"` // unix nanoseconds
}

func (noopArgs) Kind() string { return "bench.noop" }

// noopWorker does nothing but call onStart, if set, when a job starts.
type noopWorker struct {
	river.WorkerDefaults[noopArgs]
	onStart func(a noopArgs, at time.Time)
}

func (w *noopWorker) Work(_ context.Context, j *river.Job[noopArgs]) error {
	if w.onStart != nil {
		w.onStart(j.Args, time.Now())
	}
	return nil
}

// burnResult has the JSON shape of backlog's bench.Result.
type burnResult struct {
	Jobs       int           `json:"jobs"`
	Insert     time.Duration `json:"insert_ns"`
	Work       time.Duration `json:"burndown_ns"`
	JobsPerSec float64       `json:"jobs_per_sec"`
}

type opts struct {
	url           string
	schema        string
	jobs          int
	workers       int
	insertBatch   int
	fetchCooldown time.Duration
	fetchPoll     time.Duration
	duration      time.Duration
	producers     int
	batch         int
	maxBacklog    int
	rate          int
	interval      time.Duration
	timeout       time.Duration
}

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	var err error
	switch cmd, args := os.Args[1], os.Args[2:]; cmd {
	case "burndown", "steady", "latency":
		err = runBench(cmd, args)
	case "growth":
		err = runGrowth(args)
	case "createdb", "dropdb", "ping":
		err = adminDB(cmd, args)
	case "summarize":
		err = summarize(args)
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "riverbench:", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, `usage:
  riverbench burndown  --database-url URL [--schema S] [--jobs N] [--workers W] [--fetch-cooldown D] [--fetch-poll-interval D]
  riverbench steady    --database-url URL [--schema S] [--duration D] [--producers P] [--batch B] [--backlog-cap N] [--rate R] [--workers W] ...
  riverbench latency   --database-url URL [--schema S] [--jobs N] [--interval D] ...
  riverbench growth    --database-url URL [--schema S] [--rounds N] [--jobs N] [--workers W] [--pause D] [-o table|json] ...
  riverbench createdb  --admin-url URL NAME
  riverbench dropdb    --admin-url URL NAME
  riverbench ping      --admin-url URL
  riverbench summarize RESULTS.jsonl`)
	os.Exit(2)
}

func runBench(cmd string, args []string) error {
	var o opts
	fs := flag.NewFlagSet(cmd, flag.ExitOnError)
	fs.StringVar(&o.url, "database-url", "", "postgres:// URL of the database River uses")
	fs.StringVar(&o.schema, "schema", "", "schema for River's tables (created and migrated; empty = the connection's default)")
	fs.IntVar(&o.jobs, "jobs", map[bool]int{true: 200, false: 100000}[cmd == "latency"], "burndown: jobs to insert and burn down; latency: jobs to insert one by one")
	fs.IntVar(&o.workers, "workers", 100, "MaxWorkers of the benchmark queue")
	fs.IntVar(&o.insertBatch, "insert-batch", 1000, "burndown: jobs per InsertManyFast call")
	fs.DurationVar(&o.fetchCooldown, "fetch-cooldown", 0, "River Config.FetchCooldown (0 = River's default, 100ms)")
	fs.DurationVar(&o.fetchPoll, "fetch-poll-interval", 0, "River Config.FetchPollInterval (0 = River's default, 1s)")
	fs.DurationVar(&o.duration, "duration", 10*time.Second, "steady: measured time")
	fs.IntVar(&o.producers, "producers", 2, "steady: goroutines inserting")
	fs.IntVar(&o.batch, "batch", 100, "steady: jobs per InsertManyFast call")
	fs.IntVar(&o.maxBacklog, "backlog-cap", 20000, "steady: producers pause while more jobs than this are inserted but not completed")
	fs.IntVar(&o.maxBacklog, "max-backlog", 20000, "steady: the same as --backlog-cap")
	fs.IntVar(&o.rate, "rate", 0, "steady: pace the producers at this many jobs/s in all (0 = as fast as they can), as backlog bench steady --rate")
	fs.DurationVar(&o.interval, "interval", 10*time.Millisecond, "latency: pause between inserts")
	fs.DurationVar(&o.timeout, "timeout", 10*time.Minute, "give up after this long")
	_ = fs.Parse(args)
	if o.url == "" {
		return errors.New("--database-url is required")
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
	var res any
	switch cmd {
	case "burndown":
		res, err = burnDown(ctx, pool, o)
	case "steady":
		res, err = steady(ctx, pool, o)
	default:
		res, err = latency(ctx, pool, o)
	}
	if err != nil {
		return err
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(res)
}

// prepareSchema creates the schema if needed, migrates River's tables into
// it and empties river_job, so every run starts from an empty table.
func prepareSchema(ctx context.Context, pool *pgxpool.Pool, schema string) error {
	if schema != "" {
		if _, err := pool.Exec(ctx, "CREATE SCHEMA IF NOT EXISTS "+pgx.Identifier{schema}.Sanitize()); err != nil {
			return err
		}
	}
	m, err := rivermigrate.New(riverpgxv5.New(pool), &rivermigrate.Config{Schema: schema, Logger: quiet()})
	if err != nil {
		return err
	}
	if _, err := m.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return fmt.Errorf("migrate River schema: %w", err)
	}
	table := pgx.Identifier{"river_job"}
	if schema != "" {
		table = pgx.Identifier{schema, "river_job"}
	}
	_, err = pool.Exec(ctx, "TRUNCATE "+table.Sanitize())
	return err
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// newClient makes a River client on pool; with a worker, it works the
// benchmark queue with o.workers workers, else it only inserts.
func newClient(pool *pgxpool.Pool, o opts, w *noopWorker) (*river.Client[pgx.Tx], error) {
	cfg := &river.Config{
		Logger:            quiet(),
		Schema:            o.schema,
		FetchCooldown:     o.fetchCooldown,
		FetchPollInterval: o.fetchPoll,
	}
	if w != nil {
		workers := river.NewWorkers()
		if err := river.AddWorkerSafely(workers, w); err != nil {
			return nil, err
		}
		cfg.Workers = workers
		cfg.Queues = map[string]river.QueueConfig{queue: {MaxWorkers: o.workers}}
	}
	return river.NewClient(riverpgxv5.New(pool), cfg)
}

// countCompleted subscribes to completions on c and counts them in done;
// finished is closed when done reaches total (total <= 0: never).
func countCompleted(c *river.Client[pgx.Tx], done *atomic.Int64, total int64) (finished <-chan struct{}, stop func()) {
	// A subscription drops events when its channel is full; make it large
	// enough that the drain below never falls that far behind.
	events, cancel := c.SubscribeConfig(&river.SubscribeConfig{
		Kinds:    []river.EventKind{river.EventKindJobCompleted},
		ChanSize: 1 << 20,
	})
	fin := make(chan struct{})
	go func() {
		for range events {
			if done.Add(1) == total {
				close(fin)
			}
		}
	}()
	return fin, cancel
}

func burnDown(ctx context.Context, pool *pgxpool.Pool, o opts) (burnResult, error) {
	inserter, err := newClient(pool, o, nil)
	if err != nil {
		return burnResult{}, err
	}
	t0 := time.Now()
	for left := o.jobs; left > 0; {
		n := min(left, o.insertBatch)
		batch := make([]river.InsertManyParams, n)
		for i := range batch {
			batch[i] = river.InsertManyParams{Args: noopArgs{}, InsertOpts: &river.InsertOpts{Queue: queue}}
		}
		if _, err := inserter.InsertManyFast(ctx, batch); err != nil {
			return burnResult{}, err
		}
		left -= n
	}
	res := burnResult{Jobs: o.jobs, Insert: time.Since(t0)}
	if o.jobs == 0 {
		return res, nil
	}

	client, err := newClient(pool, o, &noopWorker{})
	if err != nil {
		return burnResult{}, err
	}
	var done atomic.Int64
	finished, unsubscribe := countCompleted(client, &done, int64(o.jobs))
	defer unsubscribe()
	t1 := time.Now()
	if err := client.Start(ctx); err != nil {
		return burnResult{}, err
	}
	select {
	case <-finished:
	case <-ctx.Done():
		_ = client.StopAndCancel(context.Background())
		return burnResult{}, fmt.Errorf("burn-down: %d of %d jobs done: %w", done.Load(), o.jobs, ctx.Err())
	}
	res.Work = time.Since(t1)
	res.JobsPerSec = float64(o.jobs) / res.Work.Seconds()
	return res, client.Stop(ctx)
}

// adminDB creates or drops a database through a connection to another one
// (--admin-url), so run.sh needs no psql or createdb binaries; ping only
// checks that the server answers.
func adminDB(cmd string, args []string) error {
	fs := flag.NewFlagSet(cmd, flag.ExitOnError)
	admin := fs.String("admin-url", "", "postgres:// URL of an existing database to connect to")
	_ = fs.Parse(args)
	if want := map[bool]int{true: 0, false: 1}[cmd == "ping"]; *admin == "" || fs.NArg() != want {
		return errors.New("usage: " + cmd + " --admin-url URL [NAME]")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, *admin)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	name := pgx.Identifier{fs.Arg(0)}.Sanitize()
	switch cmd {
	case "createdb":
		_, err = conn.Exec(ctx, "CREATE DATABASE "+name)
	case "dropdb":
		_, err = conn.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
	default:
		err = conn.Ping(ctx)
	}
	return err
}
