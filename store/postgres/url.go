package postgres

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/backlogq/backlog/core/contract"

	"github.com/jackc/pgx/v5"

	"github.com/backlogq/backlog/store"
)

func init() {
	store.Register("postgres", openURL)
	store.Register("postgresql", openURL)
}

// openURL opens a store from a "postgres://" or "postgresql://" URL.
func openURL(ctx context.Context, u *url.URL) (contract.Store, error) {
	connString, opts, err := ParseURL(u.String())
	if err != nil {
		return nil, err
	}
	return Open(ctx, connString, opts...)
}

// urlParams are backlog's own query parameters of a PostgreSQL URL.
var urlParams = []string{"schema", "strategy", "notify", "migrate", "vacuum", "pooler", "listen_host"}

// namesParam reports whether the query of the connection string raw (what
// follows its first '?') names one of backlog's parameters, however the
// rest of it is written.
func namesParam(raw string) bool {
	_, query, ok := strings.Cut(raw, "?")
	if !ok {
		return false
	}
	for _, part := range strings.FieldsFunc(query, func(r rune) bool { return r == '&' || r == ';' }) {
		key, _, _ := strings.Cut(part, "=")
		if k, err := url.QueryUnescape(key); err == nil {
			key = k
		}
		if slices.Contains(urlParams, key) {
			return true
		}
	}
	return false
}

// ParseURL splits a store URL into the connection string for pgx and the
// options named by backlog's own query parameters (schema, strategy,
// notify, migrate, vacuum, pooler, listen_host), which it removes.
// listen_host=H:P[,H2:P2] is WithListenConnString with the URL's user,
// database and parameters on those hosts. vacuum=false is
// WithVacuumThreshold(-1, 0): the store leaves its jobs table to
// autovacuum alone. Every other parameter is left for pgx
// (sslmode, pool_max_conns, default_query_exec_mode, …). A query that does
// not parse (a ';' between parameters, a bad %-escape) and one of
// backlog's parameters given twice are errors.
func ParseURL(raw string) (string, []Option, error) {
	u, err := store.ParseURL(raw)
	if err != nil {
		return "", nil, fmt.Errorf("postgres: %w", err)
	}
	q, err := store.Query(u, urlParams...)
	if err != nil {
		return "", nil, fmt.Errorf("postgres: %w", err)
	}
	var opts []Option
	listenHost := ""
	for k, vs := range q {
		v := vs[0]
		switch k {
		case "schema":
			opts = append(opts, WithSchema(v))
		case "pooler":
			opts = append(opts, WithPooler(Pooler(v)))
		case "listen_host":
			listenHost = v
		case "strategy":
			opts = append(opts, WithStrategy(contract.ClaimStrategy(v)))
		case "notify", "migrate", "vacuum":
			b, err := strconv.ParseBool(v)
			if err != nil {
				return "", nil, fmt.Errorf("postgres: %s=%q: want true or false", k, v)
			}
			switch k {
			case "notify":
				opts = append(opts, WithNotify(b))
			case "migrate":
				opts = append(opts, WithMigrate(b))
			case "vacuum":
				if !b {
					opts = append(opts, WithVacuumThreshold(-1, 0))
				}
			}
		default:
			continue
		}
		q.Del(k)
	}
	u.RawQuery = q.Encode()
	if listenHost != "" {
		// The same URL, other hosts: the user, database and parameters are
		// the pool's.
		lu := *u
		lu.Host = listenHost
		if _, err := pgx.ParseConfig(lu.String()); err != nil {
			return "", nil, fmt.Errorf("postgres: listen_host=%q: %w", listenHost, err)
		}
		opts = append(opts, WithListenConnString(lu.String()))
	}
	return u.String(), opts, nil
}
