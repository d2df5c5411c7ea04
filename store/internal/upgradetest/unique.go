package upgradetest

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/backlogq/backlog/core/contract"
	"github.com/backlogq/backlog/store/internal/sqlq"
)

// uniqueStore is what RunUniqueKeys needs of the store besides Store.
type uniqueStore interface {
	Insert(ctx context.Context, now time.Time, jobs []contract.InsertParams) ([]contract.InsertResult, error)
	Retry(ctx context.Context, id int64, now time.Time) (*contract.Job, error)
}

// RunUniqueKeys migrates b's store to the version before version (the
// migration that moves unique keys into the holds table), writes there
// with raw SQL a retryable job and an older completed job sharing one key,
// a running job with a key and a completed job with a key no live job
// has, runs Migrate, and checks that the rows read back unchanged, that
// the live jobs' keys are still held (global scope), that the completed
// job whose key no live job had can be retried and then holds its key,
// that the older completed job whose key a live job holds cannot be
// retried, and that Migrate is then a no-op.
func RunUniqueKeys(t *testing.T, b Backend, version int64) {
	ctx := context.Background()
	us, ok := b.Store.(uniqueStore)
	if !ok {
		t.Fatalf("%T has no Insert or Retry", b.Store)
	}
	full, newest, err := sqlq.RenderMigrations(b.Migrations, b.Data)
	if err != nil {
		t.Fatal(err)
	}
	if newest < version {
		t.Fatalf("newest migration is %d; want at least %d (unique-key holds)", newest, version)
	}
	if err := sqlq.Migrate(ctx, b.DB, b.Dialect, upTo(t, full, version-1), b.Versions); err != nil {
		t.Fatalf("migrate to version %d: %v", version-1, err)
	}

	pending, running, completed := Jobs() // pending and completed share a key
	running.UniqueKey = "report-42"
	lone := *completed
	lone.UniqueKey, lone.Kind = "lone-key", "cleanup"
	lone.Args = json.RawMessage(`{}`)
	b.InsertV1(t, completed, 7)
	b.InsertV1(t, pending, 4)
	b.InsertV1(t, running, 5)
	b.InsertV1(t, &lone, 3)
	before := snapshotN(t, b, 4)

	if err := b.Store.Migrate(ctx); err != nil {
		t.Fatalf("migrate from version %d: %v", version-1, err)
	}
	if v := schemaVersion(t, b); v != newest {
		t.Fatalf("schema at version %d after Migrate; want %d", v, newest)
	}
	sameRows(t, "the migration", before, snapshotN(t, b, 4))
	for _, want := range []*contract.Job{pending, running, completed, &lone} {
		checkGet(t, b.Store, want)
	}

	now := pending.RunAt.Add(time.Minute)
	insert := func(key, queue string, scope contract.UniqueScope) contract.InsertResult {
		t.Helper()
		res, err := us.Insert(ctx, now, []contract.InsertParams{{Queue: queue, Kind: "probe", Args: json.RawMessage(`{}`), Priority: 5,
			MaxAttempts: 1, RunAt: now, UniqueKey: key, UniqueScope: scope}})
		if err != nil {
			t.Fatalf("insert of key %q after the upgrade: %v", key, err)
		}
		return res[0]
	}
	for _, held := range []*contract.Job{pending, running} {
		if r := insert(held.UniqueKey, "elsewhere", contract.UniqueGlobal); !r.Duplicate || r.Job.ID != held.ID {
			t.Fatalf("insert of key %q after the upgrade returned job %d, duplicate %v; want live job %d (its key is still held)", held.UniqueKey, r.Job.ID, r.Duplicate, held.ID)
		}
	}
	// The same key in another scope is another key.
	if r := insert(pending.UniqueKey, pending.Queue, contract.UniqueQueue); r.Duplicate {
		t.Fatalf("a queue-scoped insert of key %q returned job %d as a duplicate; the migrated holds are global", pending.UniqueKey, r.Job.ID)
	}
	if _, err := us.Retry(ctx, lone.ID, now); err != nil {
		t.Fatalf("retry of completed job %d, the last job with its key: %v", lone.ID, err)
	}
	if r := insert(lone.UniqueKey, "elsewhere", contract.UniqueGlobal); !r.Duplicate || r.Job.ID != lone.ID {
		t.Fatalf("insert of key %q after its job was retried returned job %d, duplicate %v; want job %d", lone.UniqueKey, r.Job.ID, r.Duplicate, lone.ID)
	}
	if _, err := us.Retry(ctx, completed.ID, now); !errors.Is(err, contract.ErrInvalidState) {
		t.Fatalf("retry of completed job %d, whose key live job %d holds: %v; want ErrInvalidState", completed.ID, pending.ID, err)
	}
	checkGet(t, b.Store, completed)

	migrateAgainIsNoop(t, b)
}
