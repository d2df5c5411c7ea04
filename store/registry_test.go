package store

import (
	"context"
	"errors"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/backlogq/backlog/core/contract"
)

// fakeStore is a contract.Store that only remembers its URL.
type fakeStore struct {
	contract.Store
	u *url.URL
}

func TestRegisterAndOpen(t *testing.T) {
	Register("Fake-Test", func(ctx context.Context, u *url.URL) (contract.Store, error) {
		if u.Query().Get("fail") != "" {
			return nil, errors.New("boom")
		}
		return fakeStore{u: u}, nil
	})
	if !slices.Contains(Schemes(), "fake-test") {
		t.Fatalf("Schemes() = %v, want fake-test", Schemes())
	}
	s, err := Open(context.Background(), "FAKE-TEST:some/path?x=1")
	if err != nil {
		t.Fatal(err)
	}
	if got := s.(fakeStore).u.Opaque; got != "some/path" {
		t.Fatalf("opaque = %q", got)
	}
	_, err = Open(context.Background(), "fake-test:x?fail=1")
	if err == nil || !strings.Contains(err.Error(), "boom") || !strings.Contains(err.Error(), "fake-test") {
		t.Fatalf("open error = %v", err)
	}
}

func TestOpenErrors(t *testing.T) {
	Register("fake-err", func(ctx context.Context, u *url.URL) (contract.Store, error) { return fakeStore{u: u}, nil })
	_, err := Open(context.Background(), "nosuch://x")
	if !errors.Is(err, ErrUnknownScheme) || !strings.Contains(err.Error(), "fake-err") {
		t.Fatalf("unknown scheme error = %v", err)
	}
	if _, err := Open(context.Background(), "jobs.db"); err == nil || !strings.Contains(err.Error(), "no scheme") {
		t.Fatalf("no-scheme error = %v", err)
	}
	if _, err := Open(context.Background(), "fake-err://x%zz"); err == nil || !strings.Contains(err.Error(), "malformed") {
		t.Fatalf("malformed error = %v", err)
	}
	if _, err := Open(context.Background(), "nosuch://user:secret@host/db"); err == nil || strings.Contains(err.Error(), "secret") {
		t.Fatalf("error leaks password: %v", err)
	}
}

func TestRegisterPanics(t *testing.T) {
	Register("fake-dup", func(ctx context.Context, u *url.URL) (contract.Store, error) { return nil, nil })
	for name, fn := range map[string]func(){
		"duplicate": func() {
			Register("FAKE-DUP", func(ctx context.Context, u *url.URL) (contract.Store, error) { return nil, nil })
		},
		"nil": func() { Register("fake-nil", nil) },
		"empty": func() {
			Register("", func(ctx context.Context, u *url.URL) (contract.Store, error) { return nil, nil })
		},
		"invalid": func() {
			Register("1bad", func(ctx context.Context, u *url.URL) (contract.Store, error) { return nil, nil })
		},
	} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Fatal("Register did not panic")
				}
			}()
			fn()
		})
	}
}

// TestRedactURL: passwords in the user info and in password-like query
// parameters are hidden, whatever the scheme; an unparsable URL keeps
// only its scheme.
func TestRedactURL(t *testing.T) {
	for in, want := range map[string]string{
		"sqlite:backlog.db":                                      "sqlite:backlog.db",
		"postgres://u:pw@h:5432/db?x=1":                          "postgres://u:xxxxx@h:5432/db?x=1",
		"postgres://u@h:5432/db?password=pw&sslmode=disable":     "postgres://u@h:5432/db?password=xxxxx&sslmode=disable",
		"postgres://h/db?sslpassword=k&PASSWORD=p":               "postgres://h/db?PASSWORD=xxxxx&sslpassword=xxxxx",
		"mysql://h/db?password=pw&user=u":                        "mysql://h/db?password=xxxxx&user=u",
		"mysql://app:pw@n1:3306,n2:3306/app?strategy=optimistic": "mysql://app:xxxxx@n1:3306,n2:3306/app?strategy=optimistic",
		"http://127.0.0.1:8080/?token=t":                         "http://127.0.0.1:8080/?token=xxxxx",
		"postgres://u:p%zz@h/db":                                 "postgres:…",
		"no scheme %zz":                                          "(unparsable URL)",
		"postgres://h/db?password=%zz":                           "postgres://h/db?…",
		"sqlite:///abs/path.db?prefix=app_":                      "sqlite:///abs/path.db?prefix=app_",
	} {
		if got := RedactURL(in); got != want {
			t.Errorf("RedactURL(%q) = %q, want %q", in, got, want)
		}
	}
}
