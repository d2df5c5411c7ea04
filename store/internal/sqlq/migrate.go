package sqlq

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"io/fs"
	"testing/fstest"
	"text/template"

	"github.com/pressly/goose/v3"
)

// RenderMigrations returns the migrations in src's "migrations" directory
// executed as text/template templates with data (the table prefix or
// schema name; a missing key is an error), as a file system goose can read,
// and the newest version among them.
func RenderMigrations(src fs.FS, data any) (fs.FS, int64, error) {
	out := fstest.MapFS{}
	entries, err := fs.ReadDir(src, "migrations")
	if err != nil {
		return nil, 0, err
	}
	var newest int64
	for _, e := range entries {
		raw, err := fs.ReadFile(src, "migrations/"+e.Name())
		if err != nil {
			return nil, 0, err
		}
		t, err := template.New(e.Name()).Option("missingkey=error").Parse(string(raw))
		if err != nil {
			return nil, 0, err
		}
		var b bytes.Buffer
		if err := t.Execute(&b, data); err != nil {
			return nil, 0, err
		}
		out[e.Name()] = &fstest.MapFile{Data: b.Bytes(), Mode: 0o444}
		if v, err := goose.NumericComponent(e.Name()); err == nil {
			newest = max(newest, v)
		}
	}
	return out, newest, nil
}

// Migrate brings db to the newest of the migrations in fsys (as
// RenderMigrations returns them) with a goose Provider that records versions
// in versionTable and uses no goose globals and no logging; opts add the
// store's locker.
func Migrate(ctx context.Context, db *sql.DB, dialect goose.Dialect, fsys fs.FS, versionTable string, opts ...goose.ProviderOption) error {
	opts = append([]goose.ProviderOption{
		goose.WithTableName(versionTable),
		goose.WithDisableGlobalRegistry(true),
		goose.WithLogger(goose.NopLogger()),
	}, opts...)
	p, err := goose.NewProvider(dialect, db, fsys, opts...)
	if err != nil {
		return fmt.Errorf("migrations: %w", err)
	}
	_, err = p.Up(ctx)
	return err
}
