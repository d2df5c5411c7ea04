//go:build linux

package mysql

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"testing"

	"github.com/backlogq/backlog/core/contract"
	"github.com/backlogq/backlog/internal/dbserver"
	"github.com/backlogq/backlog/store"
	"github.com/backlogq/backlog/store/internal/storebench"
)

// BenchmarkGalera is claim-and-complete (batches of 100, one goroutine) and
// insert (batches of 1,000) on a private standalone MariaDB and through
// node 1 of a private three-node Galera cluster, per claim strategy, each
// store opened from its URL on a fresh database, for the cost of
// synchronous replication; b.N is jobs.
//
//	go test -run '^$' -bench Galera -benchtime 20000x ./store/mysql/
func BenchmarkGalera(b *testing.B) {
	ctx := context.Background()
	single := dbserver.MariaDB(b, dbserver.Options{})
	cluster := dbserver.Galera(b, dbserver.Options{})
	for _, via := range []struct {
		name string
		srv  *dbserver.Server
	}{{"standalone", single}, {"galera-node1", cluster.Node(1)}} {
		for _, strategy := range []contract.ClaimStrategy{contract.StrategySkipLocked, contract.StrategyOptimistic} {
			open := func(b *testing.B) contract.Store {
				var r [6]byte
				_, _ = crand.Read(r[:])
				name := "bench_" + hex.EncodeToString(r[:])
				if err := via.srv.CreateDatabase(ctx, name); err != nil {
					b.Fatal(err)
				}
				s, err := store.Open(ctx, via.srv.URL(name)+"?strategy="+string(strategy))
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { s.Close() })
				return s
			}
			b.Run(via.name+"/"+string(strategy)+"/claim-finish", func(b *testing.B) {
				s := open(b)
				storebench.Insert(b, s, benchNow, b.N, storebench.Job(benchNow, `{}`))
				storebench.ClaimFinish(b, s, benchNow)
			})
			b.Run(via.name+"/"+string(strategy)+"/insert", func(b *testing.B) {
				storebench.InsertLoop(b, open(b), benchNow)
			})
		}
	}
}
