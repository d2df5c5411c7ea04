package upgradetest

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/backlogq/backlog/core/contract"

	"github.com/pressly/goose/v3"

	"github.com/backlogq/backlog/store/internal/sqlq"
)

// RunFromVersion2 migrates b's store to schema version 2 only (before the
// settings table), writes a pending, a running and a completed job there
// with raw SQL, runs Migrate, and checks that the jobs stay as stored,
// that contract.Settings works after the upgrade (and not before: there is no
// table yet), that its values survive a second Migrate, and that Migrate
// and goose then find nothing to do. b.Store must implement
// contract.Settings.
func RunFromVersion2(t *testing.T, b Backend) {
	ctx := context.Background()
	st, ok := b.Store.(contract.Settings)
	if !ok {
		t.Fatalf("%T does not implement contract.Settings", b.Store)
	}
	full, newest, err := sqlq.RenderMigrations(b.Migrations, b.Data)
	if err != nil {
		t.Fatal(err)
	}
	if newest < 3 {
		t.Fatalf("newest migration is %d; want at least 3 (settings)", newest)
	}
	if err := sqlq.Migrate(ctx, b.DB, b.Dialect, upTo(t, full, 2), b.Versions); err != nil {
		t.Fatalf("migrate to version 2: %v", err)
	}
	if v := schemaVersion(t, b); v != 2 {
		t.Fatalf("schema at version %d; want 2", v)
	}
	if _, err := st.Setting(ctx, "probe"); err == nil || errors.Is(err, contract.ErrNotFound) {
		t.Fatalf("Setting on a version-2 schema returned %v; want an error (no settings table yet)", err)
	}

	pending, running, completed := Jobs()
	b.InsertV1(t, pending, 4)
	b.InsertV1(t, running, 5)
	b.InsertV1(t, completed, 7)
	before := snapshot(t, b)

	if err := b.Store.Migrate(ctx); err != nil {
		t.Fatalf("migrate from version 2: %v", err)
	}
	if v := schemaVersion(t, b); v != newest {
		t.Fatalf("schema at version %d after Migrate; want %d", v, newest)
	}
	sameRows(t, "the migration", before, snapshot(t, b))
	for _, want := range []*contract.Job{pending, running, completed} {
		checkGet(t, b.Store, want)
	}

	secret := []byte{0x00, 0x9f, 0xff, 's', 'e', 'c', 'r', 'e', 't'}
	got, created, err := st.GetOrCreateSetting(ctx, "lease-token-secret", secret)
	if err != nil || !created || !bytes.Equal(got, secret) {
		t.Fatalf("GetOrCreateSetting after the upgrade: %q, created=%v, %v; want the value, created", got, created, err)
	}

	applied := versionRows(t, b)
	if err := b.Store.Migrate(ctx); err != nil {
		t.Fatalf("second migrate: %v", err)
	}
	if err := sqlq.Migrate(ctx, b.DB, b.Dialect, full, b.Versions); err != nil {
		t.Fatalf("goose up on the migrated schema: %v", err)
	}
	if again := versionRows(t, b); again != applied || schemaVersion(t, b) != newest {
		t.Fatalf("second migrate wrote versions: %d rows, then %d", applied, again)
	}
	if v, err := st.Setting(ctx, "lease-token-secret"); err != nil || !bytes.Equal(v, secret) {
		t.Fatalf("the setting after a second Migrate: %q, %v; want it unchanged", v, err)
	}
	sameRows(t, "the second migrate", before, snapshot(t, b))
}

// upTo returns the rendered migrations numbered up to version.
func upTo(t *testing.T, full fs.FS, version int64) fs.FS {
	t.Helper()
	entries, err := fs.ReadDir(full, ".")
	if err != nil {
		t.Fatal(err)
	}
	out := fstest.MapFS{}
	for _, e := range entries {
		v, err := goose.NumericComponent(e.Name())
		if err != nil || v > version || !strings.HasSuffix(e.Name(), ".sql") {
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
