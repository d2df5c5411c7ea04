// Package store opens a contract.Store from a URL, the way database/sql opens a
// driver by name: store packages register an OpenFunc for a URL scheme in
// their init function, and programs (the backlog CLI included) import the
// store packages they want for their side effect.
//
//	import (
//		"github.com/backlogq/backlog/store"
//		_ "github.com/backlogq/backlog/store/sqlite" // registers "sqlite"
//	)
//
//	s, err := store.Open(ctx, "sqlite:jobs.db?prefix=app_")
//
// # Third-party stores
//
// A store for another database lives in its own module. It implements
// contract.Store (proving it with storetest.Run), and registers itself:
//
//	func init() {
//		store.Register("mydb", func(ctx context.Context, u *url.URL) (contract.Store, error) {
//			return Open(ctx, u.String())
//		})
//	}
//
// A program that wants the CLI to serve that database builds the stock
// command (package cli) with one more blank import, in a main of three
// lines (see package cli); store.Open then accepts "mydb://…" URLs exactly
// like the built-in schemes, in every command.
package store

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"sync"

	"github.com/backlogq/backlog/core/contract"
)

// OpenFunc opens a store from a parsed URL whose Scheme is the one it was
// registered for. It owns the interpretation of the rest of the URL (opaque
// part, host, path, query).
type OpenFunc func(ctx context.Context, u *url.URL) (contract.Store, error)

var (
	mu      sync.RWMutex
	openers = map[string]OpenFunc{}
)

// Register makes open available to Open for URLs with the given scheme
// (compared case-insensitively; stored lower-case). Like sql.Register, it
// panics if open is nil, if scheme is empty or not a valid URL scheme, or if
// the scheme is already registered; it is meant to be called from init.
func Register(scheme string, open OpenFunc) {
	if open == nil {
		panic("store: Register open func is nil")
	}
	if !validScheme(scheme) {
		panic(fmt.Sprintf("store: Register called with invalid scheme %q", scheme))
	}
	scheme = strings.ToLower(scheme)
	mu.Lock()
	defer mu.Unlock()
	if _, dup := openers[scheme]; dup {
		panic("store: Register called twice for scheme " + scheme)
	}
	openers[scheme] = open
}

// validScheme reports whether s is an RFC 3986 scheme: a letter followed by
// letters, digits, '+', '-' or '.'.
func validScheme(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		letter := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z'
		if !letter && (i == 0 || !(r >= '0' && r <= '9' || r == '+' || r == '-' || r == '.')) {
			return false
		}
	}
	return true
}

// Schemes returns the registered schemes, sorted.
func Schemes() []string {
	mu.RLock()
	defer mu.RUnlock()
	out := make([]string, 0, len(openers))
	for s := range openers {
		out = append(out, s)
	}
	slices.Sort(out)
	return out
}

// ErrUnknownScheme is wrapped by Open when no store is registered for the
// URL's scheme.
var ErrUnknownScheme = errors.New("store: unknown URL scheme")

// Open parses rawURL and hands it to the OpenFunc registered for its scheme.
// It returns an error wrapping ErrBadURL for a URL that does not parse, an
// error for one that has no scheme, and an
// error wrapping ErrUnknownScheme (listing the registered schemes and the
// import that registers a store) for an unregistered one. Errors from the
// OpenFunc are returned wrapped with the scheme.
func Open(ctx context.Context, rawURL string) (contract.Store, error) {
	u, err := ParseURL(rawURL)
	if err != nil {
		return nil, err
	}
	if u.Scheme == "" {
		return nil, fmt.Errorf("store: store URL %q has no scheme (want e.g. sqlite:path/to/file.db); registered: %s",
			redact(u), strings.Join(Schemes(), ", "))
	}
	scheme := strings.ToLower(u.Scheme)
	mu.RLock()
	open := openers[scheme]
	mu.RUnlock()
	if open == nil {
		reg := strings.Join(Schemes(), ", ")
		if reg == "" {
			reg = "none (import a store package, e.g. _ \"github.com/backlogq/backlog/store/sqlite\")"
		}
		return nil, fmt.Errorf("%w %q; registered: %s", ErrUnknownScheme, scheme, reg)
	}
	s, err := open(ctx, u)
	if err != nil {
		return nil, fmt.Errorf("store: open %s store: %w", scheme, err)
	}
	return s, nil
}

// ErrBadURL is wrapped by ParseURL (and so by Open) for a store URL that
// does not parse.
var ErrBadURL = errors.New("store: malformed store URL")

// ParseURL parses a store URL as url.Parse does, but its error never
// repeats the URL, which may hold a password: it wraps ErrBadURL and says
// only what is wrong with it.
func ParseURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("%w: %v", ErrBadURL, err)
	}
	return u, nil
}

// ErrBadQuery is wrapped by Query for a URL query that does not parse.
var ErrBadQuery = errors.New("store: malformed URL query")

// Query parses the query of a store URL. Unlike url.URL.Query, which drops
// what it cannot parse without a word (a "prefix=app_;strategy=x" pair
// vanishes whole, since ';' no longer separates parameters), it returns
// an error wrapping ErrBadQuery that names the problem, and an error for
// a parameter in names given more than once. Store packages use it for
// their own parameters; a store that hands the rest to a driver passes
// the values on.
func Query(u *url.URL, names ...string) (url.Values, error) {
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		// Name the parameter, never its value (it may be a password).
		for _, part := range strings.Split(u.RawQuery, "&") {
			if strings.Contains(part, ";") {
				key, _, _ := strings.Cut(part, "=")
				key, _, _ = strings.Cut(key, ";")
				return nil, fmt.Errorf("%w: a ';' follows parameter %q: separate parameters with '&', not ';'", ErrBadQuery, key)
			}
		}
		return nil, fmt.Errorf("%w: %v", ErrBadQuery, err)
	}
	for _, n := range names {
		if len(q[n]) > 1 {
			return nil, fmt.Errorf("%w: parameter %s is given %d times", ErrBadQuery, n, len(q[n]))
		}
	}
	return q, nil
}

// redact hides the secrets of u for error messages (RedactURL).
func redact(u *url.URL) string { return RedactURL(u.String()) }

// secretParams are the query parameters RedactURL hides (compared
// case-insensitively): passwords as MySQL, PostgreSQL (libpq, pgx) and
// job-server URLs name them, and tokens.
var secretParams = []string{"password", "pass", "pwd", "sslpassword", "token", "access_token", "secret"}

// RedactURL returns the store or server URL u fit for logs and error
// messages: a password in its user info and the values of its
// password-like query parameters (password, pass, pwd, sslpassword,
// token, access_token, secret, in any case) become "xxxxx"; the rest,
// user name included, is kept. A URL that does not parse is reduced to
// its scheme ("postgres:…"), or "(unparsable URL)" without one, since it
// might hold a secret anywhere. The CLI, the Go client of the HTTP API and
// Open's errors all print URLs through it.
func RedactURL(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		if i := strings.Index(u, ":"); i > 0 && validScheme(u[:i]) {
			return u[:i] + ":…"
		}
		return "(unparsable URL)"
	}
	if p.User != nil {
		if _, has := p.User.Password(); has {
			p.User = url.UserPassword(p.User.Username(), "xxxxx")
		}
	}
	if p.RawQuery != "" {
		q, err := url.ParseQuery(p.RawQuery)
		if err != nil {
			p.RawQuery = "…"
			return p.String()
		}
		changed := false
		for k := range q {
			if slices.Contains(secretParams, strings.ToLower(k)) {
				q.Set(k, "xxxxx")
				changed = true
			}
		}
		if changed {
			p.RawQuery = q.Encode()
		}
	}
	return p.String()
}
