package store

import (
	"errors"
	"net/url"
	"strings"
	"testing"
)

// TestQuery: what url.URL.Query drops without a word is an error naming
// the parameter, never its value.
func TestQuery(t *testing.T) {
	for raw, want := range map[string]string{
		"x:y?a=1;b=2":         `';' follows parameter "a"`,
		"x:y?a=1&pw=secret;b": `';' follows parameter "pw"`,
		"x:y?a=%zz":           "invalid URL escape",
		"x:y?a=1&a=2":         "a is given 2 times",
	} {
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		_, err = Query(u, "a")
		if !errors.Is(err, ErrBadQuery) || !strings.Contains(err.Error(), want) {
			t.Errorf("Query(%s) = %v; want ErrBadQuery saying %q", raw, err, want)
		}
		if err != nil && strings.Contains(err.Error(), "secret") {
			t.Errorf("Query(%s) shows a value: %v", raw, err)
		}
	}
	u, _ := url.Parse("x:y?a=1&b=2&b=3")
	q, err := Query(u, "a")
	if err != nil || q.Get("a") != "1" || len(q["b"]) != 2 {
		t.Fatalf("Query of a good URL = %v, %v", q, err)
	}
}
