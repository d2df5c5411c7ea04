package postgres

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/backlogq/backlog/core/contract"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// casFault is a pgx tracer that stages an optimistic claim failing part-way:
// right after the candidate read it bumps the version of the first
// candidate from another connection (so the first compare-and-set loses
// that one and a second compare-and-set is needed), and after the first
// compare-and-set it cancels the claim's context, so the second one fails.
type casFault struct {
	rival *pgxpool.Pool
	jobs  string // the jobs table
	// candidates is the function of the optimistic candidate read.
	candidates string
	cancel     context.CancelFunc

	mu    sync.Mutex
	armed bool
	stage int // 0: waiting for the candidate read, 1: for the first CAS, 2: done
}

func (f *casFault) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	return context.WithValue(ctx, casFaultKey{}, d)
}

type casFaultKey struct{}

func (f *casFault) TraceQueryEnd(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryEndData) {
	start, _ := ctx.Value(casFaultKey{}).(pgx.TraceQueryStartData)
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.armed || d.Err != nil {
		return
	}
	switch {
	case f.stage == 0 && strings.HasPrefix(start.SQL, "SELECT id, version FROM "+f.candidates):
		// The rival changes the oldest due job: its version no longer
		// matches the candidate just read.
		if _, err := f.rival.Exec(context.Background(), "UPDATE "+f.jobs+" SET version = version + 1 WHERE id = (SELECT min(id) FROM "+f.jobs+")"); err != nil {
			panic(err)
		}
		f.stage = 1
	case f.stage == 1 && strings.HasPrefix(start.SQL, "WITH c AS (SELECT t.id FROM unnest("):
		f.cancel() // the next statement of this claim fails
		f.stage = 2
	}
}

// TestOptimisticClaimReturnsJobsClaimedBeforeAFailure: when a later
// compare-and-set of an optimistic claim fails, the jobs the earlier ones
// committed come back to the caller instead of sitting running, unworked,
// until their lease expires.
func TestOptimisticClaimReturnsJobsClaimedBeforeAFailure(t *testing.T) {
	pool := testPool(t)
	schema := freshSchema(t)
	fault := &casFault{rival: pool, jobs: schema + ".jobs", candidates: schema + ".claim_candidates"}
	cfg := pool.Config()
	cfg.ConnConfig.Tracer = fault
	cfg.MaxConns = 4
	traced, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer traced.Close()
	s, err := New(context.Background(), traced, WithSchema(schema), WithStrategy(contract.StrategyOptimistic), WithNotify(false))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()

	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	params := make([]contract.InsertParams, 10)
	for i := range params {
		params[i] = contract.InsertParams{Queue: "q", Kind: "k", Args: []byte(`{}`), Priority: 5, MaxAttempts: 3, RunAt: now}
	}
	if _, err := s.Insert(context.Background(), now, params); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	fault.mu.Lock()
	fault.cancel, fault.armed = cancel, true
	fault.mu.Unlock()
	got, err := s.Claim(ctx, contract.ClaimParams{Queue: "q", WorkerID: "w", Limit: 4, Now: now, LeaseUntil: now.Add(time.Minute)})
	fault.mu.Lock()
	stage := fault.stage
	fault.armed = false
	fault.mu.Unlock()
	if stage != 2 {
		t.Fatalf("the fault was not staged (stage %d): the claim's statements changed; update the test", stage)
	}

	running, lerr := s.List(context.Background(), contract.ListParams{States: []contract.State{contract.StateRunning}})
	if lerr != nil {
		t.Fatal(lerr)
	}
	var held []int64
	for _, j := range running {
		if j.WorkerID == "w" {
			held = append(held, j.ID)
		}
	}
	if len(held) == 0 {
		t.Fatalf("the first compare-and-set claimed nothing (claim returned %d jobs, err %v): the fault did not happen as staged", len(got), err)
	}
	if err != nil {
		t.Fatalf("Claim failed with %v while jobs %v were committed as running for the worker: they are stranded until their lease expires", err, held)
	}
	var ids []int64
	for _, j := range got {
		ids = append(ids, j.ID)
	}
	slices.Sort(ids)
	if !slices.Equal(ids, held) {
		t.Fatalf("Claim returned jobs %v; the store holds %v running for the worker", ids, held)
	}
}
