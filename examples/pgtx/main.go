// Command pgtx shows backlog's transactional enqueue and transactional
// tasks on PostgreSQL: an order row and the job that ships it are inserted
// in one transaction (a rolled-back order leaves no job behind), and the
// job's handler, a core.HandleTx handler, writes the shipment in the
// pgx.Tx the engine opened, which also holds the job's completion, so the
// shipment exists exactly when the job is completed.
//
//	go run ./examples/pgtx --dsn 'postgres://root@127.0.0.1:5432/test?sslmode=disable'
//
// Without --dsn it reads BACKLOG_TEST_POSTGRES_DSN. It works in the schema
// "pgtx_example" (backlog's tables) and the table public.pgtx_orders, and
// drops both at the end.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/store/postgres"
	"github.com/jackc/pgx/v5"
)

// ShipArgs are the arguments of a "ship" job.
type ShipArgs struct {
	OrderID int64 `json:"order_id"`
}

// Kind names the handler.
func (ShipArgs) Kind() string { return "ship" }

func main() {
	dsn := flag.String("dsn", os.Getenv("BACKLOG_TEST_POSTGRES_DSN"), "PostgreSQL connection string")
	flag.Parse()
	if *dsn == "" {
		log.Fatal("pgtx: pass --dsn or set BACKLOG_TEST_POSTGRES_DSN")
	}
	if err := run(*dsn); err != nil {
		log.Fatal(err)
	}
}

func run(dsn string) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, err := postgres.Open(ctx, dsn, postgres.WithSchema("pgtx_example")) // creates and migrates
	if err != nil {
		return err
	}
	defer st.Close()
	pool := st.Pool()
	defer pool.Exec(context.Background(), "DROP SCHEMA pgtx_example CASCADE; DROP TABLE IF EXISTS pgtx_orders")
	if _, err := pool.Exec(ctx, `CREATE TABLE IF NOT EXISTS pgtx_orders (
		id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, item text NOT NULL, shipped_at timestamptz)`); err != nil {
		return err
	}

	shipped := make(chan int64, 2)
	handlers := core.NewHandlers()
	core.HandleTx(handlers, func(ctx context.Context, tx any, j *core.TypedJob[ShipArgs]) error {
		// tx is the engine's pgx.Tx: the job's completion is written in it
		// after this returns nil, fenced by the attempt's claim (a lost
		// lease rolls the update back), and both commit together.
		if _, err := tx.(pgx.Tx).Exec(ctx, "UPDATE pgtx_orders SET shipped_at = now() WHERE id = $1", j.Args.OrderID); err != nil {
			return err
		}
		shipped <- j.Args.OrderID
		return nil
	})
	client, err := core.NewClient(st, core.Config{Queues: map[string]core.QueueConfig{core.DefaultQueue: {MaxWorkers: 4}}, Handlers: handlers})
	if err != nil {
		return err
	}

	// Enqueue with the order, in the application's transaction.
	order := func(item string, commit bool) (int64, error) {
		tx, err := pool.Begin(ctx)
		if err != nil {
			return 0, err
		}
		defer tx.Rollback(ctx)
		var id int64
		if err := tx.QueryRow(ctx, "INSERT INTO pgtx_orders (item) VALUES ($1) RETURNING id", item).Scan(&id); err != nil {
			return 0, err
		}
		if _, err := client.EnqueueArgsTx(ctx, tx, ShipArgs{OrderID: id}, nil); err != nil {
			return 0, err
		}
		if !commit {
			return id, nil // deferred Rollback: neither the order nor its job exists
		}
		return id, tx.Commit(ctx)
	}
	kept, err := order("teapot", true)
	if err != nil {
		return err
	}
	if _, err := order("cancelled kettle", false); err != nil {
		return err
	}

	if err := client.Start(ctx); err != nil {
		return err
	}
	select {
	case id := <-shipped:
		fmt.Printf("order %d shipped; its job completed in the same transaction\n", id)
	case <-ctx.Done():
		return errors.New("pgtx: the ship job did not run")
	}
	if err := client.Stop(ctx); err != nil {
		return err
	}

	var orders, jobs int
	var shippedAt *time.Time
	if err := pool.QueryRow(ctx, "SELECT count(*), max(shipped_at) FROM pgtx_orders").Scan(&orders, &shippedAt); err != nil {
		return err
	}
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM pgtx_example.jobs WHERE state = 'completed'").Scan(&jobs); err != nil {
		return err
	}
	fmt.Printf("orders: %d (order %d shipped at %s), completed jobs: %d\n", orders, kept, shippedAt.UTC().Format(time.RFC3339), jobs)
	return nil
}
