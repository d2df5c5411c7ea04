package mysql

import (
	"errors"
	"strings"
	"testing"

	"github.com/backlogq/backlog/store"
)

// TestParseURLRejectsSemicolons: a ';' between parameters is an error
// naming the parameter, not a parameter dropped.
func TestParseURLRejectsSemicolons(t *testing.T) {
	for raw, want := range map[string]string{
		"mysql://u@h/db?prefix=app_;migrate=false": `';' follows parameter "prefix"`,
		"mysql://u@h/db?tls=true;timeout=5s":       `';' follows parameter "tls"`,
		"mysql://u@h/db?prefix=a_&prefix=b_":       "prefix is given 2 times",
	} {
		_, _, err := ParseURL(raw)
		if err == nil || !errors.Is(err, store.ErrBadQuery) || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseURL(%s) = %v; want ErrBadQuery saying %q", raw, err, want)
		}
	}
	if _, opts, err := ParseURL("mysql://u@h/db?prefix=app_&migrate=false"); err != nil || len(opts) != 2 {
		t.Fatalf("a good URL: %d options, %v", len(opts), err)
	}
}
