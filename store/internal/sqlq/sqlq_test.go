package sqlq

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/backlogq/backlog/core/contract"

	_ "modernc.org/sqlite"
)

func TestValidPrefix(t *testing.T) {
	for _, ok := range []string{"", "backlog_", "A1_", "_x"} {
		if err := ValidPrefix(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range []string{"1a", "a-b", "a;DROP", "a b", strings.Repeat("a", 49), "é"} {
		if ValidPrefix(bad) == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestStandardUpdateFrom(t *testing.T) {
	q := Standard{}.UpdateFrom("t", "v", []string{"id", "x"}, [][]string{{"?", "?"}, {"?", "?"}}, "x = v.x", "t.id = v.id", "t.id")
	want := "WITH v(id,x) AS (VALUES (?,?),(?,?)) UPDATE t SET x = v.x FROM v WHERE t.id = v.id RETURNING t.id"
	if q != want {
		t.Fatalf("got %q", q)
	}
	if got := (Standard{}).DeleteLimit("t", "a = ?", "b", "?"); got != "DELETE FROM t WHERE id IN (SELECT id FROM t WHERE a = ? ORDER BY b LIMIT ?)" {
		t.Fatalf("DeleteLimit %q", got)
	}
}

// dollar is a Standard with Postgres placeholders and casts, to check that
// builders number parameters in textual order.
type dollar struct{ Standard }

func (dollar) Placeholder(n int) string { return Dollar(n) }
func (dollar) Cast(ph string, t Type) string {
	if t == TypeInt {
		return ph + "::bigint"
	}
	return ph
}

func TestBuilderNumbering(t *testing.T) {
	b := newBuilder(dollar{}, 0)
	b.w("a = ", b.argT(int64(1), TypeInt), " AND b = ", b.arg("x"))
	if b.String() != "a = $1::bigint AND b = $2" || len(b.args) != 2 {
		t.Fatalf("%q %v", b.String(), b.args)
	}
}

func TestNewRejects(t *testing.T) {
	db, err := sql.Open("sqlite", ":memory:")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	_, err = New(Config{Dialect: Standard{}, DB: &StdDB{DB: db}, Tables: PrefixTables("x_"), Strategy: contract.StrategySkipLocked})
	if !errors.Is(err, contract.ErrUnsupported) {
		t.Fatalf("skip-locked without row locks: %v", err)
	}
	if _, err := New(Config{Dialect: Standard{}, DB: &StdDB{DB: db}}); err == nil {
		t.Fatal("missing tables accepted")
	}
}

// TestStmtCache checks admission after repeats, reuse, eviction and that
// cached statements run inside transactions.
func TestStmtCache(t *testing.T) {
	ctx := context.Background()
	db, err := sql.Open("sqlite", filepath.Join(t.TempDir(), "c.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(2) // one for a transaction, one to prepare on
	c := &StmtCache{DB: db, Max: 2, Admit: 2}
	d := &StdDB{DB: db, Stmts: c}
	if _, err := d.Exec(ctx, "CREATE TABLE t (x INTEGER)"); err != nil {
		t.Fatal(err)
	}
	ins := "INSERT INTO t (x) VALUES (?)"
	for i := 0; i < 3; i++ {
		if err := d.InTx(ctx, func(cn Conn) error {
			_, err := cn.Exec(ctx, ins, i)
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	if _, ok := c.stmts[ins]; !ok {
		t.Fatal("repeated statement not cached")
	}
	for _, q := range []string{"SELECT 1", "SELECT 1", "SELECT 2", "SELECT 2"} {
		rows, err := d.Query(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		rows.Close()
	}
	if len(c.stmts) != 2 {
		t.Fatalf("cache holds %d statements, max 2", len(c.stmts))
	}
	if _, ok := c.stmts[ins]; ok {
		t.Fatal("least recently used statement not evicted")
	}
	rows, err := d.Query(ctx, "SELECT COUNT(*) FROM t")
	if err != nil {
		t.Fatal(err)
	}
	var n int
	rows.Next()
	rows.Scan(&n)
	rows.Close()
	if n != 3 {
		t.Fatalf("count %d", n)
	}
	c.Close()
}

// TestStmtCacheSinglePool is a regression test: with one pool connection
// held by the transaction, admitting a statement used to wait forever for a
// connection to prepare on.
func TestStmtCacheSinglePool(t *testing.T) {
	ctx := context.Background()
	db, err := sql.Open("sqlite", ":memory:")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	d := &StdDB{DB: db, Stmts: &StmtCache{DB: db, PrepareWait: time.Millisecond}}
	done := make(chan error, 1)
	go func() {
		done <- d.InTx(ctx, func(cn Conn) error {
			for i := 0; i < 5; i++ {
				if _, err := cn.Exec(ctx, "SELECT 1"); err != nil {
					return err
				}
			}
			return nil
		})
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("statement cache deadlocked on a one-connection pool")
	}
}

func TestRounds(t *testing.T) {
	ids := []int64{7, 8, 7, 9, 7, 8}
	got := Rounds(len(ids), func(i int) int64 { return ids[i] })
	want := [][]int{{0, 1, 3}, {2, 5}, {4}}
	if len(got) != len(want) {
		t.Fatalf("rounds %v, want %v", got, want)
	}
	for r := range want {
		if !slices.Equal(got[r], want[r]) {
			t.Fatalf("rounds %v, want %v", got, want)
		}
	}
	if got := Rounds(0, func(int) int64 { return 0 }); len(got) != 0 {
		t.Fatalf("no indexes: %v", got)
	}
}

func TestTimeDest(t *testing.T) {
	var tm time.Time
	want := time.Date(2030, 1, 2, 3, 4, 5, 123456000, time.UTC)
	for _, src := range []any{want.UnixMicro(), want.In(time.FixedZone("x", 3600)), "2030-01-02T03:04:05.123456Z", []byte("2030-01-02 04:04:05.123456+01:00")} {
		if err := TimeDest(&tm).Scan(src); err != nil || !tm.Equal(want) || tm.Location() != time.UTC {
			t.Errorf("%v: %v %v", src, tm, err)
		}
	}
	if err := TimeDest(&tm).Scan(nil); err != nil || !tm.IsZero() {
		t.Errorf("nil: %v %v", tm, err)
	}
	if TimeDest(&tm).Scan(3.5) == nil {
		t.Error("float accepted")
	}
}
