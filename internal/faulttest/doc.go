// Package faulttest is a fault suite for backlog, run through the public
// CLI: it builds cmd/backlog, runs several `backlog work` processes on one
// store (a shared SQLite file, or a private PostgreSQL or MariaDB server
// from internal/dbserver), and breaks things while they work: it SIGKILLs
// workers, stops or kills the database server for less and for more than
// the lease, and kills a worker under shell handlers that started a child
// of their own.
//
// The topologies that survive the loss of a machine have a scenario each,
// built from internal/dbserver: a PostgreSQL primary SIGKILLed and its
// synchronous standby promoted under workers on the multi-host URL
// (TestPostgresFailover); a Galera node SIGKILLed and rejoining under one
// worker per node, each on a multi-host URL naming its node first
// (TestGaleraNodeLoss); PgBouncer in transaction pooling
// killed and restarted (TestPgBouncerRestart); two `backlog serve` behind
// HAProxy, each SIGKILLed in turn under remote workers
// (TestJobServersBehindProxy). Each also runs a producer that enqueues
// while the faults happen: every job whose enqueue returned must be in
// the store, final, and run (docs/scaling.md has the figures).
//
// Transactional tasks have one too: Go workers of a core.HandleTx handler
// SIGKILLed again and again inside their transactions, and the database
// server restarted under them, on SQLite, PostgreSQL and MariaDB; the
// application table must hold exactly one row per job
// (TestHandleTxKillAndRestart, docs/transactions.md).
//
// Run it (opt-in; it takes a few minutes on two cores; -v prints each
// scenario's summary):
//
//	BACKLOG_FAULT=1 go test -race -count=1 -timeout 30m ./internal/faulttest/
//
// Every job's handler is this test package (built again without -race, so
// it starts fast), which appends one line per start
// and per end of an execution to a ledger file (O_APPEND: job id, attempt,
// worker id and pid, its own pid, CLOCK_MONOTONIC). At the end of a scenario the
// suite checks, from the ledger, the test's own record of the workers it
// killed, and the store's jobs (`backlog jobs list -o json`):
//
//   - every job reached a final state (completed; the handler never fails,
//     so a discarded job is a failure too);
//   - no execution was a duplicate that nothing explains. A second start
//     of a job is explained when the execution before it ran on a worker
//     the test SIGKILLed before the second start, and before that execution
//     ended or at most OutcomeWindow (2 s) after it (its outcome could
//     still have been unwritten); or when that execution was stopped by its
//     worker (SIGTERM) during a database outage the test staged, the worker
//     being unable to renew its lease (docs/guarantees.md, promise 4). A
//     job run again after an execution that finished is never explained
//     by an outage. Outside any outage, a stall (the store not answering
//     a worker's heartbeats in time on a loaded machine) explains a second
//     start only when that worker's log names the execution: "lease could
//     not be renewed; stopping the handler" for one it stopped, "lease
//     could not be renewed while the outcome waits" for one that had
//     finished (a worker cut off longer than its lease, promise 6). Both
//     are counted apart in each summary, so a run with many shows;
//   - no two executions of one job overlapped;
//   - no job is left running without a live worker that runs it;
//   - no handler outlived its SIGKILLed worker by more than OutliveBound
//     (1 s); the orphan scenario checks handlers and their children
//     directly, with OrphanGrace (5 s).
//
// Most jobs take 20–120 ms; one in 32 takes 1.5–6 s, so that a handler left
// running by a dead or cut-off worker is still running when its job starts
// again elsewhere.
//
// Sizes and timings come from the environment: BACKLOG_FAULT_JOBS (jobs
// per scenario, default 2000), BACKLOG_FAULT_WORKERS (worker processes, 4),
// BACKLOG_FAULT_CONCURRENCY (jobs at once per worker, 8),
// BACKLOG_FAULT_LEASE (the workers' --lease, 4s), BACKLOG_FAULT_KILL_WINDOW
// (longest time workers are killed, 30s), BACKLOG_FAULT_DRAIN (how long the
// jobs may take to finish after the faults end, 90s), BACKLOG_FAULT_RACE=1
// (build backlog with -race too), BACKLOG_FAULT_SUMMARY (a file the
// summaries are appended to). PostgreSQL and MariaDB scenarios skip when
// the servers are not installed, and fail instead when
// BACKLOG_REQUIRE_DBS=1.
package faulttest
