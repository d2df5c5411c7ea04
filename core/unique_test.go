package core_test

import (
	"errors"
	"testing"
	"time"

	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/core/contract"
)

// TestUniqueOptionsValidated: UniqueFor must be within 0..MaxUniqueFor and
// UniqueScope one of the three scopes; both reach the insert parameters.
func TestUniqueOptionsValidated(t *testing.T) {
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, tc := range []struct {
		name string
		opts core.Options
		ok   bool
	}{
		{"zero", core.Options{UniqueKey: "k"}, true},
		{"window", core.Options{UniqueKey: "k", UniqueFor: time.Hour, UniqueScope: core.UniqueQueue}, true},
		{"max window", core.Options{UniqueKey: "k", UniqueFor: contract.MaxUniqueFor, UniqueScope: core.UniqueKind}, true},
		{"negative window", core.Options{UniqueKey: "k", UniqueFor: -time.Second}, false},
		{"window too long", core.Options{UniqueKey: "k", UniqueFor: contract.MaxUniqueFor + time.Microsecond}, false},
		{"unknown scope", core.Options{UniqueKey: "k", UniqueScope: core.UniqueScope(9)}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := core.NewInsertRaw("kind", []byte(`{}`), &tc.opts, now)
			if tc.ok {
				if err != nil {
					t.Fatalf("NewInsertRaw: %v", err)
				}
				if p.UniqueFor != tc.opts.UniqueFor || p.UniqueScope != tc.opts.UniqueScope {
					t.Fatalf("params carry UniqueFor %s, scope %s; want %s, %s", p.UniqueFor, p.UniqueScope, tc.opts.UniqueFor, tc.opts.UniqueScope)
				}
				return
			}
			if !errors.Is(err, core.ErrInvalidJob) {
				t.Fatalf("NewInsertRaw: %v; want ErrInvalidJob", err)
			}
		})
	}
}

// TestScopedUniqueKey: the scoped key names the scope, and the queue or
// kind with its length, so no two distinct (scope, queue/kind, key)
// triples give one scoped key.
func TestScopedUniqueKey(t *testing.T) {
	key := func(scope core.UniqueScope, queue, kind, k string) string {
		return contract.ScopedUniqueKey(&core.InsertParams{Queue: queue, Kind: kind, UniqueKey: k, UniqueScope: scope})
	}
	if got := key(core.UniqueGlobal, "q", "k", ""); got != "" {
		t.Fatalf("no key gave scoped key %q; want \"\"", got)
	}
	cases := map[string]string{
		key(core.UniqueGlobal, "q", "k", "x"):   "g:x",
		key(core.UniqueQueue, "mail", "k", "x"): "q4:mail:x",
		key(core.UniqueKind, "q", "a:b", "c"):   "k3:a:b:c",
	}
	for got, want := range cases {
		if got != want {
			t.Errorf("scoped key %q; want %q", got, want)
		}
	}
	seen := map[string]string{}
	for _, c := range [][4]string{
		{"g", "q", "k", "x"}, {"q", "q", "k", "x"}, {"k", "q", "k", "x"},
		{"q", "a:b", "k", "c"}, {"q", "a", "k", "b:c"}, {"k", "q", "a:b", "c"}, {"k", "q", "a", "b:c"},
		{"q", "a1", "k", "x"}, {"q", "a", "k", "1:x"},
	} {
		scope := map[string]core.UniqueScope{"g": core.UniqueGlobal, "q": core.UniqueQueue, "k": core.UniqueKind}[c[0]]
		sk := key(scope, c[1], c[2], c[3])
		if prev, ok := seen[sk]; ok {
			t.Fatalf("%v and %s give one scoped key %q", c, prev, sk)
		}
		seen[sk] = string(c[0]) + "/" + c[1] + "/" + c[2] + "/" + c[3]
	}
}

func TestParseUniqueScope(t *testing.T) {
	for _, s := range []core.UniqueScope{core.UniqueGlobal, core.UniqueQueue, core.UniqueKind} {
		if got, err := core.ParseUniqueScope(s.String()); err != nil || got != s {
			t.Errorf("ParseUniqueScope(%q) = %v, %v", s.String(), got, err)
		}
	}
	if got, err := core.ParseUniqueScope(""); err != nil || got != core.UniqueGlobal {
		t.Errorf(`ParseUniqueScope("") = %v, %v`, got, err)
	}
	if _, err := core.ParseUniqueScope("tenant"); err == nil {
		t.Error(`ParseUniqueScope("tenant"): no error`)
	}
}
