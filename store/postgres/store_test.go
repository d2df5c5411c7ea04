package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/backlogq/backlog/core/contract"
	"github.com/backlogq/backlog/store"
)

var t0 = time.Date(2030, 1, 2, 3, 4, 5, 123456000, time.UTC)

func testJob(queue string) contract.InsertParams {
	return contract.InsertParams{Queue: queue, Kind: "k", Args: json.RawMessage(`{"n":1}`), Priority: 5, MaxAttempts: 3, RunAt: t0}
}

// TestHelperProcess is not a test: TestMultiProcessExclusivity runs the
// test binary again with BACKLOG_PG_HELPER=1 to claim from a shared schema
// in another process. It prints the ids it claimed, one per line.
func TestHelperProcess(t *testing.T) {
	if os.Getenv("BACKLOG_PG_HELPER") != "1" {
		return // only a helper for TestMultiProcessExclusivity
	}
	ctx := context.Background()
	s, err := Open(ctx, testDSN(t), WithSchema(os.Getenv("BACKLOG_PG_SCHEMA")), WithStrategy(contract.ClaimStrategy(os.Getenv("BACKLOG_PG_STRATEGY"))))
	if err != nil {
		fmt.Fprintln(os.Stderr, "open:", err)
		os.Exit(2)
	}
	defer s.Close()
	worker := "proc-" + strconv.Itoa(os.Getpid())
	empty := 0
	for empty < 20 {
		jobs, err := s.Claim(ctx, contract.ClaimParams{Queue: "multi", WorkerID: worker, Limit: 25, Now: t0, LeaseUntil: t0.Add(time.Hour)})
		if err != nil {
			fmt.Fprintln(os.Stderr, "claim:", err)
			os.Exit(2)
		}
		if len(jobs) == 0 {
			empty++
			time.Sleep(5 * time.Millisecond)
			continue
		}
		empty = 0
		outs := make([]contract.Outcome, len(jobs))
		for i, j := range jobs {
			fmt.Println(j.ID)
			outs[i] = contract.Outcome{JobID: j.ID, WorkerID: worker, ClaimSeq: j.ClaimSeq, Attempt: j.Attempt, Kind: contract.OutcomeComplete, At: t0, Delete: i%2 == 0}
		}
		res, err := s.Finish(ctx, outs)
		if err != nil {
			fmt.Fprintln(os.Stderr, "finish:", err)
			os.Exit(2)
		}
		for _, r := range res {
			if !r.Applied {
				fmt.Fprintln(os.Stderr, "finish not applied:", r.JobID)
				os.Exit(2)
			}
		}
	}
	os.Exit(0)
}

// TestMultiProcessExclusivity runs three processes claiming from one
// schema at once, per strategy: every job is claimed exactly once and the
// queue is drained.
func TestMultiProcessExclusivity(t *testing.T) {
	for _, strategy := range []contract.ClaimStrategy{contract.StrategySkipLocked, contract.StrategyOptimistic} {
		t.Run(string(strategy), func(t *testing.T) {
			const jobs = 3000
			s := newTestStore(t, WithStrategy(strategy))
			ctx := context.Background()
			for n := 0; n < jobs; n += 1000 {
				ps := make([]contract.InsertParams, 1000)
				for i := range ps {
					ps[i] = testJob("multi")
				}
				if _, err := s.Insert(ctx, t0, ps); err != nil {
					t.Fatal(err)
				}
			}
			var wg sync.WaitGroup
			outs := make([]string, 3)
			errs := make([]error, 3)
			for p := range 3 {
				cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$")
				cmd.Env = append(os.Environ(), "BACKLOG_PG_HELPER=1", "BACKLOG_PG_SCHEMA="+s.Schema(), "BACKLOG_PG_STRATEGY="+string(strategy))
				wg.Go(func() {
					out, err := cmd.Output()
					outs[p] = string(out)
					if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
						err = fmt.Errorf("%w: %s", err, ee.Stderr)
					}
					errs[p] = err
				})
			}
			wg.Wait()
			seen := map[int64]int{}
			for p := range 3 {
				if errs[p] != nil {
					t.Fatalf("helper process %d: %v", p, errs[p])
				}
				n := 0
				for _, line := range strings.Fields(outs[p]) {
					id, err := strconv.ParseInt(line, 10, 64)
					if err != nil {
						continue // test framework output
					}
					if other, dup := seen[id]; dup {
						t.Errorf("job %d claimed by process %d and again by process %d", id, other, p)
					}
					seen[id] = p
					n++
				}
				t.Logf("process %d claimed %d jobs", p, n)
			}
			if len(seen) != jobs {
				t.Fatalf("%d distinct jobs claimed; want all %d", len(seen), jobs)
			}
			left, err := s.Stats(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, q := range left {
				for _, st := range []contract.State{contract.StateAvailable, contract.StateRunning} {
					if q.Counts[st] != 0 {
						t.Errorf("queue %s has %d %s jobs after the drain", q.Queue, q.Counts[st], st)
					}
				}
			}
		})
	}
}

// awaitNote waits up to 5 s for a notification of kind k on queue.
func awaitNote(t *testing.T, ch <-chan contract.Notification, k contract.NotificationKind, queue string) {
	t.Helper()
	timeout := time.After(5 * time.Second)
	for {
		select {
		case n, ok := <-ch:
			if !ok {
				t.Fatal("listen channel closed")
			}
			if n.Kind == k && n.Queue == queue {
				return
			}
		case <-timeout:
			t.Fatalf("no %s notification for %s", k, queue)
		}
	}
}

// TestNotifyLatency measures insert → notification received.
func TestNotifyLatency(t *testing.T) {
	s := newTestStore(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch, err := s.Listen(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var worst, total time.Duration
	const n = 20
	for i := range n {
		q := "lat" + strconv.Itoa(i)
		start := time.Now()
		if _, err := s.Insert(ctx, t0, []contract.InsertParams{testJob(q)}); err != nil {
			t.Fatal(err)
		}
		awaitNote(t, ch, contract.NotifyInsert, q)
		d := time.Since(start)
		total += d
		worst = max(worst, d)
	}
	t.Logf("insert → notification: mean %v, worst %v over %d inserts", total/n, worst, n)
	if worst > time.Second {
		t.Errorf("worst insert → notification latency %v; want well under a second", worst)
	}
}

// TestNotifyOnePerQueue: one insert call of many due jobs in two queues
// notifies each queue once and a scheduled job notifies nobody, both for
// small batches (INSERT … unnest) and large ones (COPY).
func TestNotifyOnePerQueue(t *testing.T) {
	for _, perQueue := range []int{50, copyMin} {
		t.Run(strconv.Itoa(2*perQueue+1), func(t *testing.T) {
			s := newTestStore(t)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			ch, err := s.Listen(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var ps []contract.InsertParams
			for range perQueue {
				ps = append(ps, testJob("a"), testJob("b"))
			}
			later := testJob("later")
			later.RunAt = t0.Add(time.Hour)
			ps = append(ps, later)
			res, err := s.Insert(ctx, t0, ps)
			if err != nil {
				t.Fatal(err)
			}
			for i, r := range res {
				got, err := s.Get(ctx, r.Job.ID)
				if err != nil || got.Queue != ps[i].Queue || !got.RunAt.Equal(r.Job.RunAt) || got.State != r.Job.State || (i > 0 && r.Job.ID <= res[i-1].Job.ID) {
					t.Fatalf("result %d = %+v; stored %+v, %v (ids must increase in input order)", i, r.Job, got, err)
				}
			}
			if _, err := s.Insert(ctx, t0, []contract.InsertParams{testJob("marker")}); err != nil {
				t.Fatal(err)
			}
			counts := map[string]int{}
			for {
				select {
				case n := <-ch:
					counts[n.Queue]++
					if n.Queue != "marker" {
						continue
					}
				case <-time.After(5 * time.Second):
					t.Fatalf("no marker notification; got %v", counts)
				}
				break
			}
			if counts["a"] != 1 || counts["b"] != 1 || counts["later"] != 0 {
				t.Fatalf("notifications per queue %v; want a:1 b:1 later:0", counts)
			}
		})
	}
}

// TestRolledBackInsertDoesNotNotify: an InsertTx whose transaction rolls
// back sends nothing; a committed one does.
func TestRolledBackInsertDoesNotNotify(t *testing.T) {
	s := newTestStore(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch, err := s.Listen(ctx)
	if err != nil {
		t.Fatal(err)
	}
	tx, err := s.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.InsertTx(ctx, tx, t0, []contract.InsertParams{testJob("rolled-back")}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	tx, err = s.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.InsertTx(ctx, tx, t0, []contract.InsertParams{testJob("committed")}); err != nil {
		t.Fatal(err)
	}
	select {
	case n := <-ch:
		t.Fatalf("notification %+v before the transaction committed", n)
	case <-time.After(100 * time.Millisecond):
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	for {
		select {
		case n := <-ch:
			if n.Queue == "rolled-back" {
				t.Fatalf("notification for the rolled-back insert: %+v", n)
			}
			if n.Queue == "committed" {
				return
			}
		case <-time.After(5 * time.Second):
			t.Fatal("no notification for the committed insert")
		}
	}
}

// TestListenClosesWhenConnectionDrops: terminating the listener's backend
// closes the channel, so the engine listens again.
func TestListenClosesWhenConnectionDrops(t *testing.T) {
	s := newTestStore(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch, err := s.Listen(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Pool().Exec(ctx, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query = $1", "LISTEN \""+s.Channel()+"\""); err != nil {
		t.Fatal(err)
	}
	select {
	case _, ok := <-ch:
		if ok {
			t.Fatal("got a notification; want the channel closed")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("channel still open 5s after the listener's connection was terminated")
	}
}

// TestCancelNotifies: cancelling a claimed job tells listeners its id.
func TestCancelNotifies(t *testing.T) {
	s := newTestStore(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch, err := s.Listen(ctx)
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.Insert(ctx, t0, []contract.InsertParams{testJob("q")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Claim(ctx, contract.ClaimParams{Queue: "q", WorkerID: "w", Limit: 1, Now: t0, LeaseUntil: t0.Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Cancel(ctx, res[0].Job.ID, t0); err != nil {
		t.Fatal(err)
	}
	timeout := time.After(5 * time.Second)
	for {
		select {
		case n := <-ch:
			if n.Kind == contract.NotifyCancel && n.JobID == res[0].Job.ID {
				return
			}
		case <-timeout:
			t.Fatal("no cancel notification")
		}
	}
}

// TestPollOnly: with notify off nothing is sent, and Listen says
// ErrUnsupported so the engine polls.
func TestPollOnly(t *testing.T) {
	s := newTestStore(t, WithNotify(false))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if ch, err := s.Listen(ctx); !errors.Is(err, contract.ErrUnsupported) || ch != nil {
		t.Fatalf("poll-only Listen = %v, %v; want nil and an error wrapping core.ErrUnsupported", ch, err)
	}
	// A listener on the same schema through a notifying handle hears
	// nothing from the poll-only one.
	notifying, err := New(ctx, s.Pool(), WithSchema(s.Schema()), WithMigrate(false))
	if err != nil {
		t.Fatal(err)
	}
	defer notifying.Close()
	lch, err := notifying.Listen(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Insert(ctx, t0, []contract.InsertParams{testJob("q")}); err != nil {
		t.Fatal(err)
	}
	if err := s.PauseQueue(ctx, "q", t0); err != nil {
		t.Fatal(err)
	}
	select {
	case n := <-lch:
		t.Fatalf("poll-only store sent %+v", n)
	case <-time.After(300 * time.Millisecond):
	}
}

// TestConcurrentMigrate: several handles migrating one new schema at once
// all succeed.
func TestConcurrentMigrate(t *testing.T) {
	schema := freshSchema(t)
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Go(func() {
			s, err := Open(context.Background(), testDSN(t), WithSchema(schema))
			if err == nil {
				_, err = s.Insert(context.Background(), t0, []contract.InsertParams{testJob("m")})
				s.Close()
			}
			errs[i] = err
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("migrator %d: %v", i, err)
		}
	}
}

// TestStoreOpenURL opens through the registry and checks that backlog's
// parameters are taken out of the DSN.
func TestStoreOpenURL(t *testing.T) {
	schema := freshSchema(t)
	dsn := testDSN(t)
	sep := "?"
	if strings.Contains(dsn, "?") {
		sep = "&"
	}
	for _, scheme := range []string{"postgres", "postgresql"} {
		u := strings.Replace(dsn, "postgres://", scheme+"://", 1) + sep + "schema=" + schema + "&strategy=optimistic&notify=false"
		st, err := store.Open(context.Background(), u)
		if err != nil {
			t.Fatalf("store.Open(%s): %v", u, err)
		}
		ps := st.(*Store)
		if ps.Schema() != schema || ps.Strategy() != contract.StrategyOptimistic || ps.notify {
			t.Errorf("store.Open(%s): schema %s strategy %s notify %v", u, ps.Schema(), ps.Strategy(), ps.notify)
		}
		st.Close()
	}
	conn, opts, err := ParseURL("postgres://u@h:5432/db?sslmode=disable&schema=x&strategy=skip-locked&notify=false&migrate=false&pool_max_conns=3")
	if err != nil || len(opts) != 4 || conn != "postgres://u@h:5432/db?pool_max_conns=3&sslmode=disable" {
		t.Fatalf("ParseURL = %q, %d options, %v", conn, len(opts), err)
	}
	if _, _, err := ParseURL("postgres://h/db?notify=maybe"); err == nil {
		t.Error("ParseURL accepted notify=maybe")
	}
	if _, err := Open(context.Background(), dsn, WithSchema("Bad-Name")); err == nil {
		t.Error("Open accepted schema Bad-Name")
	}
	if _, err := Open(context.Background(), dsn, WithStrategy("fifo")); !errors.Is(err, contract.ErrUnsupported) {
		t.Errorf("Open with strategy fifo: %v; want ErrUnsupported", err)
	}
}

// TestInsertTxStdlib: InsertTx and CompleteTx accept a *sql.Tx of pgx's
// stdlib driver.
func TestInsertTxStdlib(t *testing.T) {
	s := newTestStore(t)
	ctx := context.Background()
	db := stdlibDB(s)
	defer db.Close()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.InsertTx(ctx, tx, t0, []contract.InsertParams{testJob("std")})
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	got, err := s.Get(ctx, res[0].Job.ID)
	if err != nil || got.Queue != "std" {
		t.Fatalf("Get after stdlib InsertTx: %+v, %v", got, err)
	}
	j, err := s.Claim(ctx, contract.ClaimParams{Queue: "std", WorkerID: "w", Limit: 1, Now: t0, LeaseUntil: t0.Add(time.Minute)})
	if err != nil || len(j) != 1 {
		t.Fatalf("claim: %v %v", j, err)
	}
	tx, err = db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CompleteTx(ctx, tx, contract.Outcome{JobID: j[0].ID, WorkerID: "w", ClaimSeq: j[0].ClaimSeq, Attempt: 1, Kind: contract.OutcomeComplete, At: t0}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Get(ctx, j[0].ID); got.State != contract.StateCompleted {
		t.Fatalf("state %s after stdlib CompleteTx", got.State)
	}
}
