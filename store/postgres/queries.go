package postgres

import (
	"strings"

	"github.com/backlogq/backlog/store/internal/sqlq"
)

// pendingIn is the SQL list of states a claim may take due jobs from,
// spelt exactly as in the partial claim index so the planner matches it.
const pendingIn = "('scheduled','available','retryable')"

// queries holds the hot statements, built once per store. Their text never
// varies with batch sizes (arrays travel as single parameters), so pgx
// prepares each once per connection.
type queries struct {
	claimSkipLocked   string
	claimCandidates   string
	claimCAS          string
	limitedCandidates string
	// limitedCandidatesPart is limitedCandidates of one partition key.
	limitedCandidatesPart string
	// limitedClaimDirect claims an ample limited queue's first due jobs.
	limitedClaimDirect string
	limitedClaim       string
	finish             string
	finishNotify       string
	insert             string
	insertNotify       string
	notify             string
	notifyQueues       string
	reserveIDs         string
	extendLeases       string
	jobColsAliased     string
	insertReturnCount  int

	// Dependencies (deps.go).
	lockDeps         string
	archivedStates   string
	insertDeps       string
	insertDepsNotify string
	insertEdges      string
	expiredWaiting   string
	discardWaiting   string
	isWaiting        string
}

func buildQueries(schema string, t sqlq.Tables) queries {
	cols := strings.Split(sqlq.JobColumns, ", ")
	for i, c := range cols {
		cols[i] = "j." + c
	}
	jcols := strings.Join(cols, ", ")
	var q queries
	q.jobColsAliased = jcols

	// The two reads of pending jobs are functions of schema version 5
	// (migrations/00005_claim_plans.sql), planned with bitmap scans and
	// sorts turned off: without statistics the planner would otherwise
	// flip to reading the whole claim index and sorting every pending job
	// on each claim (docs/postgres.md, "The claim plan").
	//
	// $1 queue, $2 now, $3 limit, $4 worker, $5 lease until, $6 worker
	// tags (JSON array text).
	q.claimSkipLocked = "SELECT " + jcols + " FROM " + schema + ".claim_skip_locked($1, $2, $3, $4, $5, $6) j"
	// Optimistic: candidates ($1 queue, $2 now, $3 limit, $4 tags), then a
	// compare-and-set on their versions.
	q.claimCandidates = "SELECT id, version FROM " + schema + ".claim_candidates($1, $2, $3, $4)"
	// $1 now, $2 worker, $3 lease until, $4 ids, $5 versions.
	// The version alone decides: every change of a job (claim, finish,
	// lease extension, cancel, retry) increments it, so an unchanged version
	// means the job is still the due, pending job the candidate read saw.
	// Only id and version are matched, so the plan is a primary-key lookup
	// per candidate whatever the table's statistics say (with a queue or
	// state predicate, a generic plan on a young table may scan the claim
	// index for the whole queue instead).
	// A candidate another transaction is writing (a rival claim, or the
	// finish of a job a rival already claimed) is skipped like a lost race
	// instead of waited for: waiting would lock rows the rival's later
	// statements need, and deadlock with them.
	q.claimCAS = "WITH c AS (SELECT t.id FROM unnest($4::bigint[], $5::bigint[]) AS c(id, v)" +
		" CROSS JOIN LATERAL (SELECT t.id FROM " + t.Jobs + " t WHERE t.id = c.id AND t.version = c.v FOR UPDATE SKIP LOCKED) t)" +
		" UPDATE " + t.Jobs + " j SET state = 'running', attempt = j.attempt + 1, claim_seq = j.claim_seq + 1, version = j.version + 1," +
		" worker_id = $2, attempted_at = $1, lease_until = $3, progress = NULL FROM c WHERE j.id = c.id RETURNING " + jcols

	// The limited claim (claim.go, claimLimited), under the queue's lock:
	// due candidates in claim order without the full kinds ($4) and
	// partition keys ($5), $1 queue, $2 now, $3 tags, $6 limit; then the
	// claim of those taken ($4 ids; $1 now, $2 worker, $3 lease until).
	cands := "SELECT p.id, p.kind, p.partition_key, p.priority, p.run_at FROM " + t.Jobs + " p WHERE p.queue = $1 AND p.state IN " + pendingIn +
		" AND p.run_at <= $2 AND (p.tags IS NULL OR p.tags <@ $3::jsonb) AND p.kind <> ALL($4::text[])" +
		" AND (p.partition_key IS NULL OR p.partition_key <> ALL($5::text[])) AND p.priority BETWEEN $7 AND $8"
	q.limitedCandidates = cands + " ORDER BY p.priority, p.run_at, p.id LIMIT $6 FOR UPDATE SKIP LOCKED"
	// One partition key of a fair queue: a range of jobs_fair (its
	// index conditions make it the cheapest plan, statistics or none:
	// TestFairClaimPlan).
	q.limitedCandidatesPart = cands + " AND p.partition_key = $9 ORDER BY p.priority, p.run_at, p.id LIMIT $6 FOR UPDATE SKIP LOCKED"
	// A limited claim whose room is ample for its whole batch: the first
	// due jobs in claim order, in one statement (the claim's transaction
	// turned sorts and bitmap scans off, as the claim functions do).
	q.limitedClaimDirect = "UPDATE " + t.Jobs + " j SET state = 'running', attempt = j.attempt + 1, claim_seq = j.claim_seq + 1, version = j.version + 1," +
		" worker_id = $4, attempted_at = $2, lease_until = $5, progress = NULL WHERE j.id = ANY(ARRAY(SELECT p.id FROM " + t.Jobs + " p WHERE p.queue = $1 AND p.state IN " + pendingIn +
		" AND p.run_at <= $2 AND (p.tags IS NULL OR p.tags <@ $6::jsonb) ORDER BY p.priority, p.run_at, p.id LIMIT $3 FOR UPDATE SKIP LOCKED))" +
		" AND j.state IN " + pendingIn + " RETURNING " + jcols
	q.limitedClaim = "UPDATE " + t.Jobs + " j SET state = 'running', attempt = j.attempt + 1, claim_seq = j.claim_seq + 1, version = j.version + 1," +
		" worker_id = $2, attempted_at = $1, lease_until = $3, progress = NULL WHERE j.id = ANY($4::bigint[]) AND j.state IN " + pendingIn + " RETURNING " + jcols

	// Finish: one row per outcome in parallel arrays; del rows are deleted
	// instead of updated. Both are fenced by worker id and claim_seq. The
	// holds of deleted rows with a unique key are released in the same
	// statement (hu, hd): held until the completion time plus their
	// unique_for, or dropped when unique_for is 0. Key-less rows never
	// reach the holds table (d.uk IS NULL), so a batch without keys pays
	// for two empty joins, not for another statement.
	// The state is compared with a parameter ($14 = 'running'), not a
	// literal: a generic plan then cannot prove the lease index's predicate
	// (state = 'running') and so never scans every running job to join
	// them with the outcomes; it looks each outcome up by primary key.
	fence := "j.id = v.id AND j.state = $14::text AND j.worker_id = v.fw AND j.claim_seq = v.fc"
	q.finish = "WITH v AS (SELECT * FROM unnest($1::bigint[], $2::text[], $3::bigint[], $4::text[], $5::int[], $6::timestamptz[]," +
		" $7::timestamptz[], $8::text[], $9::bytea[], $10::bool[], $11::text[], $12::text[], $13::bool[])" +
		" AS v(id, fw, fc, st, na, ra, fi, er, rs, sr, kd, ag, del))," +
		" u AS (UPDATE " + t.Jobs + " j SET state = v.st, attempt = v.na, run_at = COALESCE(v.ra, j.run_at), finished_at = v.fi," +
		" lease_until = NULL, version = j.version + 1," +
		" errors = CASE WHEN v.er IS NULL THEN j.errors ELSE " + dialect{}.AppendJSON("j.errors", "v.er") + " END," +
		" result = CASE WHEN v.sr THEN v.rs ELSE j.result END, kind = COALESCE(v.kd, j.kind), args = COALESCE(v.ag::jsonb, j.args)," +
		" checkpoint = CASE WHEN v.kd IS NULL THEN j.checkpoint ELSE NULL END" +
		" FROM v WHERE NOT v.del AND " + fence + " RETURNING j.id, j.state)," +
		" d AS (DELETE FROM " + t.Jobs + " j USING v WHERE v.del AND " + fence + " RETURNING j.id, j.unique_key AS uk, v.fi)," +
		" hu AS (UPDATE " + t.Holds + " h SET held_until = d.fi + h.unique_for * interval '1 microsecond'" +
		" FROM d WHERE d.uk IS NOT NULL AND h.job_id = d.id AND h.unique_for > 0)," +
		" hd AS (DELETE FROM " + t.Holds + " h USING d WHERE d.uk IS NOT NULL AND h.job_id = d.id AND h.unique_for = 0)" +
		" SELECT id FROM u UNION ALL SELECT id FROM d"
	// The finish with its notifications ($15 the channel): one
	// "finish <id>,<id>,…" per 300 jobs made final (a payload stays far
	// below PostgreSQL's 8,000 bytes), queued in the finish's own
	// transaction like the insert's.
	q.finishNotify = strings.TrimSuffix(q.finish, " SELECT id FROM u UNION ALL SELECT id FROM d") + "," +
		" f AS (SELECT id, state FROM u UNION ALL SELECT id, 'completed' FROM d)," +
		" n AS (SELECT count(pg_notify($15, 'finish ' || c)) AS n FROM (SELECT string_agg(id::text, ',') AS c" +
		" FROM (SELECT id, (row_number() OVER () - 1) / 300 AS g FROM f WHERE state IN ('completed', 'cancelled', 'discarded')) x GROUP BY g) y)" +
		" SELECT id, (SELECT n FROM n) FROM f"

	// Insert: $1..$11 arrays, $12 created_at, $13 partition keys
	// (array), $14 notify channel.
	ins := "INSERT INTO " + t.Jobs + " AS j (queue, kind, args, priority, state, max_attempts, run_at, deadline, unique_key, tags, metadata, created_at, partition_key)" +
		" SELECT q, k, a::jsonb, p, st, ma, ra, dl, uk, tg::jsonb, md::jsonb, $12, pk" +
		" FROM unnest($1::text[], $2::text[], $3::text[], $4::smallint[], $5::text[], $6::int[], $7::timestamptz[], $8::timestamptz[]," +
		" $9::text[], $10::text[], $11::text[], $13::text[]) WITH ORDINALITY AS t(q, k, a, p, st, ma, ra, dl, uk, tg, md, pk, ord)" +
		" ORDER BY ord RETURNING " + jcols
	q.insert = ins
	q.insertReturnCount = 22
	// The notifications ride in the inserting statement: pg_notify is
	// queued in its transaction, so a rolled-back insert wakes nobody, and
	// only queues that received due jobs are notified.
	q.insertNotify = "WITH ins AS (" + ins + ")," +
		" n AS (SELECT count(pg_notify($14, 'insert ' || d.queue)) AS n FROM (SELECT DISTINCT queue FROM ins WHERE state = 'available') d)" +
		" SELECT ins.*, (SELECT n FROM n) FROM ins"
	q.notify = "SELECT pg_notify($1, $2)"
	q.notifyQueues = "SELECT count(pg_notify($1, 'insert ' || q)) FROM unnest($2::text[]) AS q"
	q.reserveIDs = "SELECT nextval(pg_get_serial_sequence('" + t.Jobs + "', 'id')) FROM generate_series(1, $1::int)"
	// Only the executions the worker names ($3 ids, $4 claim_seqs), each a
	// primary-key lookup. Rows being written right now (finished,
	// cancelled) are skipped, so a heartbeat never waits for, or deadlocks
	// with, its own completer.
	q.extendLeases = "WITH c AS (SELECT t.id FROM unnest($3::bigint[], $4::bigint[]) AS c(id, seq)" +
		" CROSS JOIN LATERAL (SELECT t.id FROM " + t.Jobs + " t WHERE t.id = c.id AND t.claim_seq = c.seq AND t.state = 'running' AND t.worker_id = $1 FOR UPDATE SKIP LOCKED) t)" +
		" UPDATE " + t.Jobs + " j SET lease_until = $2, version = j.version + 1 FROM c WHERE j.id = c.id"
	q.buildDeps(t, jcols)
	return q
}

// buildDeps builds the statements of inserts with dependencies (deps.go).
func (q *queries) buildDeps(t sqlq.Tables, jcols string) {
	// $1 the ids of the jobs depended on. Their rows are locked in id
	// order (the same order in every insert, so two inserts naming the
	// same jobs queue rather than deadlock) and read at their newest
	// version; those not yet marked get has_dependants, which turns on
	// their settle triggers. A row already marked is not written again.
	q.lockDeps = "WITH l AS (SELECT id, state, has_dependants FROM " + t.Jobs + " WHERE id = ANY($1::bigint[]) ORDER BY id FOR NO KEY UPDATE)," +
		" u AS (UPDATE " + t.Jobs + " j SET has_dependants = true FROM l WHERE j.id = l.id AND NOT l.has_dependants)" +
		" SELECT id, state FROM l"
	q.archivedStates = "SELECT id, state FROM " + t.Archive + " WHERE id = ANY($1::bigint[])"
	// $1..$24 arrays (depRows.params), $25 created_at, $26 notify channel.
	// The ids were reserved from the identity sequence.
	ins := "INSERT INTO " + t.Jobs + " AS j (id, queue, kind, args, priority, state, max_attempts, run_at, deadline, unique_key, tags, metadata," +
		" partition_key, workflow_id, step, on_dependency_failure, dep_count, waiting_for, deps_completed, deps_cancelled, deps_discarded," +
		" has_dependants, finished_at, errors, created_at)" +
		" SELECT id, q, k, a::jsonb, p, st, ma, ra, dl, uk, tg::jsonb, md::jsonb, pk, wf, sp, po, dc, wt, dco, dca, ddi, hd, fi," +
		" COALESCE(er::jsonb, '[]'::jsonb), $25" +
		" FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[], $5::smallint[], $6::text[], $7::int[], $8::timestamptz[]," +
		" $9::timestamptz[], $10::text[], $11::text[], $12::text[], $13::text[], $14::bigint[], $15::text[], $16::text[], $17::int[]," +
		" $18::int[], $19::int[], $20::int[], $21::int[], $22::bool[], $23::timestamptz[], $24::text[])" +
		" WITH ORDINALITY AS t(id, q, k, a, p, st, ma, ra, dl, uk, tg, md, pk, wf, sp, po, dc, wt, dco, dca, ddi, hd, fi, er, ord)" +
		" ORDER BY ord RETURNING " + jcols
	q.insertDeps = ins
	q.insertDepsNotify = "WITH ins AS (" + ins + ")," +
		" n AS (SELECT count(pg_notify($26, 'insert ' || d.queue)) AS n FROM (SELECT DISTINCT queue FROM ins WHERE state = 'available') d)" +
		" SELECT ins.*, (SELECT n FROM n) FROM ins"
	// $1 dep_id, $2 job_id, $3 settled: one array element per edge.
	// Waiting jobs past their deadline ($1 now, $2 limit), through the
	// partial index jobs_deadline_waiting; then their discard ($2 ids, $3
	// error entries), which fires the settle triggers of those with
	// dependants.
	q.expiredWaiting = "SELECT id, attempt, deadline FROM " + t.Jobs + " WHERE state = 'waiting' AND deadline IS NOT NULL AND deadline < $1" +
		" ORDER BY deadline, id LIMIT $2 FOR UPDATE SKIP LOCKED"
	q.discardWaiting = "UPDATE " + t.Jobs + " j SET state = 'discarded', finished_at = $1, waiting_for = 0, lease_until = NULL, version = j.version + 1," +
		" errors = " + dialect{}.AppendJSON("j.errors", "v.e") +
		" FROM unnest($2::bigint[], $3::text[]) AS v(id, e) WHERE j.id = v.id AND j.state = 'waiting'"
	q.isWaiting = "SELECT state = 'waiting' FROM " + t.Jobs + " WHERE id = $1"
	q.insertEdges = "INSERT INTO " + t.Deps + " (dep_id, job_id, settled) SELECT * FROM unnest($1::bigint[], $2::bigint[], $3::bool[])"
}
