package sqlite

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/backlogq/backlog/core/contract"
	"github.com/backlogq/backlog/store"
)

func init() {
	store.Register("sqlite", openURL)
}

// openURL opens a store from a "sqlite:" URL (see the package doc). With
// create=false a missing database file is an error wrapping
// core.ErrNotFound instead of a new, empty database.
func openURL(ctx context.Context, u *url.URL) (contract.Store, error) {
	path, opts, err := fromURL(u, nil)
	if err != nil {
		return nil, err
	}
	return Open(ctx, path, opts...)
}

// urlPrefix starts a "sqlite:" URL (compared case-insensitively).
const urlPrefix = "sqlite:"

// isURL reports whether Open's path is a "sqlite:" URL.
func isURL(path string) bool {
	return len(path) >= len(urlPrefix) && strings.EqualFold(path[:len(urlPrefix)], urlPrefix)
}

// fromURL returns the file path of a "sqlite:" URL and opts led by the
// options its parameters name (so that opts, applied later, win). With
// create=false a missing file is an error wrapping core.ErrNotFound.
func fromURL(u *url.URL, opts []Option) (string, []Option, error) {
	path, urlOpts, err := parseURL(u)
	if err != nil {
		return "", nil, err
	}
	if create, _ := strconv.ParseBool(u.Query().Get("create")); u.Query().Has("create") && !create && path != ":memory:" {
		if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
			return "", nil, fmt.Errorf("sqlite: database file %s does not exist: %w", path, contract.ErrNotFound)
		}
	}
	return path, append(urlOpts, opts...), nil
}

// urlParams are the query parameters of a "sqlite:" URL.
var urlParams = []string{"prefix", "strategy", "migrate", "busy_timeout", "notify_interval", "create"}

// parseURL splits a "sqlite:" URL into a path and options. A query that
// does not parse (a ';' between parameters, a bad %-escape), an unknown
// parameter and one given twice are errors.
func parseURL(u *url.URL) (string, []Option, error) {
	path := u.Opaque
	if path != "" {
		p, err := url.PathUnescape(path)
		if err != nil {
			return "", nil, fmt.Errorf("sqlite: bad path in URL: %w", err)
		}
		path = p
	} else {
		path = u.Host + u.Path // sqlite:///abs → "/abs"; sqlite://./rel → "./rel"
	}
	if path == "" {
		return "", nil, errors.New("sqlite: URL names no database file (want sqlite:path/to/file.db, sqlite:///abs/path.db or sqlite::memory:)")
	}
	q, err := store.Query(u, urlParams...)
	if err != nil {
		return "", nil, fmt.Errorf("sqlite: %w", err)
	}
	var opts []Option
	for k, vs := range q {
		v := vs[0]
		switch k {
		case "prefix":
			opts = append(opts, WithPrefix(v))
		case "strategy":
			opts = append(opts, WithStrategy(contract.ClaimStrategy(v)))
		case "migrate":
			b, err := strconv.ParseBool(v)
			if err != nil {
				return "", nil, fmt.Errorf("sqlite: migrate=%q: want true or false", v)
			}
			opts = append(opts, WithMigrate(b))
		case "create":
			if _, err := strconv.ParseBool(v); err != nil {
				return "", nil, fmt.Errorf("sqlite: create=%q: want true or false", v)
			}
		case "busy_timeout":
			d, err := time.ParseDuration(v)
			if err != nil {
				return "", nil, fmt.Errorf("sqlite: busy_timeout=%q: %w", v, err)
			}
			opts = append(opts, WithBusyTimeout(d))
		case "notify_interval":
			d, err := time.ParseDuration(v)
			if err != nil || d < 0 {
				return "", nil, fmt.Errorf("sqlite: notify_interval=%q: want a non-negative Go duration such as 20ms", v)
			}
			opts = append(opts, WithNotifyInterval(d))
		default:
			return "", nil, fmt.Errorf("sqlite: unknown URL parameter %q (known: prefix, strategy, migrate, busy_timeout, notify_interval, create)", k)
		}
	}
	if strings.ContainsRune(path, '?') {
		return "", nil, errors.New("sqlite: database path may not contain '?'")
	}
	return path, opts, nil
}
