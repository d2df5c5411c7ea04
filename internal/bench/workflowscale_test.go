package bench

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/core/contract"
	"github.com/backlogq/backlog/internal/teststores"
)

type scaleArgs struct{}

func (scaleArgs) Kind() string { return "scale" }

// TestWorkflowScale measures, on every store, what workflows and batches
// cost at the sizes the limits allow: the insert of a workflow of
// MaxWorkflowSteps steps (a chain, so each step but the first waits) and
// of a batch of MaxBatchJobs jobs with an OnFinish callback (time, and
// bytes the Go heap allocated for it), and the finish that releases
// dependants: one job with 1, 100 and 10,000 waiting for it, and one job
// of the batch (its callback counts one less). It runs only with
// BACKLOG_BENCH_PROFILE=1 and prints its figures (docs/benchmarks.md,
// "Workflows and batches at scale"); nothing is asserted on time.
func TestWorkflowScale(t *testing.T) {
	if os.Getenv("BACKLOG_BENCH_PROFILE") != "1" {
		t.Skip("set BACKLOG_BENCH_PROFILE=1 to measure workflows and batches at scale")
	}
	teststores.Run(t, func(t *testing.T, st contract.Store) {
		if _, ok := st.(contract.Dependencies); !ok {
			t.Skip("the store does not implement contract.Dependencies")
		}
		ctx := context.Background()
		c, err := core.NewClient(st, core.Config{AllowUnknownKinds: true, MaintenanceInterval: -1})
		if err != nil {
			t.Fatal(err)
		}
		measure := func(what string, fn func() error) {
			t.Helper()
			runtime.GC()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			start := time.Now()
			if err := fn(); err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			took := time.Since(start)
			runtime.ReadMemStats(&after)
			t.Logf("%-52s %10s %8.1f MiB allocated", what, took.Round(time.Microsecond), float64(after.TotalAlloc-before.TotalAlloc)/(1<<20))
		}

		var w core.Workflow
		for i := range core.MaxWorkflowSteps {
			var after []string
			if i > 0 {
				after = []string{fmt.Sprint(i - 1)}
			}
			w.Add(fmt.Sprint(i), scaleArgs{}, &core.Options{Queue: "chain"}, after...)
		}
		measure(fmt.Sprintf("insert a workflow of %d steps (a chain)", w.Len()), func() error {
			_, err := c.EnqueueWorkflow(ctx, &w)
			return err
		})

		b := &core.Batch{}
		for range core.MaxBatchJobs {
			b.Add(scaleArgs{}, &core.Options{Queue: "batch"})
		}
		b.OnFinish(scaleArgs{}, &core.Options{Queue: "callback"})
		var batch core.BatchResult
		measure(fmt.Sprintf("insert a batch of %d jobs and its callback", b.Len()), func() (err error) {
			batch, err = c.EnqueueBatch(ctx, b)
			return err
		})

		// finish claims one job of queue and completes it, timing the
		// Finish call alone.
		finish := func(what, queue string) {
			t.Helper()
			got, err := st.Claim(ctx, contract.ClaimParams{Queue: queue, WorkerID: "scale", Limit: 1, Now: time.Now(), LeaseUntil: time.Now().Add(time.Minute)})
			if err != nil || len(got) != 1 {
				t.Fatalf("claim of queue %s: %d jobs, %v", queue, len(got), err)
			}
			j := got[0]
			measure(what, func() error {
				res, err := st.Finish(ctx, []contract.Outcome{{JobID: j.ID, WorkerID: "scale", ClaimSeq: j.ClaimSeq, Kind: contract.OutcomeComplete, At: time.Now()}})
				if err == nil && !res[0].Applied {
					err = fmt.Errorf("finish of job %d not applied", j.ID)
				}
				return err
			})
		}
		finish("finish a batch job (its callback counts one less)", "batch")
		finish("finish a chain step (releases the next step)", "chain")
		for _, n := range []int{1, 100, 10_000} {
			q := fmt.Sprintf("fan%d", n)
			ps := make([]core.InsertParams, n+1)
			ps[0] = core.InsertParams{Queue: q, Kind: "scale", Args: []byte(`{}`)}
			for i := 1; i <= n; i++ {
				ps[i] = core.InsertParams{Queue: q + "-after", Kind: "scale", Args: []byte(`{}`), DependsOnIndex: []int{0}}
			}
			if _, err := c.EnqueueMany(ctx, ps); err != nil {
				t.Fatal(err)
			}
			finish(fmt.Sprintf("finish a job that %d jobs wait for (releases them)", n), q)
			if got, err := st.List(ctx, contract.ListParams{Queue: q + "-after", States: []contract.State{contract.StateAvailable}, Limit: 1}); err != nil || len(got) != 1 {
				t.Fatalf("after the finish, queue %s-after has %d available jobs listed (%v); want them released", q, len(got), err)
			}
		}
		if j, err := st.Get(ctx, batch.OnFinish.ID); err != nil || j.WaitingFor != core.MaxBatchJobs-1 {
			t.Fatalf("the batch callback waits for %d jobs (%v); want %d", j.WaitingFor, err, core.MaxBatchJobs-1)
		}
	})
}
