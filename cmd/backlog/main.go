// Command backlog is the command-line interface and job server of backlog:
// it migrates a store, enqueues and inspects jobs, pauses queues, serves
// the HTTP API and dashboard, and runs workers whose handlers are shell
// commands. See docs/cli.md; the command itself is package cli.
package main

import (
	"context"
	"os"

	"github.com/backlogq/backlog/cli"
)

func main() { os.Exit(cli.Main(context.Background(), os.Args[1:])) }
