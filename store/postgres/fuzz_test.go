package postgres

import (
	"net/url"
	"strings"
	"testing"
)

// FuzzParseURL: no URL makes ParseURL panic; its errors say "postgres:"
// and never show the password; what it accepts has none of backlog's own
// parameters left for pgx and no ';' in its query.
func FuzzParseURL(f *testing.F) {
	for _, s := range []string{
		"h:5432/db?sslmode=disable&schema=x&notify=false", "h/db?schema=jobs;notify=false", "h/db?notify=maybe",
		"h/db?schema=a&schema=b", "[::1]:5432/db", "h:port/db", "h/db?%zz", "h/db?pool_max_conns=3&strategy=optimistic",
	} {
		f.Add(s)
	}
	const secret = "Pw7-s3cr3t"
	f.Fuzz(func(t *testing.T, rest string) {
		if strings.Contains(rest, secret) {
			return
		}
		raw := "postgres://user:" + secret + "@" + rest
		conn, opts, err := ParseURL(raw)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "postgres: ") || strings.Contains(err.Error(), secret) {
				t.Fatalf("ParseURL(%q): unclear error %q", raw, err)
			}
			return
		}
		u, err := url.Parse(conn)
		if err != nil {
			t.Fatalf("ParseURL(%q) gave an unparsable connection string %q", raw, conn)
		}
		for _, k := range []string{"schema", "strategy", "notify", "migrate"} {
			if u.Query().Has(k) {
				t.Fatalf("ParseURL(%q) left %s for pgx (%d options)", raw, k, len(opts))
			}
		}
		if strings.Contains(u.RawQuery, ";") {
			t.Fatalf("ParseURL(%q) accepted a ';' in the query", raw)
		}
	})
}
