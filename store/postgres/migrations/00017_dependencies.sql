-- Schema version 17: jobs that wait for other jobs (contract.Dependencies):
-- workflows of steps and batches with callbacks.
--
-- jobs gains workflow_id and step (the workflow a job belongs to and its
-- name there), on_dependency_failure ('' cancels the job when a
-- dependency fails, 'run' runs it anyway), dep_count (how many jobs it
-- depends on), waiting_for (how many of them have not settled: above 0
-- only in state 'waiting'), deps_completed, deps_cancelled and
-- deps_discarded (its settled dependencies by their end), and
-- has_dependants (some job waits for this one: only such jobs' ends do
-- any dependency work). jobs_archive gains the same columns but the last.
-- job_deps holds one row per dependency edge: job_id waits for dep_id;
-- settled marks an edge already counted, so that a dependency ending twice
-- (a retry of a completed job) counts once. Its primary key serves the
-- settle (the dependants of a job that ended); job_deps_job serves reading
-- a job's dependencies back.
--
-- No long locks: ADD COLUMN with a constant default only changes the
-- catalog (the ACCESS EXCLUSIVE lock lasts an instant and no row is
-- rewritten; lock_timeout keeps it from queueing behind a long
-- transaction: the migration then fails and the next start retries it),
-- and job_deps is new. The workflow indexes are built concurrently by
-- schema version 18.

-- +goose Up
SET LOCAL lock_timeout = '5s';
ALTER TABLE {{.S}}.jobs
    ADD COLUMN IF NOT EXISTS workflow_id bigint,
    ADD COLUMN IF NOT EXISTS step text,
    ADD COLUMN IF NOT EXISTS on_dependency_failure text NOT NULL DEFAULT '',
    ADD COLUMN IF NOT EXISTS dep_count integer NOT NULL DEFAULT 0,
    ADD COLUMN IF NOT EXISTS waiting_for integer NOT NULL DEFAULT 0,
    ADD COLUMN IF NOT EXISTS deps_completed integer NOT NULL DEFAULT 0,
    ADD COLUMN IF NOT EXISTS deps_cancelled integer NOT NULL DEFAULT 0,
    ADD COLUMN IF NOT EXISTS deps_discarded integer NOT NULL DEFAULT 0,
    ADD COLUMN IF NOT EXISTS has_dependants boolean NOT NULL DEFAULT false;
ALTER TABLE {{.S}}.jobs_archive
    ADD COLUMN IF NOT EXISTS workflow_id bigint,
    ADD COLUMN IF NOT EXISTS step text,
    ADD COLUMN IF NOT EXISTS on_dependency_failure text NOT NULL DEFAULT '',
    ADD COLUMN IF NOT EXISTS dep_count integer NOT NULL DEFAULT 0,
    ADD COLUMN IF NOT EXISTS waiting_for integer NOT NULL DEFAULT 0,
    ADD COLUMN IF NOT EXISTS deps_completed integer NOT NULL DEFAULT 0,
    ADD COLUMN IF NOT EXISTS deps_cancelled integer NOT NULL DEFAULT 0,
    ADD COLUMN IF NOT EXISTS deps_discarded integer NOT NULL DEFAULT 0;
CREATE TABLE IF NOT EXISTS {{.S}}.job_deps (
    dep_id  bigint  NOT NULL,
    job_id  bigint  NOT NULL,
    settled boolean NOT NULL DEFAULT false,
    PRIMARY KEY (dep_id, job_id)
);
CREATE INDEX IF NOT EXISTS job_deps_job ON {{.S}}.job_deps (job_id, dep_id);

-- The state 'waiting'. The new check is NOT VALID, so adding it reads no
-- row: the rows already there passed the old, narrower check, and every
-- row written from now on is checked.
ALTER TABLE {{.S}}.jobs DROP CONSTRAINT IF EXISTS jobs_state_check;
ALTER TABLE {{.S}}.jobs ADD CONSTRAINT jobs_state_check
    CHECK (state IN ('waiting','scheduled','available','running','retryable','completed','cancelled','discarded')) NOT VALID;

-- Settling dependants (contract.Dependencies). Two row-level AFTER
-- triggers on jobs call settle_dependants for a job that has dependants
-- (has_dependants, set by the insert of the first job depending on it) and
-- ends: an UPDATE from a state that is not final to a final one (Finish,
-- CompleteTx, Cancel, Rescue, RescueWorkers, DiscardExpired), or a DELETE
-- of a row not final (Delete of a job before its end; a completion with
-- Delete, the only statement that deletes a running row). The WHEN
-- clauses keep every other row, every ordinary job's included, out of the
-- function: its finish pays for one boolean test, no call. The function
-- runs in the transaction of the change that ended the job.
--
-- The cancel cascade runs in the top-level call: a recursive query finds
-- the jobs a cancel cancels in turn, and one update cancels them all;
-- pg_trigger_depth() < 1 keeps the function's own updates from firing
-- the triggers again, so a chain of any length is settled in a few
-- statements, without recursion.

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION {{.S}}.settle_dependants() RETURNS trigger
LANGUAGE plpgsql
-- Index lookups only, whatever the plan cache guesses of the rows a
-- statement touches: a sequential scan of jobs or job_deps per step of a
-- cascade would make a long chain quadratic.
SET enable_seqscan = off
SET enable_hashjoin = off
SET enable_mergejoin = off
AS $fn$
DECLARE
    -- How the jobs of the round ended: completed, cancelled, discarded,
    -- or deleted (removed before its end, counted as cancelled).
    v_ended     text;
    -- The change's time: FinishedAt of the cancelled, and what a released
    -- job's run_at is compared with.
    v_at        timestamptz;
    v_round     bigint[] := ARRAY[OLD.id];
    v_next      bigint[];
    v_cancelled bigint[];
    v_queues    text[];
    v_all       bigint[] := '{}';
    v_due       text[] := '{}';
BEGIN
    IF TG_OP = 'DELETE' THEN
        IF OLD.state = 'running' THEN
            -- A completion with Delete: the row carries no finish time;
            -- the completion is no earlier than its claim.
            v_ended := 'completed';
            v_at := GREATEST(statement_timestamp(), OLD.attempted_at);
        ELSE
            v_ended := 'deleted';
            v_at := statement_timestamp();
        END IF;
    ELSE
        v_ended := NEW.state;
        v_at := COALESCE(NEW.finished_at, statement_timestamp());
    END IF;
    LOOP
        -- Each edge is counted once: settled marks it (a dependency that
        -- ends twice, after an admin Retry, counts only the first end).
        -- The dependants' rows are locked by the UPDATE and re-read at
        -- their newest version, so two transactions settling the last
        -- two dependencies of one job release it once.
        WITH e AS (
            UPDATE {{.S}}.job_deps d SET settled = true
             WHERE d.dep_id = ANY(v_round) AND NOT d.settled
            RETURNING d.job_id, d.dep_id
        ), c AS (
            SELECT e.job_id, count(*)::int AS n, min(e.dep_id) AS dep FROM e GROUP BY e.job_id
        ), u AS (
            UPDATE {{.S}}.jobs j SET
                   state = CASE WHEN v_ended <> 'completed' AND j.on_dependency_failure = '' THEN 'cancelled'
                                WHEN j.waiting_for > c.n THEN 'waiting'
                                WHEN j.run_at > v_at THEN 'scheduled'
                                ELSE 'available' END,
                   waiting_for = CASE WHEN v_ended <> 'completed' AND j.on_dependency_failure = '' THEN 0
                                      ELSE GREATEST(j.waiting_for - c.n, 0) END,
                   -- Counted up to the end that cancels the job: one.
                   deps_completed = j.deps_completed + CASE WHEN v_ended = 'completed' THEN c.n ELSE 0 END,
                   deps_discarded = j.deps_discarded + CASE WHEN v_ended <> 'discarded' THEN 0
                                                            WHEN j.on_dependency_failure = '' THEN 1 ELSE c.n END,
                   deps_cancelled = j.deps_cancelled + CASE WHEN v_ended NOT IN ('cancelled', 'deleted') THEN 0
                                                            WHEN j.on_dependency_failure = '' THEN 1 ELSE c.n END,
                   finished_at = CASE WHEN v_ended <> 'completed' AND j.on_dependency_failure = '' THEN v_at ELSE j.finished_at END,
                   errors = CASE WHEN v_ended <> 'completed' AND j.on_dependency_failure = ''
                                 THEN (CASE WHEN jsonb_array_length(j.errors) >= 20 THEN j.errors - 1 ELSE j.errors END)
                                      || jsonb_build_array(jsonb_build_object(
                                             'attempt', j.attempt,
                                             'at', to_char(v_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'),
                                             'error', 'dependency job ' || c.dep || ' ended ' || v_ended,
                                             'cause', 'dependency_failed'))
                                 ELSE j.errors END,
                   version = j.version + 1
              FROM c
             WHERE j.id = c.job_id AND j.state = 'waiting'
            RETURNING j.id, j.state, j.queue, j.has_dependants
        )
        SELECT array_agg(u.id) FILTER (WHERE u.state = 'cancelled' AND u.has_dependants),
               array_agg(u.id) FILTER (WHERE u.state = 'cancelled'),
               array_agg(DISTINCT u.queue) FILTER (WHERE u.state = 'available')
          INTO v_next, v_cancelled, v_queues
          FROM u;
        v_all := v_all || COALESCE(v_cancelled, '{}');
        v_due := v_due || COALESCE(v_queues, '{}');
        EXIT WHEN v_next IS NULL;
        -- The jobs this round cancelled cancel in turn every waiting job
        -- under the cancel policy that depends on them, directly or not:
        -- that closure is read in one recursive query (each edge at most
        -- once, however many paths lead to it) and cancelled in one
        -- update, each job naming the least of its cancelled
        -- dependencies. The update locks each job and re-reads it: one
        -- that another transaction cancelled meanwhile is left as it is.
        WITH RECURSIVE c(id, parent) AS (
            SELECT d.job_id, d.dep_id
              FROM {{.S}}.job_deps d JOIN {{.S}}.jobs j ON j.id = d.job_id
             WHERE d.dep_id = ANY(v_next) AND NOT d.settled AND j.state = 'waiting' AND j.on_dependency_failure = ''
            UNION
            SELECT d.job_id, d.dep_id
              FROM c JOIN {{.S}}.job_deps d ON d.dep_id = c.id JOIN {{.S}}.jobs j ON j.id = d.job_id
             WHERE NOT d.settled AND j.state = 'waiting' AND j.on_dependency_failure = ''
        ), p AS (
            SELECT c.id, min(c.parent) AS parent FROM c GROUP BY c.id
        ), u AS (
            UPDATE {{.S}}.jobs j SET
                   state = 'cancelled', waiting_for = 0, deps_cancelled = j.deps_cancelled + 1, finished_at = v_at,
                   errors = (CASE WHEN jsonb_array_length(j.errors) >= 20 THEN j.errors - 1 ELSE j.errors END)
                            || jsonb_build_array(jsonb_build_object(
                                   'attempt', j.attempt,
                                   'at', to_char(v_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'),
                                   'error', 'dependency job ' || p.parent || ' ended cancelled',
                                   'cause', 'dependency_failed')),
                   version = j.version + 1
              FROM p
             WHERE j.id = p.id AND j.state = 'waiting'
            RETURNING j.id
        )
        SELECT array_agg(u.id) INTO v_cancelled FROM u;
        v_all := v_all || COALESCE(v_cancelled, '{}');
        -- The next round settles the edges of every job cancelled so far
        -- in the cascade: it counts them for the dependants under the run
        -- policy (releasing those at 0), and cancels a job the closure
        -- could not see (one inserted since, depending on a job of it),
        -- which makes one more round.
        v_round := v_next || COALESCE(v_cancelled, '{}');
        v_ended := 'cancelled';
    END LOOP;
    -- The store's notifications, sent when the transaction commits: the
    -- queues of released due jobs ("insert <queue>"), and the jobs
    -- cancelled ("finish <id>,…", 300 ids a payload), for their waiters.
    PERFORM pg_notify('backlog_{{.S}}', 'insert ' || q) FROM (SELECT DISTINCT q FROM unnest(v_due) AS q) x;
    PERFORM pg_notify('backlog_{{.S}}', 'finish ' || string_agg(id::text, ','))
       FROM (SELECT id, (row_number() OVER () - 1) / 300 AS g FROM unnest(v_all) AS id) x GROUP BY g;
    RETURN NULL;
END
$fn$;
-- +goose StatementEnd

DROP TRIGGER IF EXISTS jobs_settle_end ON {{.S}}.jobs;
CREATE TRIGGER jobs_settle_end AFTER UPDATE OF state ON {{.S}}.jobs FOR EACH ROW
    WHEN (OLD.has_dependants AND pg_trigger_depth() < 1
          AND NEW.state IN ('completed','cancelled','discarded') AND OLD.state NOT IN ('completed','cancelled','discarded'))
    EXECUTE FUNCTION {{.S}}.settle_dependants();
DROP TRIGGER IF EXISTS jobs_settle_delete ON {{.S}}.jobs;
CREATE TRIGGER jobs_settle_delete AFTER DELETE ON {{.S}}.jobs FOR EACH ROW
    WHEN (OLD.has_dependants AND pg_trigger_depth() < 1 AND OLD.state NOT IN ('completed','cancelled','discarded'))
    EXECUTE FUNCTION {{.S}}.settle_dependants();

-- +goose Down
DROP TRIGGER IF EXISTS jobs_settle_delete ON {{.S}}.jobs;
DROP TRIGGER IF EXISTS jobs_settle_end ON {{.S}}.jobs;
DROP FUNCTION IF EXISTS {{.S}}.settle_dependants();
DROP TABLE IF EXISTS {{.S}}.job_deps;
ALTER TABLE {{.S}}.jobs DROP CONSTRAINT IF EXISTS jobs_state_check;
ALTER TABLE {{.S}}.jobs ADD CONSTRAINT jobs_state_check
    CHECK (state IN ('scheduled','available','running','retryable','completed','cancelled','discarded')) NOT VALID;
ALTER TABLE {{.S}}.jobs_archive
    DROP COLUMN IF EXISTS deps_discarded, DROP COLUMN IF EXISTS deps_cancelled, DROP COLUMN IF EXISTS deps_completed,
    DROP COLUMN IF EXISTS waiting_for, DROP COLUMN IF EXISTS dep_count, DROP COLUMN IF EXISTS on_dependency_failure,
    DROP COLUMN IF EXISTS step, DROP COLUMN IF EXISTS workflow_id;
ALTER TABLE {{.S}}.jobs
    DROP COLUMN IF EXISTS has_dependants, DROP COLUMN IF EXISTS deps_discarded, DROP COLUMN IF EXISTS deps_cancelled,
    DROP COLUMN IF EXISTS deps_completed, DROP COLUMN IF EXISTS waiting_for, DROP COLUMN IF EXISTS dep_count,
    DROP COLUMN IF EXISTS on_dependency_failure, DROP COLUMN IF EXISTS step, DROP COLUMN IF EXISTS workflow_id;
