package sqlite

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/backlogq/backlog/core/contract"
)

// TestOpenTakesURLs: Open reads a "sqlite:" URL as store.Open and the
// CLI's --db do. It used to take the whole URL for a file name, making a
// file called "sqlite:…" with the default prefix.
func TestOpenTakesURLs(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "jobs.db")
	s, err := Open(ctx, "sqlite:"+path+"?prefix=app_&notify_interval=0s&busy_timeout=2s")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.Prefix() != "app_" || s.notifyEvery != 0 {
		t.Errorf("prefix %q notify every %s; want app_, 0", s.Prefix(), s.notifyEvery)
	}
	if _, err := os.Stat(path); err != nil {
		t.Errorf("the database file: %v; want it at %s", err, path)
	}
	var n int
	if err := s.DB().QueryRow("SELECT COUNT(*) FROM sqlite_master WHERE name = 'app_jobs'").Scan(&n); err != nil || n != 1 {
		t.Errorf("app_jobs: %d tables, %v; want 1", n, err)
	}

	m, err := Open(ctx, "SQLite::memory:?prefix=mem_")
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if m.Prefix() != "mem_" || !m.memory {
		t.Errorf("prefix %q memory %v; want mem_, true", m.Prefix(), m.memory)
	}
}

// TestOpenOptionsWinOverURL: an option passed to Open overrides the URL's
// parameter of the same meaning.
func TestOpenOptionsWinOverURL(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "jobs.db")
	s, err := Open(ctx, "sqlite:"+path+"?prefix=url_&notify_interval=5ms&migrate=false",
		WithPrefix("opt_"), WithNotifyInterval(time.Second), WithMigrate(true))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.Prefix() != "opt_" || s.notifyEvery != time.Second {
		t.Errorf("prefix %q notify every %s; want the options' opt_, 1s", s.Prefix(), s.notifyEvery)
	}
	if _, err := s.Stats(ctx); err != nil {
		t.Errorf("Stats after WithMigrate(true) over migrate=false: %v", err)
	}
}

// TestOpenURLErrors: bad URLs and parameters, a missing file with
// create=false, and a plain path holding '?' are refused with errors
// naming the problem.
func TestOpenURLErrors(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing.db")
	for path, want := range map[string]string{
		"sqlite:" + missing + "?create=false":      "does not exist",
		"sqlite:" + missing + "?prefix=a;b":        `';' follows parameter "prefix"`,
		"sqlite:" + missing + "?colour=blue":       `unknown URL parameter "colour"`,
		"sqlite:" + missing + "?strategy=optimist": `"optimist"`,
		"sqlite:":                "URL names no database file",
		missing + "?prefix=app_": "give parameters in a URL",
	} {
		s, err := Open(ctx, path)
		if err == nil {
			s.Close()
			t.Errorf("%s: opened; want an error", path)
			continue
		}
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v; want it to say %s", path, err, want)
		}
	}
	if _, err := Open(ctx, "sqlite:"+missing+"?create=false"); !errors.Is(err, contract.ErrNotFound) {
		t.Errorf("create=false on a missing file: %v; want ErrNotFound", err)
	}
	if _, err := os.Stat(missing); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a refused open made %s (%v)", missing, err)
	}
}
