package postgres

import (
	"context"
	"testing"
	"time"

	"github.com/backlogq/backlog/core/contract"
	"github.com/backlogq/backlog/store/internal/upgradetest"
	"github.com/pressly/goose/v3"
)

// TestMigrateUpgradeFromVersion1 runs upgradetest.Run on a fresh
// PostgreSQL schema: jobs written into a version-1 schema with raw SQL
// must survive Migrate unchanged, read back with ClaimSeq 0 and be claimed
// and finished across the upgrade.
func TestMigrateUpgradeFromVersion1(t *testing.T) {
	upgradetest.Run(t, upgradeBackend(t))
}

// TestMigrateUpgradeFromVersion2 runs upgradetest.RunFromVersion2: the
// settings table arrives without touching the jobs, and contract.Settings
// works after the upgrade.
func TestMigrateUpgradeFromVersion2(t *testing.T) {
	upgradetest.RunFromVersion2(t, upgradeBackend(t))
}

// TestMigrateUpgradeUniqueKeys runs upgradetest.RunUniqueKeys from schema
// version 5: the keys of live jobs stay held after the partial unique
// index gives way to the holds table.
func TestMigrateUpgradeUniqueKeys(t *testing.T) {
	upgradetest.RunUniqueKeys(t, upgradeBackend(t), 6)
}

// TestMigrateUpgradeQueueLimits runs upgradetest.RunQueueLimits from
// schema version 6: jobs and pauses are kept, partition keys and
// limits arrive empty, and limits set afterwards count the jobs running
// across the upgrade.
func TestMigrateUpgradeQueueLimits(t *testing.T) {
	upgradetest.RunQueueLimits(t, upgradeBackend(t), 7)
}

// TestMigrateUpgradeClaimPolicy runs upgradetest.RunClaimPolicy from
// schema version 8: jobs and pauses are kept, no queue has a policy,
// and rate limits and fair claims work on the upgraded schema.
func TestMigrateUpgradeClaimPolicy(t *testing.T) {
	upgradetest.RunClaimPolicy(t, upgradeBackend(t), 9)
}

// upgradeBackend opens an unmigrated store on a fresh schema.
func upgradeBackend(t *testing.T) upgradetest.Backend {
	ctx := context.Background()
	s, err := New(ctx, testPool(t), WithSchema(freshSchema(t)), WithMigrate(false))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	pool, jobs := s.Pool(), s.Schema()+".jobs"
	db := stdlibDB(s)
	t.Cleanup(func() { db.Close() })
	if err := s.createSchema(ctx); err != nil { // as Migrate does before goose
		t.Fatal(err)
	}
	return upgradetest.Backend{
		Store: s, DB: db, Dialect: goose.DialectPostgres,
		Migrations: migrationFiles, Data: struct{ S string }{s.Schema()},
		Jobs: jobs, Versions: s.Schema() + ".goose_db_version",
		ClaimSeqQuery: "SELECT count(*) FROM information_schema.columns WHERE table_schema = $1 AND table_name = $2 AND column_name = 'claim_seq'",
		ClaimSeqArgs:  []any{s.Schema(), "jobs"},

		// JSON as jsonb text, times as timestamptz, no history as the
		// empty array.
		InsertV1: func(t testing.TB, j *contract.Job, version int64) {
			t.Helper()
			tm := func(t time.Time) any {
				if t.IsZero() {
					return nil
				}
				return t
			}
			err := pool.QueryRow(ctx, "INSERT INTO "+jobs+" ("+upgradetest.V1InsertColumns+")"+
				" VALUES ($1, $2, $3::jsonb, $4, $5, $6, $7, $8, $9, $10, $11::jsonb, $12::jsonb, $13::jsonb, $14, $15, $16, $17, $18, $19, $20) RETURNING id",
				upgradetest.V1Values(t, j, version, tm, "[]")...).Scan(&j.ID)
			if err != nil {
				t.Fatalf("insert version-1 row: %v", err)
			}
		},

		// Values as pgx decodes them: jsonb as Go values, timestamptz as
		// time.Time, bytea as []byte.
		Rows: func(t testing.TB, query string) [][]any {
			t.Helper()
			rows, err := pool.Query(ctx, query)
			if err != nil {
				t.Fatal(err)
			}
			defer rows.Close()
			var out [][]any
			for rows.Next() {
				vals, err := rows.Values()
				if err != nil {
					t.Fatal(err)
				}
				out = append(out, vals)
			}
			if err := rows.Err(); err != nil {
				t.Fatal(err)
			}
			return out
		},
	}
}
