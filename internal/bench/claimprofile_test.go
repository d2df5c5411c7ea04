package bench

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/core/contract"
	"github.com/backlogq/backlog/internal/dbserver"
	"github.com/backlogq/backlog/store/postgres"
)

// storeCall is one Claim or Finish call: when it started, how long it
// took, how many jobs (outcomes) it asked for and how many it got.
type storeCall struct {
	start    time.Time
	took     time.Duration
	asked, n int
}

// recordingStore is the PostgreSQL store with every Claim and Finish
// recorded (embedding the concrete store keeps its Notifier and other
// capabilities).
type recordingStore struct {
	*postgres.Store
	mu       sync.Mutex
	claims   []storeCall
	finishes []storeCall
}

func (s *recordingStore) Claim(ctx context.Context, p contract.ClaimParams) ([]*core.Job, error) {
	t := time.Now()
	jobs, err := s.Store.Claim(ctx, p)
	s.mu.Lock()
	s.claims = append(s.claims, storeCall{t, time.Since(t), p.Limit, len(jobs)})
	s.mu.Unlock()
	return jobs, err
}

func (s *recordingStore) Finish(ctx context.Context, outs []contract.Outcome) ([]contract.FinishResult, error) {
	t := time.Now()
	res, err := s.Store.Finish(ctx, outs)
	s.mu.Lock()
	s.finishes = append(s.finishes, storeCall{t, time.Since(t), len(outs), len(res)})
	s.mu.Unlock()
	return res, err
}

// quantiles formats p10, p50, p90, p99 and the maximum of ds.
func quantiles(ds []time.Duration) string {
	if len(ds) == 0 {
		return "none"
	}
	ds = slices.Clone(ds)
	slices.Sort(ds)
	q := func(f float64) time.Duration { return ds[int(f*float64(len(ds)-1))].Round(10 * time.Microsecond) }
	return fmt.Sprintf("p10 %s, p50 %s, p90 %s, p99 %s, max %s", q(0.1), q(0.5), q(0.9), q(0.99), q(1))
}

// TestSteadyClaimProfile runs a steady run at the defaults (bench.Steady:
// 100 workers, 2 producers × 100) on a private PostgreSQL and reports
// where the queue's time goes: claims per second, jobs per claim, the
// share of the run a claim was in flight, the claims by the number of
// jobs they asked for, the finishes, the server's wait events
// (pg_stat_activity every 5 ms) and the buffers the claim's read touches
// (EXPLAIN every 2 s). docs/benchmarks.md, "Steady state at the defaults:
// the cause", reads it. It fails when claims that found more due jobs than
// they asked for took fewer than nine in ten of the slots on average: a
// fetch loop that claims the slots free when a claim returns, instead of
// gathering those its short jobs free moments later.
//
// It runs only with BACKLOG_BENCH_PROFILE=1 (20 s; BACKLOG_BENCH_DURATION
// sets another duration); BACKLOG_BENCH_MAINTENANCE=1 runs the workers
// with the engine's default maintenance (and so the store's vacuum).
func TestSteadyClaimProfile(t *testing.T) {
	if os.Getenv("BACKLOG_BENCH_PROFILE") != "1" {
		t.Skip("set BACKLOG_BENCH_PROFILE=1 to profile a steady run")
	}
	dur := 20 * time.Second
	if d, err := time.ParseDuration(os.Getenv("BACKLOG_BENCH_DURATION")); err == nil && d > 0 {
		dur = d
	}
	maintenance := os.Getenv("BACKLOG_BENCH_MAINTENANCE") == "1"
	ctx := context.Background()
	srv := dbserver.Postgres(t, dbserver.Options{})
	pst, err := postgres.Open(ctx, srv.DSN(), postgres.WithSchema("profile"))
	if err != nil {
		t.Fatal(err)
	}
	defer pst.Close()
	st := &recordingStore{Store: pst}
	const table = "profile.jobs"

	sctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	waits := map[string]int{}
	var explains []string
	wg.Add(2)
	go func() { // the server's wait events
		defer wg.Done()
		for sctx.Err() == nil {
			rows, err := pst.Pool().Query(sctx, "SELECT coalesce(wait_event_type || '/' || wait_event, 'CPU'), left(regexp_replace(query, '\\s+', ' ', 'g'), 30)"+
				" FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() AND backend_type = 'client backend' AND state = 'active'")
			if err == nil {
				for rows.Next() {
					var w, q string
					if rows.Scan(&w, &q) == nil {
						waits[w+"  "+q]++
					}
				}
				rows.Close()
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	go func() { // the buffers the claim's read touches
		defer wg.Done()
		for {
			select {
			case <-sctx.Done():
				return
			case <-time.After(2 * time.Second):
			}
			var plan []string
			rows, err := pst.Pool().Query(sctx, "EXPLAIN (ANALYZE, BUFFERS, TIMING OFF) SELECT p.id FROM "+table+" p WHERE p.queue = 'steady'"+
				" AND p.state IN ('scheduled','available','retryable') AND p.run_at <= now() ORDER BY p.priority, p.run_at, p.id LIMIT 50")
			if err != nil {
				continue
			}
			for rows.Next() {
				var l string
				if rows.Scan(&l) == nil && (strings.Contains(l, "Buffers") || strings.Contains(l, "Execution")) {
					plan = append(plan, strings.TrimSpace(l))
				}
			}
			rows.Close()
			if len(plan) > 0 {
				explains = append(explains, plan[0]+", "+plan[len(plan)-1])
			}
		}
	}()
	res, err := Steady(ctx, st, SteadyConfig{Duration: dur, Tune: func(c *core.Config) {
		if maintenance {
			c.MaintenanceInterval = 0
		}
	}})
	stop()
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s", res)

	st.mu.Lock()
	defer st.mu.Unlock()
	cs := st.claims
	if len(cs) < 2 {
		t.Fatalf("%d claims", len(cs))
	}
	span := cs[len(cs)-1].start.Add(cs[len(cs)-1].took).Sub(cs[0].start)
	var took, gaps []time.Duration
	var inFlight time.Duration
	jobs, full, fullJobs := 0, 0, 0
	for i, c := range cs {
		took = append(took, c.took)
		inFlight += c.took
		jobs += c.n
		if c.n == c.asked {
			full++
			fullJobs += c.n
		}
		if i > 0 {
			gaps = append(gaps, c.start.Sub(cs[i-1].start.Add(cs[i-1].took)))
		}
	}
	t.Logf("%d claims in %s (%.0f/s), %.1f jobs each, %d took all they asked for; a claim in flight %.0f%% of the time",
		len(cs), span.Round(time.Millisecond), float64(len(cs))/span.Seconds(), float64(jobs)/float64(len(cs)), full, 100*inFlight.Seconds()/span.Seconds())
	t.Logf("claim durations: %s", quantiles(took))
	t.Logf("from a claim's result to the next claim: %s", quantiles(gaps))
	var b strings.Builder
	lo := 1
	for _, hi := range []int{1, 25, 50, 90, 100, 1 << 30} {
		n, j := 0, 0
		var d time.Duration
		for _, c := range cs {
			if c.asked >= lo && c.asked <= hi {
				n, j, d = n+1, j+c.n, d+c.took
			}
		}
		if n > 0 {
			fmt.Fprintf(&b, "\n  asked %d-%d: %d claims (%.0f%%), %.1f%% of the jobs, mean %s", lo, hi, n, 100*float64(n)/float64(len(cs)),
				100*float64(j)/float64(max(jobs, 1)), (d / time.Duration(n)).Round(10*time.Microsecond))
		}
		lo = hi + 1
	}
	t.Logf("claims by jobs asked for:%s", b.String())
	var fd []time.Duration
	outs := 0
	for _, f := range st.finishes {
		fd = append(fd, f.took)
		outs += f.asked
	}
	t.Logf("%d finishes, %.1f outcomes each: %s", len(fd), float64(outs)/float64(max(len(fd), 1)), quantiles(fd))
	type count struct {
		k string
		n int
	}
	var ws []count
	for k, n := range waits {
		ws = append(ws, count{k, n})
	}
	sort.Slice(ws, func(i, j int) bool { return ws[i].n > ws[j].n })
	b.Reset()
	for i, w := range ws {
		if i == 10 {
			break
		}
		fmt.Fprintf(&b, "\n  %6d  %s", w.n, w.k)
	}
	t.Logf("pg_stat_activity samples (active client backends):%s", b.String())
	t.Logf("the claim's read (LIMIT 50) every 2 s:\n  %s", strings.Join(explains, "\n  "))
	var live, dead int64
	var vacuumed string
	if err := pst.Pool().QueryRow(ctx, "SELECT n_live_tup, n_dead_tup, coalesce(greatest(last_vacuum, last_autovacuum)::text, 'never')"+
		" FROM pg_stat_user_tables WHERE schemaname = 'profile' AND relname = 'jobs'").Scan(&live, &dead, &vacuumed); err == nil {
		t.Logf("jobs table at the end: %d live rows, %d dead, last vacuum %s", live, dead, vacuumed)
	}
	if full > 0 && fullJobs*10 < full*res.Workers*9 {
		t.Errorf("claims that found more due jobs took %.1f jobs each for %d slots: the slots are split between claims", float64(fullJobs)/float64(full), res.Workers)
	}
}
