package bench_test

import (
	"slices"
	"testing"

	"github.com/backlogq/backlog/internal/bench"
)

// TestServerOf checks which processes count as the database server of a
// store URL: a local PostgreSQL's or MariaDB's, none for SQLite, and
// unknown for a server on another host.
func TestServerOf(t *testing.T) {
	for _, c := range []struct {
		url       string
		procs     []string
		elsewhere bool
	}{
		{"sqlite:/tmp/x.db", nil, false},
		{"postgres://root@127.0.0.1:5432/test?sslmode=disable", []string{"postgres"}, false},
		{"postgresql://localhost/test", []string{"postgres"}, false},
		{"postgres:///test?host=/var/run/postgresql", []string{"postgres"}, false},
		{"postgres://u@[::1]:5433/test", []string{"postgres"}, false},
		{"postgres://u@db.example.com/test", nil, true},
		{"mysql://root@127.0.0.1:3306/test", []string{"mariadbd", "mysqld"}, false},
		{"mysql://root@10.0.0.5:3306/test", nil, true},
		{"other://x", nil, true},
		{"%%", nil, true},
	} {
		s := bench.ServerOf(c.url)
		if !slices.Equal(s.Procs, c.procs) || s.Elsewhere != c.elsewhere {
			t.Errorf("ServerOf(%q) = %+v, want procs %v, elsewhere %v", c.url, s, c.procs, c.elsewhere)
		}
	}
}
