package postgres

import (
	"errors"
	"strings"
	"testing"

	"github.com/backlogq/backlog/store"
)

// TestParseURLRejectsSemicolons: a ';' between parameters is an error
// naming the parameter (never its value), not a parameter dropped.
func TestParseURLRejectsSemicolons(t *testing.T) {
	for raw, want := range map[string]string{
		"postgres://u@h/db?schema=jobs;notify=false":   `';' follows parameter "schema"`,
		"postgres://u@h/db?sslmode=disable;password=x": `';' follows parameter "sslmode"`,
		"postgres://u@h/db?schema=a&schema=b":          "schema is given 2 times",
	} {
		_, _, err := ParseURL(raw)
		if err == nil || !errors.Is(err, store.ErrBadQuery) || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseURL(%s) = %v; want ErrBadQuery saying %q", raw, err, want)
		}
		if err != nil && strings.Contains(err.Error(), "password=x") {
			t.Errorf("the error shows a parameter value: %v", err)
		}
	}
	if _, opts, err := ParseURL("postgres://u@h/db?schema=jobs&notify=false"); err != nil || len(opts) != 2 {
		t.Fatalf("a good URL: %d options, %v", len(opts), err)
	}
}
