package postgres

import (
	"context"
	"io"
	"log/slog"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/core/contract"
)

// Connections that drop mid-run (a server restart, a proxy, a failover) must
// lose no job: the engine's claims, finishes, heartbeats and notifications
// all hit dropped connections here, over and over, and every job must still
// end completed. The test kills only its own backends (by application
// name), so other tests sharing the server are not disturbed.
func TestWorkersRecoverFromDroppedConnections(t *testing.T) {
	if testing.Short() {
		t.Skip("takes several seconds")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	schema := freshSchema(t)
	u, err := url.Parse(testDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	app := "bl_recover_" + schema
	q := u.Query()
	q.Set("application_name", app)
	u.RawQuery = q.Encode()
	st, err := Open(ctx, u.String(), WithSchema(schema))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()

	const jobs = 1000
	var ran atomic.Int64
	h := core.NewHandlers()
	h.HandleRaw("k", func(ctx context.Context, j *contract.Job) error {
		ran.Add(1)
		time.Sleep(40 * time.Millisecond) // 1000 × 40 ms / 20 workers ≈ the 3 s of killing
		return nil
	})
	client, err := core.NewClient(st, core.Config{
		Queues:              map[string]core.QueueConfig{"q": {MaxWorkers: 20}},
		Handlers:            h,
		Logger:              slog.New(slog.NewTextHandler(io.Discard, nil)),
		Retention:           &core.Retention{Completed: time.Hour},
		LeaseDuration:       3 * time.Second,
		HeartbeatInterval:   500 * time.Millisecond,
		MaintenanceInterval: 300 * time.Millisecond,
		PollInterval:        100 * time.Millisecond,
		MaxClaim:            20,
	})
	if err != nil {
		t.Fatal(err)
	}
	ps := make([]contract.InsertParams, jobs)
	for i := range ps {
		ps[i] = contract.InsertParams{Queue: "q", Kind: "k"}
	}
	if _, err := client.EnqueueMany(ctx, ps); err != nil {
		t.Fatal(err)
	}
	if err := client.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer client.Stop(context.Background())

	// Kill every backend of the store's pool every 100 ms for a while.
	admin := testPool(t)
	killed := 0
	for i := 0; i < 30 && ctx.Err() == nil; i++ {
		var n int
		if err := admin.QueryRow(ctx, "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = $1", app).Scan(&n); err != nil {
			t.Fatal(err)
		}
		killed += n
		time.Sleep(100 * time.Millisecond)
	}
	if killed == 0 {
		t.Fatal("no backend was killed: the test did not exercise anything")
	}
	for {
		stats, err := st.Stats(ctx)
		if err == nil && len(stats) == 1 && stats[0].Counts[contract.StateCompleted] == jobs {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("jobs did not all complete after dropped connections: %+v (err %v)", stats, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if ran.Load() < jobs {
		t.Fatalf("%d jobs completed but handlers ran %d times", jobs, ran.Load())
	}
	t.Logf("killed %d backends; %d jobs completed with %d handler runs (at-least-once)", killed, jobs, ran.Load())
}
