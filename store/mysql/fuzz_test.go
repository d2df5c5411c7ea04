package mysql

import (
	"strings"
	"testing"
)

// FuzzParseURL: no URL makes ParseURL panic; its errors say "mysql:" and
// never show the password; what it accepts is a DSN with a database name
// and without backlog's own parameters.
func FuzzParseURL(f *testing.F) {
	for _, s := range []string{
		"127.0.0.1:3306/test?prefix=app_&strategy=optimistic&migrate=false&max_conns=3&timeout=5s",
		"h/db?prefix=app_;migrate=false", "h/db?max_conns=0", "h/db?prefix=a&prefix=b", "[::1/test", "h:port/db",
		"h/", "h/db?tls=maybe", "h/db?%zz",
	} {
		f.Add(s)
	}
	const secret = "Pw7-s3cr3t"
	f.Fuzz(func(t *testing.T, rest string) {
		if strings.Contains(rest, secret) {
			return
		}
		raw := "mysql://user:" + secret + "@" + rest
		dsn, _, err := ParseURL(raw)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "mysql: ") || strings.Contains(err.Error(), secret) {
				t.Fatalf("ParseURL(%q): unclear error %q", raw, err)
			}
			return
		}
		_, query, _ := strings.Cut(dsn, "?")
		for _, k := range []string{"prefix=", "strategy=", "migrate=", "max_conns="} {
			if strings.HasPrefix(query, k) || strings.Contains(query, "&"+k) {
				t.Fatalf("ParseURL(%q) left %s in the DSN %q", raw, k, dsn)
			}
		}
	})
}
