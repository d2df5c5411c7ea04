package bench_test

import (
	"context"
	"encoding/json"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/backlogq/backlog/internal/bench"
	"github.com/backlogq/backlog/store/memory"
)

// TestServerOf checks which processes count as the database server of a
// store URL: a local PostgreSQL's or MariaDB's, none for SQLite, and
// unknown for a server on another host.
func TestServerOf(t *testing.T) {
	for _, c := range []struct {
		url       string
		procs     []string
		inProcess bool
	}{
		{"sqlite:/tmp/x.db", nil, true},
		{"postgres://root@127.0.0.1:5432/test?sslmode=disable", []string{"postgres"}, false},
		{"postgresql://localhost/test", []string{"postgres"}, false},
		{"postgres:///test?host=/var/run/postgresql", []string{"postgres"}, false},
		{"postgres://u@[::1]:5433/test", []string{"postgres"}, false},
		{"postgres://u@db.example.com/test", nil, false},
		{"mysql://root@127.0.0.1:3306/test", []string{"mariadbd", "mysqld"}, false},
		{"mysql://root@10.0.0.5:3306/test", nil, false},
		{"other://x", nil, false},
		{"%%", nil, false},
	} {
		s := bench.ServerOf(c.url)
		if !slices.Equal(s.Procs, c.procs) || s.InProcess != c.inProcess {
			t.Errorf("ServerOf(%q) = %+v, want procs %v, in process %v", c.url, s, c.procs, c.inProcess)
		}
	}
}

// With the zero Server (a server not known, e.g. on another machine) a run
// reports the client's CPU and omits the server's instead of claiming 0.
func TestProcCPUServerNotKnown(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the CPU split reads /proc")
	}
	st := memory.New()
	defer st.Close()
	// Enough jobs for the client's CPU to span several of /proc's 10 ms
	// ticks.
	res, err := bench.BurnDown(context.Background(), st, bench.Config{Jobs: 5000, Workers: 10})
	if err != nil {
		t.Fatal(err)
	}
	p := res.ProcCPU
	if p == nil || p.ClientSeconds <= 0 || p.ServerSeconds != nil || p.PerThousand.Server != nil || p.PerThousand.Total != nil {
		t.Fatalf("CPU split %+v, want the client's only", p)
	}
	b, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	if s := string(b); !strings.Contains(s, `"client_core_seconds"`) || strings.Contains(s, "server") {
		t.Fatalf("JSON %s: want client_core_seconds and nothing of the server", s)
	}
}
