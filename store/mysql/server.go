package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// serverInfo is what Open learns about the server.
type serverInfo struct {
	version string // VERSION() as reported
	mariaDB bool
	major   int
	minor   int
	patch   int
	autoInc int64 // @@auto_increment_increment
	// galera: the server is a Galera cluster node (@@wsrep_on is ON);
	// clusterSize is wsrep_cluster_size when Open or New read it.
	galera      bool
	clusterSize int
}

// atLeast reports whether the server version is ≥ major.minor.patch.
func (s serverInfo) atLeast(major, minor, patch int) bool {
	if s.major != major {
		return s.major > major
	}
	if s.minor != minor {
		return s.minor > minor
	}
	return s.patch >= patch
}

// skipLocked reports whether the server has FOR UPDATE SKIP LOCKED:
// MySQL 8.0.1+, MariaDB 10.6+.
func (s serverInfo) skipLocked() bool {
	if s.mariaDB {
		return s.atLeast(10, 6, 0)
	}
	return s.atLeast(8, 0, 1)
}

// isolationVar names the session variable for the transaction isolation
// level: transaction_isolation on MySQL 5.7.20+ and MariaDB 11.1+,
// tx_isolation before.
func (s serverInfo) isolationVar() string {
	if s.mariaDB {
		if s.atLeast(11, 1, 0) {
			return "transaction_isolation"
		}
		return "tx_isolation"
	}
	if s.atLeast(5, 7, 20) {
		return "transaction_isolation"
	}
	return "tx_isolation"
}

// String describes the server, e.g. "MariaDB 10.11.19".
func (s serverInfo) String() string {
	name := "MySQL"
	if s.mariaDB {
		name = "MariaDB"
	}
	return fmt.Sprintf("%s %d.%d.%d", name, s.major, s.minor, s.patch)
}

// parseVersion reads VERSION() text such as "8.0.36", "8.4.2-log" or
// "10.11.19-MariaDB-0+deb12u1" (also the "5.5.5-10.x" replication prefix).
func parseVersion(v string) (serverInfo, error) {
	s := serverInfo{version: v, mariaDB: strings.Contains(strings.ToLower(v), "mariadb")}
	num := v
	if s.mariaDB {
		num = strings.TrimPrefix(num, "5.5.5-")
	}
	if i := strings.IndexFunc(num, func(r rune) bool { return r != '.' && (r < '0' || r > '9') }); i >= 0 {
		num = num[:i]
	}
	parts := strings.Split(num, ".")
	if len(parts) < 2 {
		return s, fmt.Errorf("mysql: cannot parse server version %q", v)
	}
	var n [3]int
	for i := 0; i < len(parts) && i < 3; i++ {
		x, err := strconv.Atoi(parts[i])
		if err != nil {
			return s, fmt.Errorf("mysql: cannot parse server version %q", v)
		}
		n[i] = x
	}
	s.major, s.minor, s.patch = n[0], n[1], n[2]
	return s, nil
}

// probe asks db for its version and auto-increment step, and whether it
// is a Galera node (galera).
func probe(ctx context.Context, db *sql.DB) (serverInfo, error) {
	var v string
	var inc int64
	if err := db.QueryRowContext(ctx, "SELECT VERSION(), @@auto_increment_increment").Scan(&v, &inc); err != nil {
		return serverInfo{}, fmt.Errorf("mysql: read server version: %w", err)
	}
	s, err := parseVersion(v)
	if err != nil {
		return s, err
	}
	s.autoInc = max(1, inc)
	if s.galera, s.clusterSize, err = galera(ctx, db); err != nil {
		return s, fmt.Errorf("mysql: read wsrep variables: %w", err)
	}
	return s, nil
}

// galera reads whether the server is a Galera node (the global wsrep_on
// variable is ON; MySQL has no such variable, MariaDB without a cluster
// has it OFF) and, when it is, wsrep_cluster_size: the nodes in the
// cluster's primary component at this moment.
func galera(ctx context.Context, db *sql.DB) (bool, int, error) {
	on, err := showOne(ctx, db, "SHOW GLOBAL VARIABLES LIKE 'wsrep_on'")
	if err != nil || !strings.EqualFold(on, "ON") {
		return false, 0, err
	}
	size, err := showOne(ctx, db, "SHOW GLOBAL STATUS LIKE 'wsrep_cluster_size'")
	if err != nil {
		return true, 0, err
	}
	n, _ := strconv.Atoi(size)
	return true, n, nil
}

// showOne returns the value of the one row a SHOW … LIKE statement
// returns, or "" when it returns none.
func showOne(ctx context.Context, db *sql.DB, query string) (string, error) {
	var name, value string
	err := db.QueryRowContext(ctx, query).Scan(&name, &value)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	return value, err
}
