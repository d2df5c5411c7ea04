//go:build linux

package mysql

import (
	"context"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/backlogq/backlog/core/contract"

	"github.com/go-sql-driver/mysql"

	"github.com/backlogq/backlog/internal/dbserver"
	"github.com/backlogq/backlog/store"
	"github.com/backlogq/backlog/storetest"
	"github.com/backlogq/backlog/storetest/dbtest"
)

// TestConformanceGalera runs the suite on a private three-node MariaDB
// Galera cluster, through node 1, once per claim strategy (the two at
// once), each store opened from its URL by the store registry as an
// application opens it (mysql://root@127.0.0.1:PORT/DB?strategy=…), on a
// fresh database. Certification conflicts and brute-force aborts counted
// by every node during the run are logged: through one node they should
// stay near zero, since local conflicts are lock waits there.
func TestConformanceGalera(t *testing.T) {
	if testing.Short() {
		t.Skip("short mode")
	}
	began := time.Now()
	c := dbserver.Galera(t, dbserver.Options{})
	t.Logf("three Galera nodes Synced in %v", time.Since(began).Round(time.Millisecond))
	node := c.Node(1)
	certs := func() (cert, bf int64) {
		for i := range c.Nodes() {
			st, err := c.Status(context.Background(), i+1)
			if err != nil {
				t.Fatalf("galera node %d status: %v", i+1, err)
			}
			cert += st.CertFailures
			bf += st.BFAborts
		}
		return cert, bf
	}
	cert0, bf0 := certs()
	t.Cleanup(func() {
		cert, bf := certs()
		t.Logf("Galera certification failures %d, brute-force aborts %d (all nodes, whole run)", cert-cert0, bf-bf0)
	})

	for _, strategy := range []contract.ClaimStrategy{contract.StrategySkipLocked, contract.StrategyOptimistic} {
		t.Run(string(strategy), func(t *testing.T) {
			t.Parallel()
			began := time.Now()
			t.Cleanup(func() { t.Logf("strategy %s took %v", strategy, time.Since(began).Round(time.Second)) })
			galeraConformance(t, node, strategy)
		})
	}
}

// galeraConformance runs storetest for one strategy on fresh databases of
// node, stores opened by URL.
func galeraConformance(t *testing.T, node *dbserver.Server, strategy contract.ClaimStrategy) {
	var mu sync.Mutex
	urls := map[contract.Store]string{}
	open := func(t testing.TB, rawURL string) contract.Store {
		s, err := store.Open(context.Background(), rawURL)
		if err != nil {
			t.Fatalf("store.Open(%s): %v", rawURL, err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	storetest.Run(t, storetest.Factory{
		Strategies: []contract.ClaimStrategy{strategy},
		New: func(t testing.TB, strategy contract.ClaimStrategy) contract.Store {
			cfg, err := mysql.ParseDSN(dbtest.MySQLDatabase(t, node.DriverDSN("test")))
			if err != nil {
				t.Fatal(err)
			}
			u := node.URL(cfg.DBName) + "?" + url.Values{"strategy": {string(strategy)}, "max_conns": {"8"}}.Encode()
			s := open(t, u)
			mu.Lock()
			urls[s] = u
			mu.Unlock()
			return s
		},
		BeginTx: beginTx,
		Reopen: func(t testing.TB, s contract.Store) contract.Store {
			mu.Lock()
			u := urls[s]
			mu.Unlock()
			return open(t, u+"&migrate=false")
		},
	})
}
