package sqlite

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/backlogq/backlog/store"
)

// TestURLRejectsWhatItWouldDrop: a ';' between parameters, a bad escape
// and a parameter given twice are errors naming the problem; they used
// to be dropped (or the last one taken) without a word, so that
// "sqlite:x.db?prefix=app_;migrate=false" opened with the default prefix
// and migrated.
func TestURLRejectsWhatItWouldDrop(t *testing.T) {
	ctx := context.Background()
	for raw, want := range map[string]string{
		"sqlite::memory:?prefix=app_;migrate=false":    `';' follows parameter "prefix"`,
		"sqlite::memory:?migrate=false&prefix=a;b":     `';' follows parameter "prefix"`,
		"sqlite::memory:?prefix=%zz":                   "invalid URL escape",
		"sqlite::memory:?prefix=a_&prefix=b_":          "prefix is given 2 times",
		"sqlite::memory:?busy_timeout=1s;notify=false": `';' follows parameter "busy_timeout"`,
	} {
		s, err := store.Open(ctx, raw)
		if err == nil {
			_ = s.Close()
			t.Errorf("%s: opened; want an error", raw)
			continue
		}
		if !errors.Is(err, store.ErrBadQuery) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v; want ErrBadQuery saying %q", raw, err, want)
		}
	}
	s, err := store.Open(ctx, "sqlite::memory:?prefix=app_&migrate=true")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got := s.(*Store).Prefix(); got != "app_" {
		t.Fatalf("prefix %q; want app_", got)
	}
}
