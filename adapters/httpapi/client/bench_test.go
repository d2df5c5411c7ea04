package client_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/backlogq/backlog/adapters/httpapi"
	"github.com/backlogq/backlog/adapters/httpapi/client"
	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/internal/teststores"
)

// BenchmarkRemoteDrain measures remote workers end to end: a batch of
// no-op jobs submitted over HTTP, drained by Go client.Workers over HTTP
// (long-poll claims, outcomes reported in batches), on a real server on
// loopback. It reports jobs/s; one iteration drains benchJobs jobs.
//
//	go test -run '^$' -bench RemoteDrain -benchtime 3x ./adapters/httpapi/client/
func BenchmarkRemoteDrain(b *testing.B) {
	const benchJobs = 5000
	for _, be := range teststores.All()[1:3] { // sqlite, postgres
		for _, workers := range []int{1, 4} {
			b.Run(fmt.Sprintf("%s/workers=%d", be.Name, workers), func(b *testing.B) {
				st := be.Open(b)
				c, err := core.NewClient(st, core.Config{MaintenanceInterval: -1, Logger: quiet(), Retention: &core.Retention{}})
				if err != nil {
					b.Fatal(err)
				}
				api, err := httpapi.New(c, httpapi.Config{Logger: quiet()})
				if err != nil {
					b.Fatal(err)
				}
				hs := httptest.NewServer(api)
				defer hs.Close()
				defer api.Close()
				cl, err := client.New(hs.URL, client.WithLogger(quiet()))
				if err != nil {
					b.Fatal(err)
				}
				ctx := context.Background()
				done := make(chan struct{}, benchJobs)
				var total time.Duration
				for range b.N {
					for i := 0; i < benchJobs; i += 1000 {
						batch := make([]client.SubmitRequest, 1000)
						for k := range batch {
							batch[k] = client.SubmitRequest{Kind: "noop", Args: json.RawMessage(`{}`)}
						}
						if _, err := cl.SubmitBatch(ctx, batch); err != nil {
							b.Fatal(err)
						}
					}
					wctx, stop := context.WithCancel(ctx)
					errs := make(chan error, workers)
					start := time.Now()
					for k := range workers {
						w, err := client.NewWorker(cl, client.WorkerConfig{
							ID: fmt.Sprintf("bench-%d", k), Queues: []string{"default"}, Concurrency: 50, Logger: quiet(),
							Handler: func(context.Context, *client.Job) (json.RawMessage, error) {
								done <- struct{}{}
								return nil, nil
							},
						})
						if err != nil {
							b.Fatal(err)
						}
						go func() { errs <- w.Run(wctx) }()
					}
					for range benchJobs {
						<-done
					}
					// The last outcomes are in flight: wait until the store agrees.
					for {
						stats, err := st.Stats(ctx)
						if err != nil {
							b.Fatal(err)
						}
						left := 0
						for _, q := range stats {
							left += q.Counts[core.StateAvailable] + q.Counts[core.StateRunning]
						}
						if left == 0 {
							break
						}
						time.Sleep(time.Millisecond)
					}
					total += time.Since(start)
					stop()
					for range workers {
						if err := <-errs; err != nil {
							b.Fatal(err)
						}
					}
				}
				b.ReportMetric(float64(benchJobs*b.N)/total.Seconds(), "jobs/s")
			})
		}
	}
}
