package sqlite

import (
	"slices"
	"strings"
	"testing"

	"github.com/backlogq/backlog/store"
)

// FuzzParseURL: no "sqlite:" URL makes parseURL panic; its errors say
// "sqlite:"; what it accepts has a path, no ';' in its query and only
// known parameters, each once.
func FuzzParseURL(f *testing.F) {
	for _, s := range []string{
		"sqlite:jobs.db", "sqlite:///abs/jobs.db", "sqlite::memory:?migrate=false",
		"sqlite:x.db?prefix=app_;migrate=false", "sqlite:x.db?busy_timeout=5", "sqlite:x.db?prefix=a&prefix=b",
		"sqlite:x.db?notify_interval=-1s", "sqlite:%2e%2e/x.db", "sqlite://./rel.db?strategy=skip-locked", "sqlite:",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		u, err := store.ParseURL(raw)
		if err != nil {
			return
		}
		path, _, err := parseURL(u)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "sqlite: ") {
				t.Fatalf("parseURL(%q): error %q does not say sqlite", raw, err)
			}
			return
		}
		if path == "" || strings.Contains(u.RawQuery, ";") {
			t.Fatalf("parseURL(%q) accepted path %q, query %q", raw, path, u.RawQuery)
		}
		q, _ := store.Query(u)
		for k, vs := range q {
			if !slices.Contains(urlParams, k) || len(vs) != 1 {
				t.Fatalf("parseURL(%q) accepted parameter %q %d times", raw, k, len(vs))
			}
		}
	})
}
