package core_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/core/contract"
	"github.com/backlogq/backlog/store/memory"
	"github.com/backlogq/backlog/store/postgres"
	"github.com/backlogq/backlog/store/sqlite"
	"github.com/backlogq/backlog/storetest/dbtest"
)

type orderArgs struct {
	Customer string   `json:"customer"`
	Items    []string `json:"items"`
	Rush     bool     `json:"rush"`
}

func (orderArgs) Kind() string { return "order" }

type invoiceArgs orderArgs

func (invoiceArgs) Kind() string { return "invoice" }

// storeClient returns a client that enqueues only (no handlers, not
// started) on st, closed with the test.
func storeClient(t *testing.T, st contract.Store, mod func(*core.Config)) *core.Client {
	t.Helper()
	cfg := core.Config{Logger: quietLogger(), MaintenanceInterval: -1}
	if mod != nil {
		mod(&cfg)
	}
	c, err := core.NewClient(st, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return c
}

func TestCanonicalJSON(t *testing.T) {
	for in, want := range map[string]string{
		``: `{}`,
		` { "b" : 1, "a" : [ 2 , {"d":1,"c":2} ] } `: `{"a":[2,{"c":2,"d":1}],"b":1}`,
		`{"n":1.0,"m":1e3}`:                          `{"m":1e3,"n":1.0}`,
		`"a<b"`:                                      `"a\u003cb"`,
		`null`:                                       `null`,
	} {
		got, err := core.CanonicalJSON([]byte(in))
		if err != nil || string(got) != want {
			t.Errorf("CanonicalJSON(%s) = %s, %v; want %s", in, got, err, want)
		}
	}
	for _, bad := range []string{`{`, `{} {}`, `{"a":1} x`, `nope`} {
		if got, err := core.CanonicalJSON([]byte(bad)); err == nil {
			t.Errorf("CanonicalJSON(%s) = %s; want an error", bad, got)
		}
	}
}

func TestArgsUniqueKey(t *testing.T) {
	a, err := core.ArgsUniqueKey("order", []byte(`{"customer":"c1","items":["x"],"rush":false}`))
	if err != nil {
		t.Fatal(err)
	}
	b, err := core.ArgsUniqueKey("order", []byte(` {"rush":false, "items":["x"], "customer":"c1"}`))
	if err != nil {
		t.Fatal(err)
	}
	if a != b || !strings.HasPrefix(a, "args:v1:") || len(a) != 72 {
		t.Errorf("keys %q and %q; want one 72-byte args:v1: key for one value", a, b)
	}
	for kind, args := range map[string]string{
		"invoice": `{"customer":"c1","items":["x"],"rush":false}`, // another kind
		"order":   `{"customer":"c1","items":["x"],"rush":true}`,  // other args
		"orde":    `r{"customer":"c1","items":["x"],"rush":false}`,
	} {
		if k, _ := core.ArgsUniqueKey(kind, []byte(args)); k == a {
			t.Errorf("%s %s: the key of order %s", kind, args, a)
		}
	}
	if _, err := core.ArgsUniqueKey("order", []byte(`{`)); !errors.Is(err, core.ErrInvalidJob) {
		t.Errorf("bad JSON: %v; want ErrInvalidJob", err)
	}
}

// testUniqueByArgs: jobs of one kind with the same args are duplicates,
// whatever the key order and spacing; other args or another kind are not;
// UniqueByArgs with UniqueKey is refused.
func testUniqueByArgs(t *testing.T, c *core.Client) {
	ctx := context.Background()
	by := &core.Options{UniqueByArgs: true}
	first, err := c.Enqueue(ctx, orderArgs{Customer: "c1", Items: []string{"x", "y"}}, by)
	if err != nil || first.Duplicate {
		t.Fatalf("first: %+v, %v", first, err)
	}
	key, _ := core.ArgsUniqueKey("order", []byte(`{"customer":"c1","items":["x","y"],"rush":false}`))
	if first.Job.UniqueKey != key {
		t.Errorf("unique key %q; want ArgsUniqueKey's %q", first.Job.UniqueKey, key)
	}
	again, err := c.Enqueue(ctx, orderArgs{Customer: "c1", Items: []string{"x", "y"}}, by)
	if err != nil || !again.Duplicate || again.Job.ID != first.Job.ID {
		t.Fatalf("same args: %+v, %v; want a duplicate of job %d", again, err, first.Job.ID)
	}
	raw, err := c.EnqueueRaw(ctx, "order", []byte(`{ "rush": false, "items": ["x","y"], "customer": "c1" }`), by)
	if err != nil || !raw.Duplicate || raw.Job.ID != first.Job.ID {
		t.Fatalf("same args reordered: %+v, %v; want a duplicate of job %d", raw, err, first.Job.ID)
	}
	p, err := core.NewInsert(orderArgs{Customer: "c1", Items: []string{"x", "y"}}, by, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	many, err := c.EnqueueMany(ctx, []core.InsertParams{p})
	if err != nil || !many[0].Duplicate {
		t.Fatalf("EnqueueMany of NewInsert with UniqueByArgs: %+v, %v; want a duplicate", many, err)
	}
	for name, args := range map[string]core.Args{
		"other args": orderArgs{Customer: "c1", Items: []string{"y", "x"}},
		"other kind": invoiceArgs{Customer: "c1", Items: []string{"x", "y"}},
	} {
		r, err := c.Enqueue(ctx, args, by)
		if err != nil || r.Duplicate {
			t.Errorf("%s: %+v, %v; want a new job", name, r, err)
		}
	}
	_, err = c.Enqueue(ctx, orderArgs{Customer: "c2"}, &core.Options{UniqueByArgs: true, UniqueKey: "k"})
	if !errors.Is(err, core.ErrInvalidJob) || !strings.Contains(err.Error(), "UniqueByArgs and UniqueKey") {
		t.Errorf("UniqueByArgs with UniqueKey: %v; want ErrInvalidJob naming both", err)
	}
}

func TestUniqueByArgsMemory(t *testing.T) {
	testUniqueByArgs(t, storeClient(t, memory.New(), nil))
}

func TestUniqueByArgsSQLite(t *testing.T) {
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "jobs.db"))
	if err != nil {
		t.Fatal(err)
	}
	testUniqueByArgs(t, storeClient(t, st, nil))
}

// TestUniqueByArgsSealed: with encryption at rest the key comes from the
// plaintext, so sealed args (a fresh nonce each time) still find their
// duplicate.
func TestUniqueByArgsSealed(t *testing.T) {
	k := mustKeyring(t, "k1", map[string][]byte{"k1": testKey(1)})
	c := storeClient(t, memory.New(), func(cfg *core.Config) { cfg.Encryption = &core.Encryption{Keys: k} })
	testUniqueByArgs(t, c)
}

// testEnqueueArgsTx: a job enqueued in a transaction is there after the
// commit and gone after a rollback; a duplicate by args is found in the
// transaction.
func testEnqueueArgsTx(t *testing.T, c *core.Client, begin func() (tx any, commit, rollback func() error)) {
	ctx := context.Background()
	tx, commit, _ := begin()
	res, err := c.EnqueueArgsTx(ctx, tx, orderArgs{Customer: "tx1"}, &core.Options{Queue: "orders", Priority: 2, UniqueByArgs: true})
	if err != nil || res.Duplicate || res.Job.Kind != "order" || res.Job.Queue != "orders" || res.Job.Priority != 2 {
		t.Fatalf("EnqueueArgsTx: %+v, %v", res, err)
	}
	dup, err := c.EnqueueArgsTx(ctx, tx, orderArgs{Customer: "tx1"}, &core.Options{Queue: "orders", UniqueByArgs: true})
	if err != nil || !dup.Duplicate || dup.Job.ID != res.Job.ID {
		t.Fatalf("same args in the transaction: %+v, %v; want a duplicate of %d", dup, err, res.Job.ID)
	}
	if err := commit(); err != nil {
		t.Fatal(err)
	}
	if j, err := c.GetJob(ctx, res.Job.ID); err != nil || j.Kind != "order" {
		t.Fatalf("after commit: %+v, %v", j, err)
	}

	tx, _, rollback := begin()
	gone, err := c.EnqueueArgsTx(ctx, tx, orderArgs{Customer: "tx2"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := rollback(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetJob(ctx, gone.Job.ID); !errors.Is(err, core.ErrNotFound) {
		t.Fatalf("after rollback: %v; want ErrNotFound", err)
	}

	tx, _, rollback = begin()
	defer rollback()
	if _, err := c.EnqueueArgsTx(ctx, tx, nil, nil); !errors.Is(err, core.ErrInvalidJob) {
		t.Errorf("nil args: %v; want ErrInvalidJob", err)
	}
	if _, err := c.EnqueueArgsTx(ctx, tx, orderArgs{}, &core.Options{Priority: 99}); !errors.Is(err, core.ErrInvalidJob) {
		t.Errorf("priority 99: %v; want ErrInvalidJob", err)
	}
}

func TestEnqueueArgsTxSQLite(t *testing.T) {
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "jobs.db"))
	if err != nil {
		t.Fatal(err)
	}
	c := storeClient(t, st, nil)
	testEnqueueArgsTx(t, c, func() (any, func() error, func() error) {
		tx, err := st.DB().Begin()
		if err != nil {
			t.Fatal(err)
		}
		return tx, tx.Commit, tx.Rollback
	})
}

func TestEnqueueArgsTxPostgres(t *testing.T) {
	ctx := context.Background()
	dsn := dbtest.PostgresServerDSN(t)
	var b [6]byte
	_, _ = rand.Read(b[:])
	schema := "bl_argstx_" + hex.EncodeToString(b[:])
	st, err := postgres.Open(ctx, dsn, postgres.WithSchema(schema))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Runs after storeClient's cleanup has closed st: a pool of its own.
		drop, err := postgres.Open(context.Background(), dsn, postgres.WithMigrate(false), postgres.WithMaxConns(1))
		if err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
			return
		}
		defer drop.Close()
		if _, err := drop.Pool().Exec(context.Background(), "DROP SCHEMA IF EXISTS "+schema+" CASCADE"); err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
		}
	})
	c := storeClient(t, st, nil)
	testEnqueueArgsTx(t, c, func() (any, func() error, func() error) {
		tx, err := st.Pool().Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return tx, func() error { return tx.Commit(ctx) }, func() error { return tx.Rollback(ctx) }
	})
}

// TestEnqueueArgsTxUnsupported: a store without transactional inserts
// says so.
func TestEnqueueArgsTxUnsupported(t *testing.T) {
	c := storeClient(t, memory.New(), nil)
	if _, err := c.EnqueueArgsTx(context.Background(), nil, orderArgs{}, nil); !errors.Is(err, core.ErrUnsupported) {
		t.Fatalf("memory store: %v; want ErrUnsupported", err)
	}
}
