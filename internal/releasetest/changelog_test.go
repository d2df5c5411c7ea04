package releasetest

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestChangelogNamesEveryMigration: CHANGELOG.md has an upgrade note for
// every migration of every store, in that store's section (the heading
// that names store/<name>/migrations/), and names no migration that does
// not exist. A new migration without an upgrade note fails here.
func TestChangelogNamesEveryMigration(t *testing.T) {
	root := repoRoot(t)
	b, err := os.ReadFile(filepath.Join(root, "CHANGELOG.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	for _, h := range []string{"\n## [Unreleased]\n", "\n## Upgrade notes\n"} {
		if !strings.Contains(doc, h) {
			t.Errorf("CHANGELOG.md has no heading %q", strings.TrimSpace(h))
		}
	}
	dirs, err := filepath.Glob(filepath.Join(root, "store", "*", "migrations"))
	if err != nil {
		t.Fatal(err)
	}
	if len(dirs) < 3 {
		t.Fatalf("found %d stores with migrations, want sqlite, postgres and mysql at least", len(dirs))
	}
	named := regexp.MustCompile("`([0-9]+_[A-Za-z0-9_]+\\.sql)`")
	for _, dir := range dirs {
		store := filepath.Base(filepath.Dir(dir))
		rel := "store/" + store + "/migrations/"
		sec, ok := storeSection(doc, rel)
		if !ok {
			t.Errorf("CHANGELOG.md has no upgrade notes for %s (a ### heading naming `%s`)", store, rel)
			continue
		}
		files, err := filepath.Glob(filepath.Join(dir, "*.sql"))
		if err != nil {
			t.Fatal(err)
		}
		var want []string
		for _, f := range files {
			want = append(want, filepath.Base(f))
		}
		var have []string
		for _, m := range named.FindAllStringSubmatch(sec, -1) {
			have = append(have, m[1])
		}
		for _, f := range want {
			if !slices.Contains(have, f) {
				t.Errorf("CHANGELOG.md: %s%s has no upgrade note in the %s section", rel, f, store)
			}
		}
		for _, f := range have {
			if !slices.Contains(want, f) {
				t.Errorf("CHANGELOG.md: the %s section names %s, which is not in %s", store, f, rel)
			}
		}
	}
}

// storeSection returns the text of the "### " section of doc whose heading
// names rel, up to the next heading.
func storeSection(doc, rel string) (string, bool) {
	for _, part := range strings.Split(doc, "\n### ")[1:] {
		heading, body, _ := strings.Cut(part, "\n")
		if !strings.Contains(heading, "`"+rel+"`") {
			continue
		}
		if i := strings.Index(body, "\n#"); i >= 0 {
			body = body[:i]
		}
		return body, true
	}
	return "", false
}
