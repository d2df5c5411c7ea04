// Command quickstart runs backlog embedded in a Go program on a SQLite file:
// a typed handler, a few jobs (one that fails once and is retried), and a
// graceful stop once they are done.
//
//	go run ./examples/quickstart
package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/store/sqlite"
)

// EmailArgs are the arguments of an "email" job, stored as JSON.
type EmailArgs struct {
	To      string `json:"to"`
	Subject string `json:"subject"`
}

// Kind names the handler; it must stay stable across deploys.
func (EmailArgs) Kind() string { return "email" }

func main() {
	if err := run(); err != nil {
		log.Fatal(err)
	}
}

func run() error {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "backlog-quickstart")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)

	st, err := sqlite.Open(ctx, filepath.Join(dir, "jobs.db")) // creates and migrates
	if err != nil {
		return err
	}
	defer st.Close()

	var failedOnce atomic.Bool
	done := make(chan struct{}, 3)
	handlers := core.NewHandlers()
	core.Handle(handlers, func(ctx context.Context, j *core.TypedJob[EmailArgs]) error {
		if j.Args.To == "flaky@example.com" && failedOnce.CompareAndSwap(false, true) {
			return errors.New("smtp: connection reset") // retried after the delay below
		}
		fmt.Printf("job %d attempt %d: mail %q to %s\n", j.ID, j.Attempt, j.Args.Subject, j.Args.To)
		done <- struct{}{}
		return core.RecordResult(ctx, map[string]string{"status": "sent"})
	}, core.WithTimeout(30*time.Second), core.WithRetry(core.DelayList{100 * time.Millisecond}))

	client, err := core.NewClient(st, core.Config{
		Queues:   map[string]core.QueueConfig{core.DefaultQueue: {MaxWorkers: 10}},
		Handlers: handlers,
	})
	if err != nil {
		return err
	}
	if err := client.Start(ctx); err != nil {
		return err
	}

	for _, to := range []string{"ada@example.com", "flaky@example.com", "grace@example.com"} {
		res, err := client.Enqueue(ctx, EmailArgs{To: to, Subject: "hello"}, &core.Options{UniqueKey: "welcome:" + to})
		if err != nil {
			return err
		}
		fmt.Printf("enqueued job %d for %s\n", res.Job.ID, to)
	}
	for range 3 {
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			return errors.New("jobs did not finish in time")
		}
	}
	stopCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return client.Stop(stopCtx)
}
