// Package cli is the backlog command: the command-line interface and job
// server that migrates a store, enqueues and inspects jobs, pauses queues,
// serves the HTTP API and dashboard, runs workers whose handlers are shell
// commands, and benchmarks (docs/cli.md). cmd/backlog is its main; a
// program that adds a store for another database builds the same command
// with one more import (docs/writing-a-store.md, "A CLI for your store"):
//
//	package main
//
//	import (
//		"context"
//		"os"
//
//		"github.com/backlogq/backlog/cli"
//		_ "example.com/backlog-bbolt" // registers "bbolt:" with store.Register
//	)
//
//	func main() { os.Exit(cli.Main(context.Background(), os.Args[1:])) }
//
// The built-in stores (sqlite:, postgres:, mysql:) are registered by this
// package itself.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"golang.org/x/term"
)

// Exit codes.
const (
	exitOK      = 0 // success
	exitRuntime = 1 // the command ran and failed (store error, bad data, a job id that failed)
	exitUsage   = 2 // the command line was wrong (unknown command or flag, bad argument)
)

// Main runs the backlog command with args (the command line without the
// program's name, os.Args[1:] in a main function) as this process: on
// os.Stdin, os.Stdout and os.Stderr, with SIGINT and SIGTERM stopping the
// long-running commands (work, serve) gracefully, and returns the exit
// code: 0 success, 1 the command ran and failed, 2 a wrong command line
// (jobs wait and enqueue --wait add 3 timeout, 4 discarded, 5 cancelled).
// Call it from main and pass the code to os.Exit; ctx ending stops a
// command as a signal does.
//
// Main is for a process's main only: besides running the command it may
// be this binary started again as the process-group watchdog of a shell
// handler's command (it then runs that instead), and work and serve make
// the process non-dumpable and overwrite their secret flag values and
// BACKLOG_* variables where /proc shows the command line and environment
// (os.Args and os.Environ keep working: Main copies os.Args first).
func Main(ctx context.Context, args []string) int {
	if parent, ok := watchdogParent(os.Getenv); ok {
		// A shell command's process group watchdog (proc_unix.go).
		return runWatchdog(parent)
	}
	e := &env{
		stdin:   os.Stdin,
		stdout:  os.Stdout,
		stderr:  os.Stderr,
		getenv:  os.Getenv,
		environ: os.Environ,
		notifySignals: func() (<-chan os.Signal, func()) {
			ch := make(chan os.Signal, 2)
			signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
			return ch, func() { signal.Stop(ch) }
		},
		isTerminal: func(w io.Writer) bool {
			f, ok := w.(*os.File)
			return ok && term.IsTerminal(int(f.Fd()))
		},
		setDriverLogger: setMySQLLogger,
	}
	// The arguments are copied: hideSecrets overwrites the memory the
	// runtime's os.Args still points into (secrets_linux.go), and args is
	// most often a part of os.Args.
	argv := os.Args
	os.Args = make([]string, len(argv))
	for i, s := range argv {
		os.Args[i] = strings.Clone(s)
	}
	own := make([]string, len(args))
	for i, s := range args {
		own[i] = strings.Clone(s)
	}
	e.hideSecrets = func(secrets []string) error { return hideProcessSecrets(argv, secrets) }
	return run(ctx, e, own)
}

// env is everything a command touches outside its own arguments. main wires
// it to the process; tests wire it to buffers and fake signal channels, so
// the package has no mutable global state and commands run in-process.
type env struct {
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
	getenv func(string) string
	// environ is the whole environment (KEY=VALUE), from which handler
	// commands get the variables they are allowed (shell.go). nil means
	// os.Environ.
	environ func() []string
	// notifySignals starts delivering SIGINT/SIGTERM to the returned channel
	// until the returned stop function is called. Only long-running commands
	// (work, serve) call it, so Ctrl-C kills the short ones the usual way.
	// nil means no signals (the command stops when its context ends).
	notifySignals func() (<-chan os.Signal, func())
	// isTerminal reports whether w is an interactive terminal (progress bars
	// are drawn only there unless forced). nil means never.
	isTerminal func(w io.Writer) bool
	// setDriverLogger routes the process-wide log of database drivers that
	// have one (MySQL) to print. nil leaves it alone.
	setDriverLogger func(print func(v ...any))
	// hideSecrets hides this process's secrets from the processes it
	// starts: the values given (of secret flags) and its BACKLOG_*
	// variables, as /proc shows them (secrets.go). nil means nothing is
	// hidden (tests, which run commands in-process).
	hideSecrets func(secrets []string) error
}

// run executes one command line and returns the process exit code. Errors
// are printed to stderr as "backlog: <message>".
func run(ctx context.Context, e *env, args []string) (code int) {
	defer func() {
		if r := recover(); r != nil {
			fmt.Fprintf(e.stderr, "backlog: internal error: %v\n", r)
			code = exitRuntime
		}
	}()
	root := newRootCmd(e)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return exitOK
	}
	var q quietError
	if !errors.As(err, &q) {
		fmt.Fprint(e.stderr, errorLine(err))
	}
	var u usageError
	if errors.As(err, &u) {
		return exitUsage
	}
	var x exitCodeError // jobs wait, enqueue --wait (wait.go)
	if errors.As(err, &x) {
		return x.code
	}
	return exitRuntime
}

// usageError marks an error in the command line itself (exit code 2).
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usagef(format string, a ...any) error { return usageError{fmt.Errorf(format, a...)} }

// quietError is a failure already reported on stderr (for example per job
// id); run exits non-zero without printing it again.
type quietError struct{ err error }

func (e quietError) Error() string { return e.err.Error() }
func (e quietError) Unwrap() error { return e.err }

// errorLine is how the CLI prints an error that ends a command. Errors
// quote stored values (kinds, queues, a job's error text): what a
// terminal would act on is escaped. Newlines and tabs are kept, so a
// database's multi-line error (pgx indents its detail lines) reads as
// the server wrote it.
func errorLine(err error) string {
	return "backlog: " + printable(err.Error(), "\n\t") + "\n"
}
