package cli

import (
	"context"
	"fmt"
	"net/url"
	"strings"
)

// schemaVersioner is implemented by the SQL stores (sqlite, postgres,
// mysql): the newest migration applied to the store's schema (0 for none)
// and the newest this build has.
type schemaVersioner interface {
	SchemaVersion(ctx context.Context) (applied, newest int64, err error)
}

// migrateReport is what backlog migrate did: the schema version before and
// after, and how many migrations that was (versions are consecutive).
type migrateReport struct {
	DB          string `json:"db"`
	Status      string `json:"status"` // "migrated", or "no schema" for a store without one
	FromVersion int64  `json:"from_version"`
	ToVersion   int64  `json:"to_version"`
	Applied     int64  `json:"applied"`
	versioned   bool   // the store reports its versions
}

// String is the line backlog migrate prints.
func (r migrateReport) String() string {
	switch {
	case r.Status == "no schema":
		return r.DB + ": this store has no schema to migrate"
	case !r.versioned:
		return r.DB + ": schema is up to date"
	case r.Applied == 0:
		return fmt.Sprintf("%s: schema is up to date: already at version %d", r.DB, r.ToVersion)
	case r.Applied == 1:
		return fmt.Sprintf("%s: migrated the schema from version %d to %d (1 migration applied)", r.DB, r.FromVersion, r.ToVersion)
	}
	return fmt.Sprintf("%s: migrated the schema from version %d to %d (%d migrations applied)", r.DB, r.FromVersion, r.ToVersion, r.Applied)
}

// migrateAndReport opens the store of --db without its automatic
// migration on open, reads the schema version, migrates, and reads it
// again.
func (a *app) migrateAndReport(ctx context.Context) (migrateReport, error) {
	rep := migrateReport{DB: redactURL(a.dbURL), Status: "migrated"}
	st, err := openStoreURL(ctx, noAutoMigrateURL(a.dbURL))
	if err != nil {
		return rep, err
	}
	defer st.Close()
	sv, versioned := st.(schemaVersioner)
	if versioned {
		if rep.FromVersion, _, err = sv.SchemaVersion(ctx); err != nil {
			return rep, err
		}
	}
	has, err := migrate(ctx, st)
	if err != nil {
		return rep, err
	}
	if !has {
		rep.Status = "no schema"
		return rep, nil
	}
	if versioned {
		if rep.ToVersion, _, err = sv.SchemaVersion(ctx); err != nil {
			return rep, err
		}
		rep.Applied = max(0, rep.ToVersion-rep.FromVersion)
		rep.versioned = true
	}
	return rep, nil
}

// noAutoMigrateURL adds migrate=false to the URL of a SQL store unless it
// sets migrate, so that opening it leaves the schema as it is.
func noAutoMigrateURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return raw // openStoreURL reports it
	}
	switch strings.ToLower(u.Scheme) {
	case "sqlite", "postgres", "postgresql", "mysql":
	default:
		return raw
	}
	q := u.Query()
	if q.Has("migrate") {
		return raw
	}
	q.Set("migrate", "false")
	u.RawQuery = q.Encode()
	return u.String()
}
