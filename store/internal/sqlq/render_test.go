package sqlq

import (
	"io/fs"
	"strings"
	"testing"
	"testing/fstest"
)

// A *.tmpl file of the migrations directory defines templates every
// migration may call, and is no migration itself.
func TestRenderMigrationsSharedTemplates(t *testing.T) {
	src := fstest.MapFS{
		"migrations/shared.tmpl":     {Data: []byte(`{{define "fn"}}CREATE FUNCTION {{.S}}.f() -- skips {{.Skip}}{{end}}`)},
		"migrations/00001_a.sql":     {Data: []byte(`-- +goose Up` + "\n" + `{{template "fn" (args "S" .S "Skip" "paused")}};`)},
		"migrations/00002_b.sql":     {Data: []byte(`-- +goose Up` + "\n" + `{{template "fn" (args "S" .S "Skip" "paused or limited")}};`)},
		"migrations/00003_plain.sql": {Data: []byte(`-- +goose Up` + "\n" + `SELECT 1 FROM {{.S}}.t;`)},
	}
	out, newest, err := RenderMigrations(src, struct{ S string }{"app"})
	if err != nil {
		t.Fatal(err)
	}
	if newest != 3 {
		t.Errorf("newest = %d, want 3", newest)
	}
	if _, err := fs.Stat(out, "shared.tmpl"); err == nil {
		t.Error("the shared template is among the migrations")
	}
	for name, want := range map[string]string{
		"00001_a.sql":     "CREATE FUNCTION app.f() -- skips paused;",
		"00002_b.sql":     "CREATE FUNCTION app.f() -- skips paused or limited;",
		"00003_plain.sql": "SELECT 1 FROM app.t;",
	} {
		b, err := fs.ReadFile(out, name)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasSuffix(string(b), want) {
			t.Errorf("%s rendered %q; want it to end with %q", name, b, want)
		}
	}
	src["migrations/00004_bad.sql"] = &fstest.MapFile{Data: []byte(`{{template "fn" (args "S")}}`)}
	if _, _, err := RenderMigrations(src, struct{ S string }{"app"}); err == nil || !strings.Contains(err.Error(), "key-value pairs") {
		t.Errorf("args with an odd count: err = %v; want one saying key-value pairs", err)
	}
}
