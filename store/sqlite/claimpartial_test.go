package sqlite

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/store/internal/sqlq"
)

// flakyWrites runs the first write transaction after bumping one job's
// version (another claimer winning that row between read and write), and
// fails the second write transaction, as a lost connection would.
type flakyWrites struct {
	*sqlq.StdDB
	mu     sync.Mutex
	writes int
	steal  int64
	table  string
}

func (f *flakyWrites) InTx(ctx context.Context, fn func(sqlq.Conn) error) error {
	f.mu.Lock()
	f.writes++
	n := f.writes
	f.mu.Unlock()
	switch n {
	case 1:
		if _, err := f.DB.ExecContext(ctx, "UPDATE "+f.table+" SET version = version + 1 WHERE id = ?", f.steal); err != nil {
			return err
		}
	case 2:
		return errors.New("injected: connection lost")
	}
	return f.StdDB.InTx(ctx, fn)
}

// A claim that fails after an earlier step of it committed must still hand
// over the jobs that step claimed; returning only the error would leave them
// running under this worker, unworked, until their lease expired.
func TestOptimisticClaimKeepsJobsClaimedBeforeAFailure(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "p.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	now := core.UTC(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	ps := make([]core.InsertParams, 10)
	for i := range ps {
		ps[i] = core.InsertParams{Queue: "q", Kind: "k", Args: []byte(`{}`), Priority: 5, MaxAttempts: 3, RunAt: now}
	}
	res, err := s.Insert(ctx, now, ps)
	if err != nil {
		t.Fatal(err)
	}
	db := &flakyWrites{StdDB: &sqlq.StdDB{DB: s.DB(), WriteLock: &sync.Mutex{}}, steal: res[0].Job.ID, table: s.Prefix() + "jobs"}
	inner, err := sqlq.New(sqlq.Config{Dialect: dialect{}, DB: db, Tables: sqlq.PrefixTables(s.Prefix()), Strategy: core.StrategyOptimistic})
	if err != nil {
		t.Fatal(err)
	}
	got, err := inner.Claim(ctx, core.ClaimParams{Queue: "q", WorkerID: "w", Limit: 5, Now: now, LeaseUntil: now.Add(time.Minute)})
	if err != nil {
		t.Fatalf("Claim returned %v and dropped the jobs its first step claimed", err)
	}
	if len(got) != 4 {
		t.Fatalf("Claim returned %d jobs; the first step claimed 4 (one candidate was taken by another claimer)", len(got))
	}
	for _, j := range got {
		if j.State != core.StateRunning || j.WorkerID != "w" {
			t.Fatalf("claimed job %d: state %s worker %q", j.ID, j.State, j.WorkerID)
		}
	}
}
