package sqlite

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/backlogq/backlog/core/contract"
	"github.com/backlogq/backlog/store"
)

// The helper process: claims from the database named by the environment
// until the parent has finished inserting and the queue is drained,
// finishing each batch, and prints the ids it claimed. It is this test binary re-executed by TestMultiProcessClaim.
const helperEnv = "BACKLOG_SQLITE_HELPER_DB"

func TestHelperProcess(t *testing.T) {
	path := os.Getenv(helperEnv)
	if path == "" {
		t.Skip("helper process for TestMultiProcessClaim")
	}
	worker := os.Getenv("BACKLOG_SQLITE_HELPER_WORKER")
	ctx := context.Background()
	s, err := Open(ctx, path) // migrates concurrently with the other process
	if err != nil {
		fmt.Fprintln(os.Stderr, "open:", err)
		os.Exit(2)
	}
	defer s.Close()
	var claimed []string
	for {
		jobs, err := s.Claim(ctx, contract.ClaimParams{Queue: "mp", WorkerID: worker, Limit: 7, Now: t0, LeaseUntil: t0.Add(time.Hour)})
		if err != nil {
			fmt.Fprintln(os.Stderr, "claim:", err)
			os.Exit(2)
		}
		if len(jobs) == 0 {
			// Done once the parent has finished inserting (it creates
			// path+".done") and a claim after that found nothing.
			if _, err := os.Stat(path + ".done"); err == nil {
				jobs, err = s.Claim(ctx, contract.ClaimParams{Queue: "mp", WorkerID: worker, Limit: 7, Now: t0, LeaseUntil: t0.Add(time.Hour)})
				if err != nil {
					fmt.Fprintln(os.Stderr, "claim:", err)
					os.Exit(2)
				}
				if len(jobs) == 0 {
					break
				}
			} else {
				time.Sleep(2 * time.Millisecond)
				continue
			}
		}
		var outs []contract.Outcome
		for _, j := range jobs {
			claimed = append(claimed, strconv.FormatInt(j.ID, 10))
			outs = append(outs, contract.Outcome{JobID: j.ID, WorkerID: worker, ClaimSeq: j.ClaimSeq, Attempt: j.Attempt, Kind: contract.OutcomeComplete, At: t0})
		}
		res, err := s.Finish(ctx, outs)
		if err != nil {
			fmt.Fprintln(os.Stderr, "finish:", err)
			os.Exit(2)
		}
		for _, r := range res {
			if !r.Applied {
				fmt.Fprintln(os.Stderr, "finish not applied for", r.JobID)
				os.Exit(2)
			}
		}
	}
	fmt.Println("IDS " + strings.Join(claimed, ","))
	os.Exit(0)
}

// TestMultiProcessClaim runs two processes (re-executions of this test
// binary) that migrate one fresh file concurrently, then claim and finish
// from it while this process keeps inserting: no job may be claimed twice
// and the queue must drain.
func TestMultiProcessClaim(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	path := filepath.Join(t.TempDir(), "shared.db")
	const total = 3000
	var procs []*exec.Cmd
	var outs []*strings.Builder
	for i := 0; i < 2; i++ {
		cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$", "-test.count=1")
		cmd.Env = append(os.Environ(), helperEnv+"="+path, fmt.Sprintf("BACKLOG_SQLITE_HELPER_WORKER=proc%d", i))
		out := &strings.Builder{}
		cmd.Stdout = out
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		procs = append(procs, cmd)
		outs = append(outs, out)
	}
	// This process migrates concurrently too, then inserts in batches while
	// the helpers claim.
	ctx := context.Background()
	s, err := store.Open(ctx, "sqlite://"+(&url.URL{Path: path}).EscapedPath())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for n := 0; n < total; n += 100 {
		var ps []contract.InsertParams
		for i := 0; i < 100; i++ {
			ps = append(ps, job("mp", "k"))
		}
		if _, err := s.Insert(ctx, t0, ps); err != nil {
			t.Fatal(err)
		}
		time.Sleep(3 * time.Millisecond) // let both helpers start and compete
	}
	if err := os.WriteFile(path+".done", nil, 0o644); err != nil {
		t.Fatal(err)
	}
	seen := map[int64]string{}
	for i, cmd := range procs {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("helper %d: %v", i, err)
		}
		line, found := "", false
		for _, l := range strings.Split(outs[i].String(), "\n") {
			if rest, ok := strings.CutPrefix(l, "IDS "); ok {
				line, found = rest, true
			}
		}
		if !found {
			t.Fatalf("helper %d printed no ids: %q", i, outs[i].String())
		}
		n := 0
		for _, f := range strings.Split(line, ",") {
			if f == "" {
				continue
			}
			n++
			id, _ := strconv.ParseInt(f, 10, 64)
			if prev, dup := seen[id]; dup {
				t.Fatalf("job %d claimed by both %s and proc%d", id, prev, i)
			}
			seen[id] = fmt.Sprint("proc", i)
		}
		t.Logf("proc%d claimed %d jobs", i, n)
	}
	if len(seen) != total {
		t.Fatalf("claimed %d distinct jobs, want %d", len(seen), total)
	}
	st, err := s.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(st) != 1 || st[0].Counts[contract.StateCompleted] != total || len(st[0].Counts) != 1 {
		t.Fatalf("queue not drained: %+v", st)
	}
}

// TestConcurrentClaimers claims from one queue with many goroutines on two
// handles while inserts continue: no duplicates, all drained.
func TestConcurrentClaimers(t *testing.T) {
	concurrentClaimers(t)
}

func concurrentClaimers(t *testing.T, opts ...Option) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "c.db")
	a, err := Open(ctx, path, opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := Open(ctx, path, opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	const total = 2000
	var mu sync.Mutex
	seen := map[int64]bool{}
	var wg sync.WaitGroup
	done := make(chan struct{})
	for g := 0; g < 8; g++ {
		s := a
		if g%2 == 1 {
			s = b
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			w := fmt.Sprint("g", g)
			for {
				jobs, err := s.Claim(ctx, contract.ClaimParams{Queue: "c", WorkerID: w, Limit: 5, Now: t0, LeaseUntil: t0.Add(time.Hour)})
				if err != nil {
					t.Error(err)
					return
				}
				if len(jobs) == 0 {
					select {
					case <-done:
						return
					default:
						time.Sleep(time.Millisecond)
						continue
					}
				}
				var outs []contract.Outcome
				mu.Lock()
				for _, j := range jobs {
					if seen[j.ID] {
						t.Errorf("job %d claimed twice", j.ID)
					}
					seen[j.ID] = true
					outs = append(outs, contract.Outcome{JobID: j.ID, WorkerID: w, ClaimSeq: j.ClaimSeq, Attempt: 1, Kind: contract.OutcomeComplete, At: t0, Delete: j.ID%2 == 0})
				}
				mu.Unlock()
				if _, err := s.Finish(ctx, outs); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	for n := 0; n < total; n += 50 {
		var ps []contract.InsertParams
		for i := 0; i < 50; i++ {
			ps = append(ps, job("c", "k"))
		}
		if _, err := a.Insert(ctx, t0, ps); err != nil {
			t.Fatal(err)
		}
	}
	// Wait for the drain, then stop the claimers.
	deadline := time.Now().Add(30 * time.Second)
	for {
		mu.Lock()
		n := len(seen)
		mu.Unlock()
		if n == total || time.Now().After(deadline) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	close(done)
	wg.Wait()
	if len(seen) != total {
		t.Fatalf("claimed %d of %d", len(seen), total)
	}
}

// TestConcurrentMigrate migrates one fresh file from several handles at once.
func TestConcurrentMigrate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.db")
	var wg sync.WaitGroup
	errs := make(chan error, 6)
	for i := 0; i < 6; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := Open(context.Background(), path)
			if err == nil {
				err = s.Migrate(context.Background())
				s.Close()
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	s, err := Open(context.Background(), path, WithMigrate(false))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var n int
	if err := s.DB().QueryRow("SELECT COUNT(*) FROM backlog_goose_db_version WHERE version_id = 1").Scan(&n); err != nil || n != 1 {
		t.Fatalf("version 1 recorded %d times (%v)", n, err)
	}
}

func TestParseURL(t *testing.T) {
	for _, tc := range []struct {
		in, path string
		bad      bool
	}{
		{in: "sqlite:jobs.db", path: "jobs.db"},
		{in: "sqlite:dir/jobs%20x.db?prefix=a_", path: "dir/jobs x.db"},
		{in: "sqlite:///abs/jobs.db", path: "/abs/jobs.db"},
		{in: "sqlite:/abs/jobs.db", path: "/abs/jobs.db"},
		{in: "sqlite://./rel.db", path: "./rel.db"},
		{in: "sqlite::memory:", path: ":memory:"},
		{in: "sqlite::memory:?migrate=false&strategy=serialized&busy_timeout=2s", path: ":memory:"},
		{in: "sqlite:", bad: true},
		{in: "sqlite:x.db?nope=1", bad: true},
		{in: "sqlite:x.db?migrate=maybe", bad: true},
		{in: "sqlite:x.db?busy_timeout=5", bad: true},
	} {
		u, err := url.Parse(tc.in)
		if err != nil {
			t.Fatal(err)
		}
		path, _, err := parseURL(u)
		if tc.bad {
			if err == nil {
				t.Errorf("%s: no error", tc.in)
			}
			continue
		}
		if err != nil || path != tc.path {
			t.Errorf("%s: path %q, err %v; want %q", tc.in, path, err, tc.path)
		}
	}
	ctx := context.Background()
	s, err := store.Open(ctx, "sqlite::memory:?prefix=u_")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.(*Store).Prefix() != "u_" {
		t.Fatal("prefix not applied")
	}
	if _, err := store.Open(ctx, "sqlite::memory:?strategy=skip-locked"); err == nil || !strings.Contains(err.Error(), "serialized") {
		t.Fatalf("skip-locked via URL: %v", err)
	}
}
