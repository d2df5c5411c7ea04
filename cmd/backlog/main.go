// Command backlog is the command-line interface and job server of backlog:
// it migrates a store, enqueues and inspects jobs, pauses queues, and runs
// workers whose handlers are shell commands. See docs/cli.md.
package main

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

func main() {
	if parent, ok := watchdogParent(os.Getenv); ok {
		// A shell command's process group watchdog (proc_unix.go).
		os.Exit(runWatchdog(parent))
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
	// runtime's os.Args still points into (secrets_linux.go).
	argv := os.Args
	os.Args = make([]string, len(argv))
	for i, s := range argv {
		os.Args[i] = strings.Clone(s)
	}
	e.hideSecrets = func(secrets []string) error { return hideProcessSecrets(argv, secrets) }
	os.Exit(run(context.Background(), e, os.Args[1:]))
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
