package bench

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/core/contract"
	"github.com/backlogq/backlog/store/mysql"
	"github.com/backlogq/backlog/storetest/dbtest"
)

// mysqlRecorder is the MySQL/MariaDB store with every Claim and Finish
// recorded.
type mysqlRecorder struct {
	*mysql.Store
	rec sqliteRecorder // only its calls and their lock
}

func (s *mysqlRecorder) Claim(ctx context.Context, p contract.ClaimParams) ([]*core.Job, error) {
	t := time.Now()
	jobs, err := s.Store.Claim(ctx, p)
	s.rec.record("claim", t, p.Limit, len(jobs))
	return jobs, err
}

func (s *mysqlRecorder) Finish(ctx context.Context, outs []contract.Outcome) ([]contract.FinishResult, error) {
	t := time.Now()
	res, err := s.Store.Finish(ctx, outs)
	s.rec.record("finish", t, len(outs), len(res))
	return res, err
}

// TestMariaDBClaimProfile runs a burn-down at the defaults (50,000 jobs;
// BACKLOG_BENCH_JOBS sets another count) on the MySQL or MariaDB server of
// BACKLOG_TEST_MYSQL_DSN, in a database of its own, and reports where the
// queue's time goes: claims and finishes, jobs per call, their durations,
// the share of the burn-down a claim was in flight and the gaps between
// one claim's result and the next claim. Without claim-ahead a queue's
// slots turn over once per claim round trip, so the burn-down's rate is
// about the jobs per claim divided by the claim's cycle.
// docs/benchmarks.md, "SQLite and MariaDB at the defaults: where the time
// goes", reads it.
//
// It runs only with BACKLOG_BENCH_PROFILE=1.
func TestMariaDBClaimProfile(t *testing.T) {
	if os.Getenv("BACKLOG_BENCH_PROFILE") != "1" {
		t.Skip("set BACKLOG_BENCH_PROFILE=1 to profile MariaDB's claims at the defaults")
	}
	jobs := 50000
	if n, err := fmt.Sscan(os.Getenv("BACKLOG_BENCH_JOBS"), &jobs); n != 1 || err != nil {
		jobs = 50000
	}
	ms, err := mysql.Open(context.Background(), dbtest.MySQLDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	defer ms.Close()
	st := &mysqlRecorder{Store: ms, rec: sqliteRecorder{calls: map[string][]storeCall{}}}
	res, err := BurnDown(context.Background(), st, Config{Jobs: jobs, Server: ServerOf("mysql://root@127.0.0.1:3306/test")})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s", res)
	st.rec.mu.Lock()
	defer st.rec.mu.Unlock()
	cs := st.rec.calls["claim"]
	if len(cs) < 2 {
		t.Fatalf("%d claims", len(cs))
	}
	span := cs[len(cs)-1].start.Add(cs[len(cs)-1].took).Sub(cs[0].start)
	var took, gaps []time.Duration
	var inFlight time.Duration
	n := 0
	for i, c := range cs {
		took = append(took, c.took)
		inFlight += c.took
		n += c.n
		if i > 0 {
			gaps = append(gaps, c.start.Sub(cs[i-1].start.Add(cs[i-1].took)))
		}
	}
	t.Logf("%d claims in %s (%.0f/s), %.1f jobs each; a claim in flight %.0f%% of the time", len(cs), span.Round(time.Millisecond),
		float64(len(cs))/span.Seconds(), float64(n)/float64(len(cs)), 100*inFlight.Seconds()/span.Seconds())
	t.Logf("claim durations: %s", quantiles(took))
	t.Logf("from a claim's result to the next claim: %s", quantiles(gaps))
	var fd []time.Duration
	outs := 0
	for _, f := range st.rec.calls["finish"] {
		fd = append(fd, f.took)
		outs += f.asked
	}
	t.Logf("%d finishes, %.1f outcomes each: %s", len(fd), float64(outs)/float64(max(len(fd), 1)), quantiles(fd))

	// The same claims alone: 100 jobs at a time from a queue of 10,000,
	// one after the other, nothing else running; then the same finishes
	// alone.
	ctx := context.Background()
	ps := make([]core.InsertParams, 1000)
	for i := range ps {
		ps[i] = core.InsertParams{Queue: "alone", Kind: Kind, Args: []byte(`{}`), Priority: 1, MaxAttempts: 1, RunAt: time.Now()}
	}
	for range 10 {
		if _, err := ms.Insert(ctx, time.Now(), ps); err != nil {
			t.Fatal(err)
		}
	}
	var alone, fin []time.Duration
	for range 50 {
		now := time.Now()
		t0 := time.Now()
		got, err := ms.Claim(ctx, contract.ClaimParams{Queue: "alone", WorkerID: "w", Limit: 100, Now: now, LeaseUntil: now.Add(time.Minute)})
		alone = append(alone, time.Since(t0))
		if err != nil || len(got) != 100 {
			t.Fatalf("claim alone: %d jobs, %v", len(got), err)
		}
		outs := make([]contract.Outcome, len(got))
		for i, j := range got {
			outs[i] = contract.Outcome{JobID: j.ID, WorkerID: "w", ClaimSeq: j.ClaimSeq, Attempt: j.Attempt, Kind: contract.OutcomeComplete, At: now, Delete: true}
		}
		t0 = time.Now()
		if _, err := ms.Finish(ctx, outs); err != nil {
			t.Fatal(err)
		}
		fin = append(fin, time.Since(t0))
	}
	t.Logf("claims of 100 alone: %s; finishes of 100 alone: %s", quantiles(alone), quantiles(fin))
}
