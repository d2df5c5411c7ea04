// Package sqlq is what backlog's three SQL stores (SQLite, PostgreSQL,
// MySQL/MariaDB) really share. Each store owns its hot path, the statements
// a busy queue runs all the time, written for its database in its own
// package: Claim, Insert, Finish and ExtendLeases, as named statements
// beside the Go that runs them (claim.go, insert.go, finish.go; on SQLite
// leases.go), built once per store with its table names (queries.go).
// sqlq runs none of them.
//
// What sqlq keeps, and why:
//
//   - scanning and encoding (scan.go): JobColumns, ScanJob, ScanJobs,
//     ScanIDs, TimeDest, TagsArg, LeaseArgs, and the JSON of tags,
//     metadata and error entries, so a job reads and writes the same way on
//     every database;
//   - the one transient-retry loop (Retrier, retry.go): each store passes
//     its own classification of transient errors;
//   - Rounds (rounds.go), which splits a batch naming a job or a unique key
//     more than once into rounds of distinct keys, and Chunks, which splits
//     a batch by statement size;
//   - the protocols around the stores' own statements: InsertKeyed and
//     ReleaseHolds (unique.go), the unique-key holds every Insert takes and
//     every deletion of job rows releases; MatchInserted (insert.go), with
//     InsertState and AppendInsertRow, a job's row as the database/sql
//     stores (SQLite, MySQL/MariaDB) bind it; and Change, OutcomeChange,
//     FinishRounds and Change.AppendRow (finish.go), the outcome protocol
//     of their Finish;
//   - connection plumbing (conn.go, stmtcache.go) and migration plumbing
//     (migrate.go: templated goose migrations, serialised across
//     processes);
//   - the statements that really are the same on all three, behind a small
//     Dialect: Get, List, Stats, Cancel, Retry, Delete, queue pauses
//     (store.go), Rescue, RescueWorkers and DiscardExpired (rescue.go, with
//     the version-fenced batched changes of change.go), Prune (prune.go),
//     the worker registry (workers.go), settings (settings.go) and
//     RewriteSealed (rewrite.go).
//
// A store gives New a Dialect (placeholders, casts, time encoding, JSON
// array append, which statements have RETURNING, insert-ignore syntax,
// UPDATE … FROM syntax, bounded DELETE, row-lock suffixes, the parameter
// limit, and error classification), a DB (reads on a pool plus InTx, one
// write transaction; SQLite: BEGIN IMMEDIATE behind an in-process writer
// mutex) and its Tables, and embeds the *Store it gets, adding Claim,
// Insert, Finish and ExtendLeases of its own (and overriding whatever else
// it runs itself).
//
// # Schema
//
// The statements assume these tables (types per dialect; times in the
// dialect's encoding, JSON as text):
//
//	jobs(id PK auto-increment, queue, kind, args JSON, priority, state,
//	     attempt, max_attempts, run_at, deadline NULL, unique_key NULL,
//	     tags JSON NULL, metadata JSON NULL, errors JSON array NOT NULL
//	     DEFAULT '[]', result bytes NULL, created_at, attempted_at NULL,
//	     finished_at NULL, worker_id NULL, lease_until NULL,
//	     version integer NOT NULL DEFAULT 0)
//	queues(name PK, paused boolean, updated_at)
//	workers(id PK, host, pid, queues JSON, tags JSON NULL, metadata JSON
//	        NULL, started_at, heartbeat_at)
//	settings(name PK, value bytes NOT NULL)
//	unique_keys(ukey PK, job_id, queue, kind, unique_key, unique_for µs,
//	            held_until NULL, fingerprint NULL)
//
// with an index on unique_keys(job_id) and on unique_keys(held_until),
// and a claim index on (queue, priority, run_at, id) for the pending
// states.
//
// # Time
//
// Nothing here reads a clock; every time comes from the caller (UTC,
// microseconds), as contract.Store requires. The one exception is the
// Retrier's backoff between retries of transient errors.
package sqlq
