package bench

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/backlogq/backlog/core/contract"

	"modernc.org/sqlite"

	"github.com/backlogq/backlog/core"
	sqlitestore "github.com/backlogq/backlog/store/sqlite"
)

// sqliteRecorder is the SQLite store with every call that takes the
// write lock recorded by method (embedding the concrete store keeps its
// Notifier and other capabilities).
type sqliteRecorder struct {
	*sqlitestore.Store
	mu    sync.Mutex
	calls map[string][]storeCall
	// first runs once, before the first claim (the burn-down's inserts
	// are over by then).
	first   sync.Once
	onClaim func()
}

func (s *sqliteRecorder) record(name string, t time.Time, asked, n int) {
	s.mu.Lock()
	s.calls[name] = append(s.calls[name], storeCall{t, time.Since(t), asked, n})
	s.mu.Unlock()
}

func (s *sqliteRecorder) Claim(ctx context.Context, p contract.ClaimParams) ([]*core.Job, error) {
	if s.onClaim != nil {
		s.first.Do(s.onClaim)
	}
	t := time.Now()
	jobs, err := s.Store.Claim(ctx, p)
	s.record("claim", t, p.Limit, len(jobs))
	return jobs, err
}

func (s *sqliteRecorder) Finish(ctx context.Context, outs []contract.Outcome) ([]contract.FinishResult, error) {
	t := time.Now()
	res, err := s.Store.Finish(ctx, outs)
	s.record("finish", t, len(outs), len(res))
	return res, err
}

func (s *sqliteRecorder) Insert(ctx context.Context, now time.Time, jobs []core.InsertParams) ([]core.InsertResult, error) {
	t := time.Now()
	res, err := s.Store.Insert(ctx, now, jobs)
	s.record("insert", t, len(jobs), len(res))
	return res, err
}

func (s *sqliteRecorder) ExtendLeases(ctx context.Context, workerID string, leases []contract.Lease, until time.Time) (int, error) {
	t := time.Now()
	n, err := s.Store.ExtendLeases(ctx, workerID, leases, until)
	s.record("extend", t, len(leases), n)
	return n, err
}

// sqliteConns counts, over every connection the "sqlite" driver opens in
// this test process, the commits (write transactions, through a commit
// hook) and the pages written (SQLITE_DBSTATUS_CACHE_WRITE: in WAL mode
// the frames appended to the WAL).
type sqliteConns struct {
	mu      sync.Mutex
	status  []sqlite.DBStatus
	commits atomic.Int64
}

var (
	hookOnce   sync.Once
	hookTarget atomic.Pointer[sqliteConns]
)

func watchSQLite() *sqliteConns {
	w := &sqliteConns{}
	hookTarget.Store(w)
	hookOnce.Do(func() {
		sqlite.RegisterConnectionHook(func(c sqlite.ExecQuerierContext, _ string) error {
			w := hookTarget.Load()
			if w == nil {
				return nil
			}
			if st, ok := c.(sqlite.DBStatus); ok {
				w.mu.Lock()
				w.status = append(w.status, st)
				w.mu.Unlock()
			}
			if h, ok := c.(sqlite.HookRegisterer); ok {
				h.RegisterCommitHook(func() int32 {
					if w := hookTarget.Load(); w != nil {
						w.commits.Add(1)
					}
					return 0
				})
			}
			return nil
		})
	})
	return w
}

// pages returns the pages written on every connection since the last call.
func (w *sqliteConns) pages() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, st := range w.status {
		cur, _, err := st.Status(sqlite.DBStatusCacheWrite, true)
		if err == nil {
			n += cur
		}
	}
	return n
}

// forget drops the connections seen so far (their database is closed
// next).
func (w *sqliteConns) forget() {
	w.mu.Lock()
	w.status = nil
	w.mu.Unlock()
}

// TestSQLiteProfile runs a burn-down (100,000 jobs; BACKLOG_BENCH_JOBS
// sets another count) and a steady run (10 s; BACKLOG_BENCH_DURATION) at
// the defaults on a SQLite file and reports where the single writer's
// time goes: per store method that takes the write lock (insert, claim,
// finish, lease extension) the calls, jobs per call and the time spent in
// them (the share of the run they held or waited for the writer), the
// write transactions (commits) and pages written to the WAL per job
// (every 1,000 pages written is about one automatic checkpoint at
// SQLite's default wal_autocheckpoint), and the CPU per job.
// BACKLOG_SQLITE_PRAGMAS adds pragmas to the store's DSN (e.g.
// "wal_autocheckpoint(0)" or "synchronous(OFF)", comma-separated), to
// measure what each costs. docs/benchmarks.md, "SQLite and MariaDB at
// the defaults: where the time goes", reads it.
//
// It runs only with BACKLOG_BENCH_PROFILE=1.
func TestSQLiteProfile(t *testing.T) {
	if os.Getenv("BACKLOG_BENCH_PROFILE") != "1" {
		t.Skip("set BACKLOG_BENCH_PROFILE=1 to profile SQLite at the defaults")
	}
	jobs := 100000
	if n, err := fmt.Sscan(os.Getenv("BACKLOG_BENCH_JOBS"), &jobs); n != 1 || err != nil {
		jobs = 100000
	}
	dur := 10 * time.Second
	if d, err := time.ParseDuration(os.Getenv("BACKLOG_BENCH_DURATION")); err == nil && d > 0 {
		dur = d
	}
	w := watchSQLite()
	defer hookTarget.Store(nil)
	open := func(t *testing.T, name string) *sqliteRecorder {
		dsn := sqlitestore.DSN(filepath.Join(t.TempDir(), name), sqlitestore.DefaultBusyTimeout)
		for _, p := range strings.Split(os.Getenv("BACKLOG_SQLITE_PRAGMAS"), ",") {
			if p = strings.TrimSpace(p); p != "" {
				dsn += "&_pragma=" + p
			}
		}
		db, err := sql.Open("sqlite", dsn)
		if err != nil {
			t.Fatal(err)
		}
		db.SetMaxOpenConns(4)
		db.SetMaxIdleConns(4)
		t.Cleanup(func() { db.Close() })
		st, err := sqlitestore.New(context.Background(), db)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return &sqliteRecorder{Store: st, calls: map[string][]storeCall{}}
	}
	report := func(t *testing.T, st *sqliteRecorder, done int64, span time.Duration, commits int64, pages int) {
		st.mu.Lock()
		defer st.mu.Unlock()
		var total time.Duration
		names := []string{"insert", "claim", "finish", "extend"}
		for _, name := range names {
			cs := st.calls[name]
			var took []time.Duration
			var sum time.Duration
			asked, n := 0, 0
			for _, c := range cs {
				took = append(took, c.took)
				sum += c.took
				asked += c.asked
				n += c.n
			}
			total += sum
			if len(cs) == 0 {
				t.Logf("%-6s none", name)
				continue
			}
			t.Logf("%-6s %6d calls, %.1f asked, %.1f got per call, %.3f calls per job; in them %s (%.0f%% of the run, %.2f µs per job): %s",
				name, len(cs), float64(asked)/float64(len(cs)), float64(n)/float64(len(cs)), float64(len(cs))/float64(done),
				sum.Round(time.Millisecond), 100*sum.Seconds()/span.Seconds(), float64(sum.Microseconds())/float64(done), quantiles(took))
		}
		t.Logf("write-lock calls together %.0f%% of the run; commits %d (%.3f per job), pages written %d (%.3f per job, ≈ %d automatic checkpoints)",
			100*total.Seconds()/span.Seconds(), commits, float64(commits)/float64(done), pages, float64(pages)/float64(done), pages/1000)
	}

	t.Run("burndown", func(t *testing.T) {
		st := open(t, "burndown.db")
		c0, _ := w.commits.Load(), w.pages()
		var c1 int64
		var p1 int
		st.onClaim = func() {
			// The client starts after the inserts: count from here.
			c1, p1 = w.commits.Load(), w.pages()
			st.mu.Lock()
			t.Logf("insert: %d calls, %d commits, %d pages written (%.3f per job)", len(st.calls["insert"]), c1-c0, p1, float64(p1)/float64(jobs))
			st.calls = map[string][]storeCall{}
			st.mu.Unlock()
		}
		res, err := BurnDown(context.Background(), st, Config{Jobs: jobs, Server: Server{InProcess: true}})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s", res)
		report(t, st, int64(jobs), res.Work, w.commits.Load()-c1, w.pages())
		w.forget()
	})
	t.Run("steady", func(t *testing.T) {
		st := open(t, "steady.db")
		c0, _ := w.commits.Load(), w.pages()
		res, err := Steady(context.Background(), st, SteadyConfig{Duration: dur, Server: Server{InProcess: true}})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s", res)
		report(t, st, res.Completed, res.Duration, w.commits.Load()-c0, w.pages())
		w.forget()
	})
}
