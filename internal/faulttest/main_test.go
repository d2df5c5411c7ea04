//go:build linux

package faulttest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/backlogq/backlog/internal/dbserver"
)

// Environment variables of the suite (see the package documentation).
const (
	envFault       = "BACKLOG_FAULT"
	envJobs        = "BACKLOG_FAULT_JOBS"
	envWorkers     = "BACKLOG_FAULT_WORKERS"
	envConcurrency = "BACKLOG_FAULT_CONCURRENCY"
	envLease       = "BACKLOG_FAULT_LEASE"
	envKillWindow  = "BACKLOG_FAULT_KILL_WINDOW"
	envDrain       = "BACKLOG_FAULT_DRAIN"
	envRace        = "BACKLOG_FAULT_RACE"
	envSummary     = "BACKLOG_FAULT_SUMMARY"
)

// Variables the suite sets on the workers, which their handlers inherit.
const (
	envHandler = "BACKLOG_FAULTTEST_HANDLER" // "ledger": this binary runs as a job handler
	envLedger  = "BACKLOG_FAULTTEST_LEDGER"  // the ledger file
	envSelf    = "BACKLOG_FAULTTEST_BIN"     // the job handler: this package built without -race
	envWorker  = "BACKLOG_FAULTTEST_WORKER"  // the worker's id, set on each worker
	envPIDs    = "BACKLOG_FAULTTEST_PIDS"    // the orphan scenario's pid file
	envMarker  = "BACKLOG_FAULTTEST_RUN"     // marks every process of a scenario, to find leftovers
)

const runHint = "BACKLOG_FAULT=1 go test -race -count=1 -timeout 30m ./internal/faulttest/"

func TestMain(m *testing.M) {
	if os.Getenv(envHandler) == "ledger" {
		os.Exit(ledgerHandler())
	}
	code := m.Run()
	shared.close()
	os.Exit(code)
}

// requireFault skips the test unless the suite was asked for.
func requireFault(t *testing.T) {
	t.Helper()
	if os.Getenv(envFault) != "1" {
		t.Skip("the fault suite is opt-in: " + runHint)
	}
}

// config is the suite's sizes and timings.
type config struct {
	jobs, workers, conc      int
	lease, killWindow, drain time.Duration
	race                     bool
}

func loadConfig(t *testing.T) config {
	t.Helper()
	c := config{
		jobs:       envInt(t, envJobs, 2000),
		workers:    envInt(t, envWorkers, 4),
		conc:       envInt(t, envConcurrency, 8),
		lease:      envDuration(t, envLease, 4*time.Second),
		killWindow: envDuration(t, envKillWindow, 30*time.Second),
		drain:      envDuration(t, envDrain, 90*time.Second),
		race:       os.Getenv(envRace) == "1",
	}
	if c.jobs < 10 || c.workers < 2 || c.conc < 1 {
		t.Fatalf("%s=%d %s=%d %s=%d: want at least 10 jobs, 2 workers, 1 job at once", envJobs, c.jobs, envWorkers, c.workers, envConcurrency, c.conc)
	}
	if c.lease < 600*time.Millisecond {
		t.Fatalf("%s=%s: want at least 600ms", envLease, c.lease)
	}
	return c
}

func envInt(t *testing.T, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		t.Fatalf("%s=%q: want an integer", name, v)
	}
	return n
}

func envDuration(t *testing.T, name string, def time.Duration) time.Duration {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		t.Fatalf("%s=%q: want a duration such as 4s", name, v)
	}
	return d
}

// shared holds what the tests of this binary share: the backlog binary,
// built once, and one private server per kind, started on first use.
var shared sharedState

type sharedState struct {
	binOnce sync.Once
	binDir  string
	bin     string
	handler string
	binErr  error

	mu      sync.Mutex
	servers map[dbserver.Kind]*serverSlot
	dbSeq   int
}

type serverSlot struct {
	srv *dbserver.Server
	err error
}

// backlogBin builds ./cmd/backlog once per test binary (with -race when
// BACKLOG_FAULT_RACE=1), and the job handler: this test package compiled
// again without -race, which starts in a few milliseconds where a
// race-enabled binary takes several times longer, on every one of the
// thousands of executions.
func backlogBin(t *testing.T) string {
	t.Helper()
	s := &shared
	s.binOnce.Do(func() {
		s.binDir, s.binErr = os.MkdirTemp("", "backlog-faulttest-bin-")
		if s.binErr != nil {
			return
		}
		goBin, err := exec.LookPath("go")
		if err != nil {
			goBin = filepath.Join(os.Getenv("GOROOT"), "bin", "go")
		}
		s.bin = filepath.Join(s.binDir, "backlog")
		s.handler = filepath.Join(s.binDir, "handler")
		build := []string{"build", "-o", s.bin}
		if loadConfig(t).race {
			build = append(build, "-race")
		}
		start := time.Now()
		for _, args := range [][]string{
			append(build, "github.com/backlogq/backlog/cmd/backlog"),
			{"test", "-c", "-o", s.handler, "github.com/backlogq/backlog/internal/faulttest"},
		} {
			out, err := exec.Command(goBin, args...).CombinedOutput()
			if err != nil {
				s.binErr = fmt.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, out)
				return
			}
		}
		t.Logf("built backlog and the job handler in %s", time.Since(start).Round(time.Millisecond))
	})
	if s.binErr != nil {
		t.Fatalf("build: %v", s.binErr)
	}
	return s.bin
}

// handlerBin is the job handler built by backlogBin.
func handlerBin(t *testing.T) string {
	t.Helper()
	backlogBin(t)
	return shared.handler
}

// server returns the private server of kind, started on first use, and
// running (it is started again if an earlier scenario left it down). It
// skips t when the server cannot run here, fails it with
// BACKLOG_REQUIRE_DBS=1.
func server(t *testing.T, kind dbserver.Kind) *dbserver.Server {
	t.Helper()
	s := &shared
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.servers == nil {
		s.servers = map[dbserver.Kind]*serverSlot{}
	}
	slot := s.servers[kind]
	if slot == nil {
		slot = &serverSlot{}
		opts := dbserver.Options{}
		start := time.Now()
		if kind == dbserver.KindPostgres {
			slot.srv, slot.err = dbserver.StartPostgres(context.Background(), opts)
		} else {
			slot.srv, slot.err = dbserver.StartMariaDB(context.Background(), opts)
		}
		if slot.err == nil {
			t.Logf("private %s server on port %d, started in %s", kind, slot.srv.Port(), time.Since(start).Round(time.Millisecond))
		}
		s.servers[kind] = slot
	}
	if slot.err != nil {
		dbserver.Unavailable(t, string(kind), slot.err)
	}
	if !slot.srv.Running() {
		if err := slot.srv.Start(context.Background()); err != nil {
			t.Fatalf("restart the private %s server: %v", kind, err)
		}
	}
	return slot.srv
}

// freshDatabase creates a new database on srv and returns its store URL.
func freshDatabase(t *testing.T, srv *dbserver.Server) string {
	t.Helper()
	shared.mu.Lock()
	shared.dbSeq++
	name := fmt.Sprintf("fault_%d", shared.dbSeq)
	shared.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := srv.CreateDatabase(ctx, name); err != nil {
		t.Fatal(err)
	}
	return srv.URL(name)
}

func (s *sharedState) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for kind, slot := range s.servers {
		if slot.srv != nil {
			if err := slot.srv.Close(); err != nil {
				fmt.Fprintf(os.Stderr, "faulttest: close %s: %v\n", kind, err)
			}
		}
	}
	if s.binDir != "" {
		_ = os.RemoveAll(s.binDir)
	}
}

// backendURL returns the store URL of a fresh store of the named backend
// ("sqlite", "postgres", "mariadb") and its server (nil for SQLite).
func backendURL(t *testing.T, name string) (string, *dbserver.Server) {
	t.Helper()
	switch name {
	case "sqlite":
		return "sqlite://" + filepath.Join(t.TempDir(), "fault.db"), nil
	case "postgres":
		srv := server(t, dbserver.KindPostgres)
		return freshDatabase(t, srv), srv
	case "mariadb":
		srv := server(t, dbserver.KindMariaDB)
		return freshDatabase(t, srv), srv
	}
	t.Fatalf("unknown backend %q", name)
	return "", nil
}
