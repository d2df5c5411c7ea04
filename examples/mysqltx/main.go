// Command mysqltx shows backlog's transactional tasks on MySQL or MariaDB:
// an order row and the job that ships it are inserted in one transaction
// (a rolled-back order leaves no job behind), and the job's handler, a
// core.HandleTx handler, works through sqlx inside the transaction the
// engine opened on the same database, which also holds the job's
// completion and a follow-up "notify" job: the first attempt fails after
// its writes and leaves nothing, the retry ships the order exactly once.
//
//	go run ./examples/mysqltx --dsn 'root@tcp(127.0.0.1:3306)/shop'
//
// Without --dsn it reads BACKLOG_TEST_MYSQL_DSN. It works in the tables
// prefixed mysqltx_example_ (backlog's and the orders table) and drops
// them at the end.
package main

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/store/mysql"
	"github.com/jmoiron/sqlx"
)

// ShipArgs are the arguments of a "ship" job.
type ShipArgs struct {
	OrderID int64 `json:"order_id"`
}

// Kind names the handler.
func (ShipArgs) Kind() string { return "ship" }

// NotifyArgs are the arguments of the follow-up "notify" job.
type NotifyArgs struct {
	OrderID int64 `json:"order_id"`
}

// Kind names the follow-up's kind.
func (NotifyArgs) Kind() string { return "notify" }

const prefix = "mysqltx_example_"

func main() {
	dsn := flag.String("dsn", os.Getenv("BACKLOG_TEST_MYSQL_DSN"), "go-sql-driver/mysql DSN")
	flag.Parse()
	if *dsn == "" {
		log.Fatal("mysqltx: pass --dsn or set BACKLOG_TEST_MYSQL_DSN")
	}
	if err := run(*dsn); err != nil {
		log.Fatal(err)
	}
}

func run(dsn string) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, err := mysql.Open(ctx, dsn, mysql.WithPrefix(prefix)) // creates and migrates
	if err != nil {
		return err
	}
	defer st.Close()
	db := sqlx.NewDb(st.DB(), "mysql")
	defer dropTables(db)
	if _, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS `+prefix+`orders (
		id BIGINT AUTO_INCREMENT PRIMARY KEY, item VARCHAR(100) NOT NULL, shipments INT NOT NULL DEFAULT 0)`); err != nil {
		return err
	}

	var client *core.Client
	done := make(chan int64, 1)
	handlers := core.NewHandlers()
	core.HandleTx(handlers, func(ctx context.Context, tx any, j *core.TypedJob[ShipArgs]) error {
		// The engine's *sql.Tx, used through sqlx (the DB's mapper; its
		// driver name unset, sqlx leaves '?' placeholders as they are,
		// which is MySQL's form); the job's completion is written in it
		// after this returns nil, and all commits together.
		stx := &sqlx.Tx{Tx: tx.(*sql.Tx), Mapper: db.Mapper}
		if _, err := stx.ExecContext(ctx, "UPDATE "+prefix+"orders SET shipments = shipments + 1 WHERE id = ?", j.Args.OrderID); err != nil {
			return err
		}
		p, err := core.NewInsert(NotifyArgs{OrderID: j.Args.OrderID}, nil, time.Now())
		if err != nil {
			return err
		}
		if _, err := client.EnqueueTx(ctx, stx, []core.InsertParams{p}); err != nil { // exists only if this commits
			return err
		}
		if j.Attempt == 1 {
			return errors.New("carrier unavailable") // rolls both back; retried
		}
		done <- j.Args.OrderID
		return nil
	}, core.WithRetry(core.DelayList{100 * time.Millisecond}))
	handlers.Declare(NotifyArgs{}.Kind()) // run by another service
	client, err = core.NewClient(st, core.Config{
		Queues:       map[string]core.QueueConfig{core.DefaultQueue: {MaxWorkers: 2}},
		Handlers:     handlers,
		PollInterval: 50 * time.Millisecond,
	})
	if err != nil {
		return err
	}

	// The order and its job: one transaction of the application's.
	order := func(item string, commit bool) (int64, error) {
		tx, err := db.BeginTxx(ctx, nil)
		if err != nil {
			return 0, err
		}
		defer tx.Rollback()
		res, err := tx.ExecContext(ctx, "INSERT INTO "+prefix+"orders (item) VALUES (?)", item)
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
		return errors.New("mysqltx: the ship job did not run")
	}
	if err := client.Stop(ctx); err != nil {
		return err
	}

	var orders, shipments struct{ N int }
	if err := db.GetContext(ctx, &orders, "SELECT count(*) AS n FROM "+prefix+"orders"); err != nil {
		return err
	}
	if err := db.GetContext(ctx, &shipments, "SELECT coalesce(sum(shipments), 0) AS n FROM "+prefix+"orders"); err != nil {
		return err
	}
	var byKind []struct {
		Kind  string `db:"kind"`
		State string `db:"state"`
	}
	if err := db.SelectContext(ctx, &byKind, "SELECT kind, state FROM "+prefix+"jobs ORDER BY id"); err != nil {
		return err
	}
	fmt.Printf("orders: %d, order %d shipped %d time(s), jobs: %v\n", orders.N, kept, shipments.N, byKind)
	if orders.N != 1 || shipments.N != 1 || len(byKind) != 2 || byKind[0].State != "completed" || byKind[1].Kind != "notify" {
		return fmt.Errorf("mysqltx: want 1 order shipped once, its completed job and one notify job")
	}
	return nil
}

// dropTables drops the example's tables.
func dropTables(db *sqlx.DB) {
	ctx := context.Background()
	var names []string
	if err := db.SelectContext(ctx, &names, `SELECT table_name FROM information_schema.tables
		WHERE table_schema = DATABASE() AND table_name LIKE 'mysqltx\_example\_%'`); err != nil {
		log.Print(err)
		return
	}
	for _, n := range names {
		if _, err := db.ExecContext(ctx, "DROP TABLE `"+n+"`"); err != nil {
			log.Print(err)
		}
	}
}
