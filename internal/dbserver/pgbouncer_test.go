//go:build linux

package dbserver

import (
	"context"
	"database/sql"
	"testing"
)

// TestPgBouncer starts a PgBouncer in transaction mode in front of a
// private PostgreSQL, works through it, checks the pool mode, and that it
// comes back after a kill on the same port with the data in place.
func TestPgBouncer(t *testing.T) {
	ctx := context.Background()
	pb, pg := PgBouncer(t, PgBouncerOptions{PoolSize: 2})
	if pb.Port() == pg.Port() || pb.Kind() != KindPgBouncer {
		t.Fatalf("pooler %s on %d, server on %d", pb.Kind(), pb.Port(), pg.Port())
	}
	if err := pb.CreateDatabase(ctx, "through"); err != nil {
		t.Fatal(err)
	}
	open := func() *sql.DB {
		// pgx's statement cache would collide on PgBouncer 1.18: exec mode
		// uses unnamed statements.
		db, err := sql.Open(pb.DriverName(), pb.URL("through")+"&default_query_exec_mode=exec")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return db
	}
	db := open()
	if _, err := db.ExecContext(ctx, "CREATE TABLE t (v int)"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, "INSERT INTO t VALUES (7)"); err != nil {
		t.Fatal(err)
	}
	// PgBouncer's own view of its pool mode.
	admin, err := sql.Open(pb.DriverName(), pb.URL("pgbouncer")+"&default_query_exec_mode=simple_protocol")
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	rows, err := admin.QueryContext(ctx, "SHOW CONFIG")
	if err != nil {
		t.Fatal(err)
	}
	mode := ""
	for rows.Next() {
		cols, _ := rows.Columns()
		vals := make([]sql.NullString, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		if vals[0].String == "pool_mode" {
			mode = vals[1].String
		}
	}
	rows.Close()
	if mode != PoolTransaction {
		t.Fatalf("pool_mode %q, want %q", mode, PoolTransaction)
	}

	if err := pb.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := db.PingContext(ctx); err == nil {
		// A pooled connection may still look alive until used; a query
		// must fail.
		if _, err := db.ExecContext(ctx, "SELECT 1"); err == nil {
			t.Fatal("a query through a killed PgBouncer succeeded")
		}
	}
	if err := pb.Start(ctx); err != nil {
		t.Fatal(err)
	}
	var v int
	if err := open().QueryRowContext(ctx, "SELECT v FROM t").Scan(&v); err != nil || v != 7 {
		t.Fatalf("after the restart: %d, %v", v, err)
	}
}
