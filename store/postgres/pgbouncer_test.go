//go:build linux

package postgres

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/backlogq/backlog/core/contract"
	"github.com/backlogq/backlog/internal/dbserver"
	"github.com/backlogq/backlog/store"
	"github.com/backlogq/backlog/store/internal/storebench"
	"github.com/backlogq/backlog/storetest"
	"github.com/jackc/pgx/v5"
)

// pgbouncerBase is the store URL of the database test through pb, with the
// parameters a user behind a transaction pooler writes; add a schema.
func pgbouncerBase(pb, pg *dbserver.Server) string {
	return pb.DSN() + "&pooler=transaction&listen_host=127.0.0.1:" + strconv.Itoa(pg.Port())
}

// TestConformanceThroughPgBouncer runs the conformance suite through a
// PgBouncer in transaction pooling in front of a private PostgreSQL, each
// store opened from its URL with pooler=transaction and listen_host (so
// the notification rules run over a direct connection).
func TestConformanceThroughPgBouncer(t *testing.T) {
	pb, pg := dbserver.PgBouncer(t, dbserver.PgBouncerOptions{})
	start := time.Now()
	storetest.Run(t, urlFactory(pgbouncerBase(pb, pg)))
	t.Logf("conformance through PgBouncer (transaction pooling), both strategies: %s", time.Since(start).Round(time.Second))
}

// TestConcurrentMigrationsThroughPgBouncer opens six stores on one new
// schema at once through PgBouncer in transaction pooling: every
// migration succeeds, and no advisory lock stays held on the server
// sessions PgBouncer hands to other clients. (A session-level lock did
// neither: the lock and the unlock ran on different server sessions, and
// a session took the lock again on top of its own.)
func TestConcurrentMigrationsThroughPgBouncer(t *testing.T) {
	pb, pg := dbserver.PgBouncer(t, dbserver.PgBouncerOptions{PoolSize: 4})
	url := pgbouncerBase(pb, pg) + "&schema=" + randomSchema()
	for round := range 3 {
		schemaURL := url + "_" + strconv.Itoa(round)
		var wg sync.WaitGroup
		errs := make([]error, 6)
		for i := range errs {
			wg.Go(func() {
				s, err := store.Open(context.Background(), schemaURL)
				if err == nil {
					s.Close()
				}
				errs[i] = err
			})
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Errorf("round %d: migrator %d: %v", round, i, err)
			}
		}
	}
	conn, err := pgx.Connect(context.Background(), pg.DSN())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var held int
	if err := conn.QueryRow(context.Background(), "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'").Scan(&held); err != nil {
		t.Fatal(err)
	}
	if held != 0 {
		t.Errorf("%d advisory locks held after the migrations", held)
	}
}

// TestListenThroughPgBouncer: behind a transaction pooler, a store without
// a direct connection refuses to listen, saying why; a store not told of
// the pooler finds out with its probe instead of listening to nothing; a
// store with listen_host hears an insert.
func TestListenThroughPgBouncer(t *testing.T) {
	pb, pg := dbserver.PgBouncer(t, dbserver.PgBouncerOptions{})
	ctx := context.Background()

	noDirect := openStoreURL(t, pb.DSN()+"&pooler=transaction&schema="+randomSchema())
	if _, err := noDirect.Listen(ctx); !errors.Is(err, contract.ErrUnsupported) || !strings.Contains(err.Error(), "listen_host") {
		t.Errorf("Listen behind a transaction pooler without listen_host: %v; want core.ErrUnsupported naming listen_host", err)
	}

	// Not told of the pooler (the exec mode set by hand, as a user who
	// only fixed the prepared-statement errors would).
	untold := openStoreURL(t, pb.DSN()+"&default_query_exec_mode=exec&schema="+randomSchema())
	begin := time.Now()
	uctx, ucancel := context.WithCancel(ctx)
	defer ucancel()
	if ch, err := untold.Listen(uctx); !errors.Is(err, contract.ErrUnsupported) || !strings.Contains(err.Error(), "did not reach") {
		if err == nil {
			ucancel() // a listener that hears nothing: end it
			for range ch {
			}
		}
		t.Errorf("Listen through a transaction pooler, not told of it: %v; want core.ErrUnsupported saying the probe did not arrive", err)
	}
	t.Logf("the probe gave up after %s", time.Since(begin).Round(time.Millisecond))

	direct := openStoreURL(t, pgbouncerBase(pb, pg)+"&schema="+randomSchema())
	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ch, err := direct.Listen(lctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := direct.Insert(ctx, t0, []contract.InsertParams{testJob("woken")}); err != nil {
		t.Fatal(err)
	}
	select {
	case n := <-ch:
		if n.Kind != contract.NotifyInsert || n.Queue != "woken" {
			t.Errorf("notification %+v; want an insert into woken", n)
		}
	case <-time.After(5 * time.Second):
		t.Error("no notification over listen_host within 5 s of an insert")
	}
}

// BenchmarkPgBouncer is BenchmarkClaimFinish and BenchmarkInsert on one
// private PostgreSQL, directly (pgx's default statement cache, and its
// exec mode, which pooler=transaction uses) and through a PgBouncer in
// transaction pooling (pooler=transaction), for the cost of the pooler
// and of its exec mode apart; b.N is jobs.
//
//	go test -run '^$' -bench PgBouncer -benchtime 20000x ./store/postgres/
func BenchmarkPgBouncer(b *testing.B) {
	pb, pg := dbserver.PgBouncer(b, dbserver.PgBouncerOptions{})
	for _, via := range []string{"direct", "direct-exec", "pgbouncer"} {
		url := func() string {
			switch via {
			case "direct":
				return pg.DSN() + "&schema=" + randomSchema()
			case "direct-exec":
				return pg.DSN() + "&default_query_exec_mode=exec&schema=" + randomSchema()
			}
			return pgbouncerBase(pb, pg) + "&schema=" + randomSchema()
		}
		b.Run(via+"/claim-finish", func(b *testing.B) {
			s := openStoreURL(b, url())
			storebench.Insert(b, s, benchNow, b.N, storebench.Job(benchNow, `{}`))
			storebench.ClaimFinish(b, s, benchNow)
		})
		b.Run(via+"/insert", func(b *testing.B) {
			storebench.InsertLoop(b, openStoreURL(b, url()), benchNow)
		})
	}
}
