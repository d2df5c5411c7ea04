package mysql

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/backlogq/backlog/core/contract"
	"github.com/backlogq/backlog/storetest/dbtest"
)

var t0 = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

// Environment of the helper process.
const (
	helperDSN      = "BACKLOG_MYSQL_HELPER_DSN"
	helperWorker   = "BACKLOG_MYSQL_HELPER_WORKER"
	helperStrategy = "BACKLOG_MYSQL_HELPER_STRATEGY"
	helperDone     = "BACKLOG_MYSQL_HELPER_DONE"
)

func job(queue, kind string) contract.InsertParams {
	return contract.InsertParams{Queue: queue, Kind: kind, Args: json.RawMessage(`{"x":1}`), Priority: 5, MaxAttempts: 3, RunAt: t0}
}

// TestHelperProcess is the helper of TestMultiProcessClaim: this test
// binary re-executed. It opens the database named by the environment
// (migrating concurrently with its siblings), claims and finishes batches
// until the parent has stopped inserting and the queue is drained, and
// prints the ids it claimed and how many transient errors it retried.
func TestHelperProcess(t *testing.T) {
	dsn := os.Getenv(helperDSN)
	if dsn == "" {
		t.Skip("helper process for TestMultiProcessClaim")
	}
	fail := func(what string, err error) {
		fmt.Fprintln(os.Stderr, what+":", err)
		os.Exit(2)
	}
	worker := os.Getenv(helperWorker)
	done := os.Getenv(helperDone)
	ctx := context.Background()
	s, err := Open(ctx, dsn, WithStrategy(contract.ClaimStrategy(os.Getenv(helperStrategy))), WithMaxOpenConns(4))
	if err != nil {
		fail("open", err)
	}
	defer s.Close()
	var claimed []string
	p := contract.ClaimParams{Queue: "mp", WorkerID: worker, Limit: 7, Now: t0, LeaseUntil: t0.Add(time.Hour)}
	for n := 0; ; n++ {
		jobs, err := s.Claim(ctx, p)
		if err != nil {
			fail("claim", err)
		}
		if len(jobs) == 0 {
			if _, err := os.Stat(done); err != nil {
				time.Sleep(time.Millisecond)
				continue
			}
			// The parent has stopped inserting: one more empty claim ends it.
			if jobs, err = s.Claim(ctx, p); err != nil {
				fail("claim", err)
			}
			if len(jobs) == 0 {
				break
			}
		}
		var outs []contract.Outcome
		for i, j := range jobs {
			claimed = append(claimed, strconv.FormatInt(j.ID, 10))
			o := contract.Outcome{JobID: j.ID, WorkerID: worker, ClaimSeq: j.ClaimSeq, Attempt: j.Attempt, Kind: contract.OutcomeComplete, At: t0, Delete: (n+i)%2 == 0}
			outs = append(outs, o)
		}
		res, err := s.Finish(ctx, outs)
		if err != nil {
			fail("finish", err)
		}
		for _, r := range res {
			if !r.Applied {
				fail("finish", fmt.Errorf("job %d: not applied", r.JobID))
			}
		}
	}
	fmt.Printf("RETRIES %d\nIDS %s\n", s.retries.Load(), strings.Join(claimed, ","))
	os.Exit(0)
}

// TestMultiProcessClaim runs three processes claiming from one queue while
// this process keeps inserting into it (batches with and without unique
// keys): every job is claimed exactly once, and no error (deadlock, lock
// wait timeout) reaches any caller.
func TestMultiProcessClaim(t *testing.T) {
	for _, strategy := range []contract.ClaimStrategy{contract.StrategySkipLocked, contract.StrategyOptimistic} {
		t.Run(string(strategy), func(t *testing.T) {
			dsn := dbtest.MySQLDSN(t)
			ctx := context.Background()
			done := filepath.Join(t.TempDir(), "done")
			var cmds []*exec.Cmd
			var outs []*strings.Builder
			for i := range 3 {
				cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$", "-test.count=1")
				cmd.Env = append(os.Environ(), helperDSN+"="+dsn, helperWorker+"=proc-"+strconv.Itoa(i),
					helperStrategy+"="+string(strategy), helperDone+"="+done)
				var out, errb strings.Builder
				cmd.Stdout, cmd.Stderr = &out, &errb
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() {
					if errb.Len() > 0 {
						t.Logf("helper %d stderr: %s", i, errb.String())
					}
				})
				cmds = append(cmds, cmd)
				outs = append(outs, &out)
			}
			s, err := Open(ctx, dsn, WithStrategy(strategy)) // migrates concurrently with the helpers
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			want := map[int64]bool{}
			for b := range 60 {
				batch := make([]contract.InsertParams, 25)
				for i := range batch {
					batch[i] = job("mp", "k")
					if i%5 == 0 {
						batch[i].UniqueKey = fmt.Sprintf("key-%d-%d", b, i)
					}
				}
				res, err := s.Insert(ctx, t0, batch)
				if err != nil {
					t.Fatalf("insert while claiming: %v", err)
				}
				for _, r := range res {
					want[r.Job.ID] = true
				}
			}
			if err := os.WriteFile(done, nil, 0o644); err != nil {
				t.Fatal(err)
			}
			seen := map[int64]string{}
			for i, cmd := range cmds {
				if err := cmd.Wait(); err != nil {
					t.Fatalf("helper %d: %v", i, err)
				}
				for _, line := range strings.Split(outs[i].String(), "\n") {
					if r, ok := strings.CutPrefix(line, "RETRIES "); ok {
						t.Logf("helper %d retried %s transient errors", i, r)
					}
					ids, ok := strings.CutPrefix(line, "IDS ")
					if !ok || ids == "" {
						continue
					}
					for _, f := range strings.Split(ids, ",") {
						id, _ := strconv.ParseInt(f, 10, 64)
						if prev, dup := seen[id]; dup {
							t.Errorf("job %d claimed by helper %d and by %s", id, i, prev)
						}
						seen[id] = "helper " + strconv.Itoa(i)
					}
				}
			}
			t.Logf("parent retried %d transient errors", s.retries.Load())
			if len(seen) != len(want) {
				t.Errorf("helpers claimed %d jobs; %d were inserted", len(seen), len(want))
			}
			for id := range want {
				if _, ok := seen[id]; !ok {
					t.Errorf("job %d was never claimed", id)
				}
			}
		})
	}
}

// TestInsertsDuringClaims is the deadlock scenario in one process: writers
// insert (with and without unique keys) while claimers claim and finish
// from the same queue on two pools. No call may fail.
func TestInsertsDuringClaims(t *testing.T) {
	for _, strategy := range []contract.ClaimStrategy{contract.StrategySkipLocked, contract.StrategyOptimistic} {
		t.Run(string(strategy), func(t *testing.T) {
			dsn := dbtest.MySQLDSN(t)
			ctx := context.Background()
			a, err := Open(ctx, dsn, WithStrategy(strategy))
			if err != nil {
				t.Fatal(err)
			}
			defer a.Close()
			b, err := Open(ctx, dsn, WithStrategy(strategy))
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			var wg sync.WaitGroup
			var stop atomic.Bool
			var inserted, claimed atomic.Int64
			errs := make(chan error, 100)
			for w := range 3 {
				s := []*Store{a, b}[w%2]
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := 0; i < 40; i++ {
						batch := make([]contract.InsertParams, 10)
						for k := range batch {
							batch[k] = job("q", "k")
							batch[k].Priority = 1 + (i+k)%10
							if k%3 == 0 {
								batch[k].UniqueKey = fmt.Sprintf("u-%d-%d", i%7, k) // collides across writers
							}
						}
						if _, err := s.Insert(ctx, t0, batch); err != nil {
							errs <- fmt.Errorf("insert: %w", err)
							return
						}
						inserted.Add(int64(len(batch)))
					}
				}()
			}
			var cwg sync.WaitGroup
			for w := range 4 {
				s := []*Store{a, b}[w%2]
				worker := "w" + strconv.Itoa(w)
				cwg.Add(1)
				go func() {
					defer cwg.Done()
					for !stop.Load() {
						jobs, err := s.Claim(ctx, contract.ClaimParams{Queue: "q", WorkerID: worker, Limit: 5, Now: t0, LeaseUntil: t0.Add(time.Hour)})
						if err != nil {
							errs <- fmt.Errorf("claim: %w", err)
							return
						}
						var outs []contract.Outcome
						for i, j := range jobs {
							kind := contract.OutcomeComplete
							if i%3 == 1 {
								kind = contract.OutcomeDiscard
							}
							outs = append(outs, contract.Outcome{JobID: j.ID, WorkerID: worker, ClaimSeq: j.ClaimSeq, Attempt: j.Attempt, Kind: kind, At: t0, Delete: i%2 == 0 && kind == contract.OutcomeComplete})
						}
						if len(outs) > 0 {
							if _, err := s.Finish(ctx, outs); err != nil {
								errs <- fmt.Errorf("finish: %w", err)
								return
							}
						}
						claimed.Add(int64(len(jobs)))
					}
				}()
			}
			wg.Wait()
			time.Sleep(200 * time.Millisecond)
			stop.Store(true)
			cwg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
			t.Logf("inserted %d inputs, claimed %d jobs; retried %d+%d transient errors", inserted.Load(), claimed.Load(), a.retries.Load(), b.retries.Load())
			if claimed.Load() == 0 {
				t.Error("nothing was claimed")
			}
		})
	}
}
