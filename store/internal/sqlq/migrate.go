package sqlq

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"io/fs"
	"strings"
	"testing/fstest"
	"text/template"

	"github.com/pressly/goose/v3"
)

// RenderMigrations returns the migrations in src's "migrations" directory
// executed as text/template templates with data (the table prefix or
// schema name; a missing key is an error), as a file system goose can read,
// and the newest version among them.
//
// Files of that directory named *.tmpl are not migrations: they define
// templates that every migration may call, so a statement that several
// migrations write (PostgreSQL's claim functions, created by one version
// and changed by a later one) is written once, and each migration says
// only what its version of it is. The function args builds a call's data
// from key-value pairs: {{template "name" (args "S" .S "Skip" "q.paused")}}.
func RenderMigrations(src fs.FS, data any) (fs.FS, int64, error) {
	out := fstest.MapFS{}
	entries, err := fs.ReadDir(src, "migrations")
	if err != nil {
		return nil, 0, err
	}
	shared := template.New("").Option("missingkey=error").Funcs(template.FuncMap{"args": templateArgs})
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".tmpl") {
			continue
		}
		raw, err := fs.ReadFile(src, "migrations/"+e.Name())
		if err != nil {
			return nil, 0, err
		}
		if _, err := shared.New(e.Name()).Parse(string(raw)); err != nil {
			return nil, 0, err
		}
	}
	var newest int64
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".tmpl") {
			continue
		}
		raw, err := fs.ReadFile(src, "migrations/"+e.Name())
		if err != nil {
			return nil, 0, err
		}
		base, err := shared.Clone()
		if err != nil {
			return nil, 0, err
		}
		t, err := base.New(e.Name()).Parse(string(raw))
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

// templateArgs is the migrations' args function: a map of the key-value
// pairs kv (keys are strings).
func templateArgs(kv ...any) (map[string]any, error) {
	if len(kv)%2 != 0 {
		return nil, fmt.Errorf("args: %d arguments; want key-value pairs", len(kv))
	}
	m := make(map[string]any, len(kv)/2)
	for i := 0; i < len(kv); i += 2 {
		k, ok := kv[i].(string)
		if !ok {
			return nil, fmt.Errorf("args: key %v is not a string", kv[i])
		}
		m[k] = kv[i+1]
	}
	return m, nil
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
