package store

import (
	"errors"
	"strings"
	"testing"
)

// FuzzParseURLAndQuery: parsing any store URL and its query never panics;
// every error wraps ErrBadURL or ErrBadQuery and never repeats the
// password; a query with a ';' is never accepted (url.URL.Query would
// drop the pair it is in).
func FuzzParseURLAndQuery(f *testing.F) {
	for _, s := range []string{
		"sqlite:jobs.db?prefix=app_", "sqlite:x.db?prefix=a;strategy=b", "sqlite::memory:",
		"postgres://u:pw@h:5432/db?sslmode=disable&schema=s", "mysql://u:pw@[::1]:3306/db?tls=true",
		"x:y?a=%zz", "x:y?a=1&a=2", "://", "postgres://u:pw@h:port/db", "%", "sqlite:%zz",
	} {
		f.Add(s)
	}
	const secret = "Pw7-s3cr3t"
	f.Fuzz(func(t *testing.T, raw string) {
		u, err := ParseURL(raw)
		if err != nil {
			if !errors.Is(err, ErrBadURL) {
				t.Fatalf("ParseURL(%q): %v does not wrap ErrBadURL", raw, err)
			}
		} else {
			q, err := Query(u, "a", "prefix")
			if err != nil && !errors.Is(err, ErrBadQuery) {
				t.Fatalf("Query(%q): %v does not wrap ErrBadQuery", raw, err)
			}
			if err == nil && strings.Contains(u.RawQuery, ";") {
				t.Fatalf("Query(%q) accepted a ';': %v", raw, q)
			}
		}
		// The same URL with a password: no error shows it.
		if strings.Contains(raw, secret) {
			return
		}
		withPw := "postgres://user:" + secret + "@" + raw
		if u, err := ParseURL(withPw); err != nil {
			if strings.Contains(err.Error(), secret) {
				t.Fatalf("ParseURL(%q) shows the password: %v", withPw, err)
			}
		} else if _, err := Query(u, "a"); err != nil && strings.Contains(err.Error(), secret) {
			t.Fatalf("Query(%q) shows the password: %v", withPw, err)
		}
	})
}
