package mysql

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/backlogq/backlog/core/contract"

	"github.com/go-sql-driver/mysql"

	"github.com/backlogq/backlog/store"
	"github.com/backlogq/backlog/storetest/dbtest"
)

func TestParseURL(t *testing.T) {
	dsn, opts, err := ParseURL("mysql://root@127.0.0.1:3306/test?prefix=app_&strategy=optimistic&migrate=false&max_conns=3&notify_interval=25ms&timeout=5s")
	if err != nil {
		t.Fatal(err)
	}
	if want := "root@tcp(127.0.0.1:3306)/test?timeout=5s"; dsn != want {
		t.Errorf("dsn %q, want %q", dsn, want)
	}
	c, err := newConfig(opts)
	if err != nil {
		t.Fatal(err)
	}
	if c.prefix != "app_" || c.strategy != contract.StrategyOptimistic || c.migrate || c.maxConns != 3 || c.notifyEvery != 25*time.Millisecond {
		t.Errorf("options %+v", c)
	}
	for raw, want := range map[string]time.Duration{
		"mysql://root@127.0.0.1/test":                     DefaultNotifyInterval,
		"mysql://root@127.0.0.1/test?notify_interval=0":   0,
		"mysql://root@127.0.0.1/test?notify_interval=off": 0,
		"mysql://root@127.0.0.1/test?notify_interval=5ms": 5 * time.Millisecond,
	} {
		_, opts, err := ParseURL(raw)
		if err != nil {
			t.Fatalf("ParseURL(%q): %v", raw, err)
		}
		if c, err := newConfig(opts); err != nil || c.notifyEvery != want {
			t.Errorf("ParseURL(%q): notify interval %s (%v); want %s", raw, c.notifyEvery, err, want)
		}
	}
	dsn, _, err = ParseURL("mysql://u%40x:p%3Aw@db.example/app%2Djobs")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatalf("DSN %q does not parse: %v", dsn, err)
	}
	if cfg.User != "u@x" || cfg.Passwd != "p:w" || cfg.Addr != "db.example:3306" || cfg.DBName != "app-jobs" {
		t.Errorf("DSN %q parsed as %+v", dsn, cfg)
	}
	for _, bad := range []string{
		"mysql://root@127.0.0.1:3306/",            // no database
		"mysql:///test",                           // no host
		"mysql://root@127.0.0.1:port/test",        // bad port
		"mysql://root@127.0.0.1/test?migrate=yes", // bad bool
		"mysql://root@127.0.0.1/test?max_conns=0",
		"mysql://root@127.0.0.1/test?notify_interval=-5ms",
		"mysql://root@127.0.0.1/test?notify_interval=soon",
		"mysql://root@127.0.0.1/test?parseTime=maybe", // the driver's own check
		"mysql://root@[::1/test",                      // malformed
	} {
		if _, _, err := ParseURL(bad); err == nil {
			t.Errorf("ParseURL(%q) accepted it", bad)
		}
	}
	if _, err := store.Open(context.Background(), "mysql://root@[::1/test"); err == nil || !strings.Contains(err.Error(), "malformed") {
		t.Errorf("store.Open of a malformed URL: %v", err)
	}
}

func TestParseVersion(t *testing.T) {
	for _, c := range []struct {
		v          string
		maria      bool
		skipLocked bool
		isoVar     string
	}{
		{"8.0.36", false, true, "transaction_isolation"},
		{"8.0.0-dmr", false, false, "transaction_isolation"},
		{"8.4.2-log", false, true, "transaction_isolation"},
		{"5.7.44-log", false, false, "transaction_isolation"},
		{"5.7.19", false, false, "tx_isolation"},
		{"10.11.19-MariaDB-0+deb12u1", true, true, "tx_isolation"},
		{"5.5.5-10.5.23-MariaDB", true, false, "tx_isolation"},
		{"11.4.2-MariaDB", true, true, "transaction_isolation"},
	} {
		s, err := parseVersion(c.v)
		if err != nil {
			t.Fatal(err)
		}
		if s.mariaDB != c.maria || s.skipLocked() != c.skipLocked || s.isolationVar() != c.isoVar {
			t.Errorf("%s: mariaDB %v skipLocked %v isolation var %s", c.v, s.mariaDB, s.skipLocked(), s.isolationVar())
		}
	}
	if _, err := parseVersion("garbage"); err == nil {
		t.Error("parseVersion accepted garbage")
	}
}

// TestSkipLockedRefused: a server without SKIP LOCKED refuses the strategy
// with core.ErrUnsupported and accepts the optimistic one.
func TestSkipLockedRefused(t *testing.T) {
	dsn := dbtest.MySQLDSN(t)
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, v := range []string{"5.7.44", "10.5.23-MariaDB"} {
		old, _ := parseVersion(v)
		c, _ := newConfig([]Option{WithMigrate(false)})
		_, err := newStore(context.Background(), db, false, old, nil, c)
		if !errors.Is(err, contract.ErrUnsupported) || !strings.Contains(err.Error(), "SKIP LOCKED") {
			t.Errorf("%s with skip-locked: %v; want an error about SKIP LOCKED wrapping core.ErrUnsupported", v, err)
		}
		c.strategy = contract.StrategyOptimistic
		if _, err := newStore(context.Background(), db, false, old, nil, c); err != nil {
			t.Errorf("%s with optimistic: %v", v, err)
		}
	}
	if _, err := Open(context.Background(), dsn, WithStrategy("fifo")); !errors.Is(err, contract.ErrUnsupported) {
		t.Errorf("unknown strategy: %v", err)
	}
}

// TestOpenURL opens through the registry, migrating from several
// goroutines at once, and round-trips a job.
func TestOpenURL(t *testing.T) {
	cfg, err := mysql.ParseDSN(dbtest.MySQLDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	u := "mysql://" + cfg.User + ":" + cfg.Passwd + "@" + cfg.Addr + "/" + cfg.DBName + "?prefix=app_&strategy=skip-locked"
	ctx := context.Background()
	var wg sync.WaitGroup
	stores := make([]contract.Store, 4)
	errs := make([]error, 4)
	for i := range stores {
		wg.Add(1)
		go func() {
			defer wg.Done()
			stores[i], errs[i] = store.Open(ctx, u)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("concurrent open %d: %v", i, err)
		}
		defer stores[i].Close()
	}
	s := stores[0]
	if _, ok := s.(contract.Notifier); !ok {
		t.Error("the MySQL store must declare contract.Notifier")
	}
	if err := s.(contract.Migrator).Migrate(ctx); err != nil {
		t.Fatalf("second migrate: %v", err)
	}
	res, err := s.Insert(ctx, t0, []contract.InsertParams{job("u", "k")})
	if err != nil {
		t.Fatal(err)
	}
	got, err := stores[1].Get(ctx, res[0].Job.ID)
	if err != nil || got.Queue != "u" || !got.RunAt.Equal(t0) || got.RunAt.Location() != t0.Location() {
		t.Fatalf("Get: %+v, %v", got, err)
	}
	var n int
	if err := s.(*Store).DB().QueryRow("SELECT COUNT(*) FROM app_jobs").Scan(&n); err != nil || n != 1 {
		t.Errorf("prefixed table app_jobs holds %d rows (%v); want 1", n, err)
	}
}

// TestNewCallerDB wraps a caller-owned pool whose session time zone is not
// UTC: times still round-trip, and a pool decoding times in another
// location is refused.
func TestNewCallerDB(t *testing.T) {
	dsn := dbtest.MySQLDSN(t)
	ctx := context.Background()
	withParams := func(params map[string]string, loc string) string {
		cfg, err := mysql.ParseDSN(dsn)
		if err != nil {
			t.Fatal(err)
		}
		cfg.ParseTime = true
		if loc != "" {
			if cfg.Loc, err = time.LoadLocation(loc); err != nil {
				t.Skip(err)
			}
		}
		if cfg.Params == nil {
			cfg.Params = map[string]string{}
		}
		for k, v := range params {
			cfg.Params[k] = v
		}
		return cfg.FormatDSN()
	}
	db, err := sql.Open("mysql", withParams(map[string]string{"time_zone": "'+05:30'"}, ""))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	s, err := New(ctx, db, WithStrategy(contract.StrategyOptimistic))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	p := job("n", "k")
	res, err := s.Insert(ctx, t0, []contract.InsertParams{p})
	if err != nil {
		t.Fatal(err)
	}
	jobs, err := s.Claim(ctx, contract.ClaimParams{Queue: "n", WorkerID: "w", Limit: 1, Now: t0, LeaseUntil: t0.Add(1e9)})
	if err != nil || len(jobs) != 1 || jobs[0].ID != res[0].Job.ID {
		t.Fatalf("claim: %v %v", jobs, err)
	}
	got, err := s.Get(ctx, jobs[0].ID)
	if err != nil || !got.RunAt.Equal(t0) || !got.LeaseUntil.Equal(t0.Add(1e9)) || !got.CreatedAt.Equal(t0) {
		t.Fatalf("times did not round-trip: %+v %v", got, err)
	}
	local, err := sql.Open("mysql", withParams(nil, "Asia/Kolkata"))
	if err != nil {
		t.Fatal(err)
	}
	defer local.Close()
	if _, err := New(ctx, local, WithMigrate(false)); err == nil || !strings.Contains(err.Error(), "loc=UTC") {
		t.Errorf("New on a loc=Asia/Kolkata pool: %v; want a refusal naming loc=UTC", err)
	}
	if _, err := s.InsertTx(ctx, "not a tx", t0, nil); !errors.Is(err, contract.ErrUnsupported) {
		t.Errorf("InsertTx with a string: %v", err)
	}
}
