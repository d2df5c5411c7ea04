package upgradetest

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/backlogq/backlog/core/contract"
	"github.com/backlogq/backlog/store/internal/sqlq"
)

// RunUniqueFingerprint migrates b's store to every migration numbered
// below version (the one that gives holds a fingerprint), writes there
// with raw SQL a pending job with a unique key and its hold, as the
// previous schema kept them, runs Migrate, and checks that the rows read
// back unchanged, that the key is still held by that job (a duplicate
// with an empty fingerprint), that contract.UniqueHolder lists the hold, that
// a hold taken after the upgrade returns its fingerprint to its
// duplicates, and that Migrate is then a no-op.
func RunUniqueFingerprint(t *testing.T, b Backend, version int64) {
	ctx := context.Background()
	us, ok := b.Store.(uniqueStore)
	if !ok {
		t.Fatalf("%T has no Insert or Retry", b.Store)
	}
	uh, ok := b.Store.(contract.UniqueHolder)
	if !ok {
		t.Fatalf("%T is no contract.UniqueHolder", b.Store)
	}
	full, newest, err := sqlq.RenderMigrations(b.Migrations, b.Data)
	if err != nil {
		t.Fatal(err)
	}
	if newest < version {
		t.Fatalf("newest migration is %d; want at least %d (hold fingerprints)", newest, version)
	}
	if err := sqlq.Migrate(ctx, b.DB, b.Dialect, below(t, full, version), b.Versions); err != nil {
		t.Fatalf("migrate to the versions below %d: %v", version, err)
	}
	pending, _, _ := Jobs()
	pending.UniqueKey = "order-42"
	b.InsertV1(t, pending, 4)
	holds := strings.TrimSuffix(b.Jobs, "jobs") + "unique_keys"
	// Constants only: no placeholder syntax to tell apart.
	if _, err := b.DB.ExecContext(ctx, fmt.Sprintf("INSERT INTO %s (ukey, job_id, queue, kind, unique_key, unique_for, held_until) VALUES ('g:order-42', %d, '%s', '%s', 'order-42', 0, NULL)",
		holds, pending.ID, pending.Queue, pending.Kind)); err != nil {
		t.Fatalf("write the hold of job %d: %v", pending.ID, err)
	}
	before := snapshotN(t, b, 1)

	if err := b.Store.Migrate(ctx); err != nil {
		t.Fatalf("migrate to version %d: %v", version, err)
	}
	if v := schemaVersion(t, b); v != newest {
		t.Fatalf("schema at version %d after Migrate; want %d", v, newest)
	}
	sameRows(t, "the migration", before, snapshotN(t, b, 1))
	checkGet(t, b.Store, pending)

	now := pending.RunAt.Add(time.Minute)
	insert := func(key, fp string) contract.InsertResult {
		t.Helper()
		res, err := us.Insert(ctx, now, []contract.InsertParams{{Queue: "q", Kind: "probe", Args: json.RawMessage(`{}`), Priority: 5,
			MaxAttempts: 1, RunAt: now, UniqueKey: key, UniqueFingerprint: fp}})
		if err != nil {
			t.Fatalf("insert of key %q after the upgrade: %v", key, err)
		}
		return res[0]
	}
	if r := insert("order-42", "fp-new"); !r.Duplicate || r.Job.ID != pending.ID || r.Fingerprint != "" {
		t.Fatalf("insert of key order-42 after the upgrade: job %d, duplicate %v, fingerprint %q; want job %d, a duplicate, fingerprint \"\" (a hold from before the upgrade has none)",
			r.Job.ID, r.Duplicate, r.Fingerprint, pending.ID)
	}
	got, next, err := uh.UniqueHolds(ctx, contract.UniqueHoldsParams{Now: now})
	if err != nil || next != "" || len(got) != 1 || got[0].ScopedKey != "g:order-42" || got[0].JobID != pending.ID || got[0].State != pending.State || !got[0].Until.IsZero() {
		t.Fatalf("UniqueHolds after the upgrade: %+v, next %q, %v; want the hold of live job %d on g:order-42", got, next, err, pending.ID)
	}
	fresh := insert("order-43", "sha256:abc")
	if fresh.Duplicate {
		t.Fatalf("insert of a new key after the upgrade returned a duplicate of job %d", fresh.Job.ID)
	}
	if r := insert("order-43", "sha256:def"); !r.Duplicate || r.Job.ID != fresh.Job.ID || r.Fingerprint != "sha256:abc" {
		t.Fatalf("second insert of key order-43: job %d, duplicate %v, fingerprint %q; want job %d, a duplicate, fingerprint %q",
			r.Job.ID, r.Duplicate, r.Fingerprint, fresh.Job.ID, "sha256:abc")
	}
	migrateAgainIsNoop(t, b)
}
