package mysql

import (
	"context"
	"errors"
	"io/fs"
	"reflect"
	"testing"
	"testing/fstest"
	"time"

	"github.com/backlogq/backlog/core/contract"

	"github.com/pressly/goose/v3"

	"github.com/backlogq/backlog/store/internal/sqlq"
	"github.com/backlogq/backlog/store/internal/upgradetest"
	"github.com/backlogq/backlog/storetest/dbtest"
)

// TestMigrateUpgradeFromVersion1 runs upgradetest.Run on MySQL or MariaDB:
// jobs written into a version-1 schema with raw SQL must survive Migrate
// unchanged, read back with ClaimSeq 0 and be claimed and finished across
// the upgrade.
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
// version 5: the keys of live jobs stay held after unique_live and its
// unique index give way to the holds table.
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

// upgradeBackend opens an unmigrated store on a database of its own.
func upgradeBackend(t *testing.T) upgradetest.Backend {
	s, err := Open(context.Background(), dbtest.MySQLDSN(t), WithPrefix("up_"), WithMigrate(false), WithMaxOpenConns(4))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	// Times as UTC DATETIME(6) text; no error history as NULL, as Insert
	// leaves it.
	return upgradetest.Prefixed(s, s.DB(), s.Prefix(), migrationFiles, goose.DialectMySQL,
		"SELECT COUNT(*) FROM information_schema.columns WHERE table_schema = DATABASE() AND table_name = ? AND column_name = 'claim_seq'",
		dialect{}.Time, nil)
}

// TestMigrateUpgradeFromVersion4: migration 5 adds the notifications table
// and touches no other. On the version-4 schema the store still pauses a
// queue (with no table to write the notification to) and Listen
// fails (with an error the engine retries, not core.ErrUnsupported); after
// the upgrade the jobs and queues are as stored, Listen starts at the
// present, and a cancel of the job running across the upgrade and a new
// insert are delivered.
func TestMigrateUpgradeFromVersion4(t *testing.T) {
	b := upgradeBackend(t)
	s := b.Store.(*Store)
	ctx := t.Context()
	full, newest, err := sqlq.RenderMigrations(b.Migrations, b.Data)
	if err != nil {
		t.Fatal(err)
	}
	if newest < 5 {
		t.Fatalf("newest migration is %d; want at least 5 (notifications)", newest)
	}
	if err := sqlq.Migrate(ctx, b.DB, b.Dialect, migrationsUpTo(t, full, 4), b.Versions); err != nil {
		t.Fatalf("migrate to version 4: %v", err)
	}
	pending, running, completed := upgradetest.Jobs()
	b.InsertV1(t, pending, 4)
	b.InsertV1(t, running, 5)
	b.InsertV1(t, completed, 7)
	now := pending.RunAt.Add(time.Minute)
	if err := s.PauseQueue(ctx, "paused-before", now); err != nil {
		t.Fatalf("PauseQueue on the version-4 schema: %v", err)
	}
	if _, err := s.Listen(ctx); err == nil || errors.Is(err, contract.ErrUnsupported) {
		t.Fatalf("Listen on the version-4 schema: %v; want an error that is not core.ErrUnsupported", err)
	}
	snapshot := func() [][]any {
		t.Helper()
		// Every column the upgrade keeps (migration 6 drops unique_live;
		// migration 7 adds partition_key and the queue limits).
		jobs := b.Rows(t, "SELECT "+upgradetest.V1Columns+", claim_seq, pending FROM up_jobs ORDER BY id")
		if len(jobs) != 3 {
			t.Fatalf("%d jobs; want 3", len(jobs))
		}
		return append(jobs, b.Rows(t, "SELECT name, paused, updated_at FROM up_queues ORDER BY name")...)
	}
	before := snapshot()

	if err := s.Migrate(ctx); err != nil {
		t.Fatalf("migrate from version 4: %v", err)
	}
	var v int64
	if err := b.DB.QueryRow("SELECT MAX(version_id) FROM " + b.Versions + " WHERE is_applied").Scan(&v); err != nil || v != newest {
		t.Fatalf("schema at version %d (%v); want %d", v, err, newest)
	}
	if after := snapshot(); !reflect.DeepEqual(before, after) {
		t.Fatalf("the migration changed jobs or queues:\nbefore %v\nafter  %v", before, after)
	}
	var notes int
	if err := b.DB.QueryRow("SELECT COUNT(*) FROM up_notifications").Scan(&notes); err != nil || notes != 0 {
		t.Fatalf("notifications after the upgrade: %d rows (%v); want an empty table", notes, err)
	}

	ch, err := s.Listen(ctx)
	if err != nil {
		t.Fatalf("Listen after the upgrade: %v", err)
	}
	if _, err := s.Cancel(ctx, running.ID, now); err != nil {
		t.Fatal(err)
	}
	if n := next(t, ch); n != (contract.Notification{Kind: contract.NotifyCancel, Queue: running.Queue, JobID: running.ID}) {
		t.Fatalf("first notification after the upgrade: %+v; want the cancel of job %d (nothing from before Listen)", n, running.ID)
	}
	if _, err := s.Insert(ctx, now, []contract.InsertParams{job(pending.Queue, "after")}); err != nil {
		t.Fatal(err)
	}
	if n := next(t, ch); n != (contract.Notification{Kind: contract.NotifyInsert, Queue: pending.Queue}) {
		t.Fatalf("after an insert: %+v", n)
	}
	if err := s.Migrate(ctx); err != nil {
		t.Fatalf("second migrate: %v", err)
	}
}

// migrationsUpTo returns the rendered migrations numbered up to version.
func migrationsUpTo(t *testing.T, full fs.FS, version int64) fs.FS {
	t.Helper()
	entries, err := fs.ReadDir(full, ".")
	if err != nil {
		t.Fatal(err)
	}
	out := fstest.MapFS{}
	for _, e := range entries {
		v, err := goose.NumericComponent(e.Name())
		if err != nil || v > version {
			continue
		}
		data, err := fs.ReadFile(full, e.Name())
		if err != nil {
			t.Fatal(err)
		}
		out[e.Name()] = &fstest.MapFile{Data: data, Mode: 0o444}
	}
	if int64(len(out)) != version {
		t.Fatalf("%d migrations numbered up to %d; want %d", len(out), version, version)
	}
	return out
}
