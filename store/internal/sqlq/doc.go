// Package sqlq is the SQL shared by backlog's SQL stores (SQLite now,
// PostgreSQL and MySQL/MariaDB later): one implementation of core.Store's
// behaviour written once against a narrow Dialect, the way Quartz keeps one
// SQL delegate and lets vendors override small hooks.
//
// A store package supplies three things and gets a *Store that implements
// every core.Store method except Close:
//
//   - a Dialect: placeholders, time encoding, JSON array append, which
//     statements have RETURNING, insert-ignore syntax, UPDATE … FROM syntax,
//     bounded DELETE, row locking suffixes, parameter limit, and error
//     classification (transient, unique violation);
//   - a DB: reads on a pool plus InTx, which runs a function in one write
//     transaction (SQLite: BEGIN IMMEDIATE behind an in-process writer mutex);
//   - Tables: the (prefixed or schema-qualified) table names.
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
//
// with a unique index on jobs(unique_key) restricted to rows whose
// unique_key is not NULL and whose state is not final (partial index on
// SQLite/Postgres, a generated column on MySQL), and a claim index on
// (queue, priority, run_at, id) for the pending states.
//
// # Claim strategies
//
// Optimistic (every dialect): read candidate (id, version) pairs without
// locks, then one compare-and-set UPDATE of those ids whose version still
// matches and which are still due; a row whose version moved was taken by
// someone else and is skipped. SKIP LOCKED (dialects with row locks): select
// due ids FOR UPDATE SKIP LOCKED and update them by primary key — one CTE
// statement with RETURNING where UPDATE … RETURNING exists (Postgres), else
// select, update and read back in one transaction (MySQL/MariaDB).
//
// # Time
//
// Nothing here reads a clock; every time comes from the caller (UTC,
// microseconds), as core.Store requires. The one exception is the backoff
// between retries of transient errors.
package sqlq
