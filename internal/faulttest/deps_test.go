//go:build linux

package faulttest

import (
	"fmt"
	"testing"
	"time"

	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/core/contract"
)

// TestDependenciesKillAndRestart is the fault scenario of job
// dependencies: batches whose callback waits for all of their jobs, and
// chains of steps, run on the HandleTx scenario's workers (txWorker: one
// row of effect per execution, written in the transaction that completes
// the job and so releases what waits for it), which are SIGKILLed again
// and again, most often inside that transaction, while the database
// server is restarted under them (PostgreSQL, MariaDB; SQLite has no
// server, only the kills). At the end every job completed with exactly
// one row, and each one counted, when it ran, every one of its
// dependencies as completed: a killed finish released nothing, and the
// one that committed released its dependants once, neither early nor
// twice.
func TestDependenciesKillAndRestart(t *testing.T) {
	requireFault(t)
	for _, backend := range []string{"sqlite", "postgres", "mariadb"} {
		t.Run(backend, func(t *testing.T) { depsFault(t, backend) })
	}
}

func depsFault(t *testing.T, backend string) {
	cfg := loadConfig(t)
	const batchSize, chainLen = 8, 5
	groups := max(cfg.jobs/100, 4) // batches, and as many chains
	window := min(cfg.killWindow, 20*time.Second)
	hold := 400 * time.Millisecond
	if backend == "sqlite" {
		hold = 25 * time.Millisecond
	}
	table := "fault_dep_effects"
	ctx, sc := openTxScenario(t, backend, table)
	st, tr := sc.st, sc.tr
	if _, ok := st.(contract.Dependencies); !ok {
		t.Fatalf("store %T has no contract.Dependencies", st)
	}
	producer, err := core.NewClient(st, core.Config{AllowUnknownKinds: true})
	if err != nil {
		t.Fatal(err)
	}
	// want: each job's id → how many dependencies it waits for. The
	// batches and chains come due over the first half of the fault window.
	want := map[int64]int{}
	now := time.Now()
	for g := range groups {
		opts := &core.Options{MaxAttempts: 100, RunAt: now.Add(window / 2 * time.Duration(g) / time.Duration(groups))}
		b := &core.Batch{}
		for range batchSize {
			b.Add(txArgs{}, opts)
		}
		b.OnFinish(txArgs{}, &core.Options{MaxAttempts: 100})
		res, err := producer.EnqueueBatch(ctx, b)
		if err != nil {
			t.Fatal(err)
		}
		for _, j := range res.Jobs {
			want[j.ID] = 0
		}
		want[res.OnFinish.ID] = batchSize
		var w core.Workflow
		for k := range chainLen {
			var after []string
			if k > 0 {
				after = []string{fmt.Sprint(k - 1)}
			}
			w.Add(fmt.Sprint(k), txArgs{}, opts, after...)
		}
		wr, err := producer.EnqueueWorkflow(ctx, &w)
		if err != nil {
			t.Fatal(err)
		}
		for name, j := range wr.Steps {
			want[j.ID] = 1 // each step waits for the one before it
			if name == "0" {
				want[j.ID] = 0
			}
		}
	}

	kills, restarted, logs := runTxFleet(t, cfg, sc.bin, sc.url, table, hold, window, sc.srv)
	waitCompleted(t, ctx, st, len(want), cfg.drain, logs)

	var rows [][]int64
	if err := tr.RunTx(ctx, func(tx any) (err error) {
		rows, err = txInts(ctx, tx, "SELECT job_id, COUNT(*), MAX(attempt), MIN(ends), MAX(ends) FROM "+table+" GROUP BY job_id", 5)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	var bad []string
	rerun := 0
	for _, r := range rows {
		deps, ok := want[r[0]]
		switch {
		case !ok:
			bad = append(bad, fmt.Sprintf("job %d is not one of the scenario's", r[0]))
		case r[1] != 1:
			bad = append(bad, fmt.Sprintf("job %d: %d rows", r[0], r[1]))
		case r[3] != int64(deps) || r[4] != int64(deps):
			bad = append(bad, fmt.Sprintf("job %d ran counting %d..%d completed dependencies; want %d", r[0], r[3], r[4], deps))
		}
		if r[2] > 1 {
			rerun++
		}
	}
	if len(rows) != len(want) || len(bad) > 0 {
		t.Fatalf("the application table holds rows for %d of %d jobs; %v", len(rows), len(want), bad)
	}
	if rerun == 0 && restarted {
		t.Errorf("no job needed a second attempt: the faults met no execution (raise %s)", envJobs)
	}
	t.Logf("%s: %d batches of %d and %d chains of %d on %d workers, %d SIGKILLs, database restarted: %v; %d jobs ran again after a fault; every job completed once, released by all of its dependencies",
		backend, groups, batchSize, groups, chainLen, cfg.workers, kills, restarted, rerun)
}
