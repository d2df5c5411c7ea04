// Command sqlitetx shows backlog's transactional tasks on SQLite: an order
// row and the job that ships it are inserted in one transaction (a
// rolled-back order leaves no job behind), and the job's handler, a
// core.HandleTx handler, runs inside a transaction the engine opened on the
// same database, which also holds the job's completion: the first attempt
// fails after its write and leaves nothing, the retry ships the order
// exactly once and commits with the completion.
//
//	go run ./examples/sqlitetx --path /tmp/shop.db
//
// Without --path it works in a temporary file, removed at the end.
package main

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/store/sqlite"
)

// ShipArgs are the arguments of a "ship" job.
type ShipArgs struct {
	OrderID int64 `json:"order_id"`
}

// Kind names the handler.
func (ShipArgs) Kind() string { return "ship" }

func main() {
	path := flag.String("path", "", "SQLite file (default: a temporary one)")
	flag.Parse()
	if err := run(*path); err != nil {
		log.Fatal(err)
	}
}

func run(path string) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if path == "" {
		dir, err := os.MkdirTemp("", "sqlitetx-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		path = filepath.Join(dir, "shop.db")
	}
	st, err := sqlite.Open(ctx, path) // creates and migrates
	if err != nil {
		return err
	}
	defer st.Close()
	db := st.DB()
	if _, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS orders (
		id INTEGER PRIMARY KEY, item TEXT NOT NULL, shipments INTEGER NOT NULL DEFAULT 0)`); err != nil {
		return err
	}

	done := make(chan int64, 1)
	handlers := core.NewHandlers()
	core.HandleTx(handlers, func(ctx context.Context, tx any, j *core.TypedJob[ShipArgs]) error {
		// tx is the engine's *sql.Tx; the job's completion is written in
		// it after this returns nil, and both commit together.
		if _, err := tx.(*sql.Tx).ExecContext(ctx, "UPDATE orders SET shipments = shipments + 1 WHERE id = ?", j.Args.OrderID); err != nil {
			return err
		}
		if j.Attempt == 1 {
			return errors.New("carrier unavailable") // rolls the update back; retried
		}
		done <- j.Args.OrderID
		return core.RecordResult(ctx, map[string]int{"attempt": j.Attempt})
	}, core.WithRetry(core.DelayList{100 * time.Millisecond}))
	client, err := core.NewClient(st, core.Config{
		Queues:       map[string]core.QueueConfig{core.DefaultQueue: {MaxWorkers: 2}},
		Handlers:     handlers,
		PollInterval: 50 * time.Millisecond,
	})
	if err != nil {
		return err
	}

	// The order and its job: one transaction of the application's.
	order := func(item string, commit bool) (int64, error) {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return 0, err
		}
		defer tx.Rollback()
		res, err := tx.ExecContext(ctx, "INSERT INTO orders (item) VALUES (?)", item)
		if err != nil {
			return 0, err
		}
		id, err := res.LastInsertId()
		if err != nil {
			return 0, err
		}
		p, err := core.NewInsert(ShipArgs{OrderID: id}, nil, time.Now())
		if err != nil {
			return 0, err
		}
		if _, err := client.EnqueueTx(ctx, tx, []core.InsertParams{p}); err != nil {
			return 0, err
		}
		if !commit {
			return id, nil // deferred Rollback: neither the order nor its job exists
		}
		return id, tx.Commit()
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
	case <-done:
	case <-ctx.Done():
		return errors.New("sqlitetx: the ship job did not run")
	}
	if err := client.Stop(ctx); err != nil { // writes what is pending
		return err
	}

	var orders, shipments, completed int
	if err := db.QueryRowContext(ctx, "SELECT count(*), coalesce(sum(shipments), 0) FROM orders").Scan(&orders, &shipments); err != nil {
		return err
	}
	if err := db.QueryRowContext(ctx, "SELECT count(*) FROM backlog_jobs WHERE state = 'completed'").Scan(&completed); err != nil {
		return err
	}
	fmt.Printf("orders: %d, order %d shipped %d time(s), completed jobs: %d\n", orders, kept, shipments, completed)
	if orders != 1 || shipments != 1 || completed != 1 {
		return fmt.Errorf("sqlitetx: want 1 order shipped once and 1 completed job")
	}
	return nil
}
