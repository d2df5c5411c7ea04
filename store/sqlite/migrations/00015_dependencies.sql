-- Schema version 15: jobs that wait for other jobs (contract.Dependencies):
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
-- Jobs from before the upgrade read as having no dependencies: ADD COLUMN
-- with a constant default rewrites no row, and the tables and indexes are
-- new (jobs_workflow is partial: only jobs of a workflow have an entry).
--
-- The settling of dependencies is done by triggers, in the statement that
-- ends a job, so that every statement that ends one (Finish, CompleteTx,
-- Cancel, Delete, Rescue, RescueWorkers, DiscardExpired, and any written
-- later) settles its dependants in its own transaction without knowing
-- of them. The update triggers watch finished_at, which every change to a
-- final state sets (and the claims, which change state, do not: SQLite
-- compiles a table's triggers into every statement that may fire them,
-- and the claim statements stay as they were). A job without dependants
-- costs the finishing statement the triggers' WHEN tests on its row,
-- has_dependants first:
--
--   jobs_dependency_completed     a job with dependants completed;
--   jobs_dependency_failed        one ended cancelled or discarded, and
--                                 no waiting dependant of it has the
--                                 cancel policy ('');
--   jobs_dependency_failed_cascade
--                                 one ended cancelled or discarded, and
--                                 some waiting dependant of it has;
--   jobs_dependency_done_deleted  one was deleted while running: only a
--                                 completion with Outcome.Delete deletes
--                                 a running job (Delete refuses to), so
--                                 this is a completion;
--   jobs_dependency_deleted, jobs_dependency_deleted_cascade
--                                 one was deleted before its end (Delete
--                                 of a job neither running nor final): it
--                                 counts as cancelled, with or without
--                                 dependants to cancel.
--
-- Each waiting dependant counts one less (deps_* by the end) and becomes
-- available, or scheduled while its run_at is ahead, at 0 (deps_settle).
-- A failed end cancels instead the waiting dependants whose policy is ''
-- (cancel), and their own such dependants in turn (deps_settle_cascade):
-- one recursive common table expression finds them all (the doomed jobs,
-- each with the dependency that cancels it) and writes them to job_doomed,
-- a table empty outside the trigger program, which the cascade's other
-- statements read; the triggers do not fire themselves again, which SQLite
-- does only with recursive_triggers on and at most 1000 deep (a chain of
-- steps may be 10,000 long). The cascade's cancel of a doomed job sets its
-- waiting_for to 0 in the same change; the failed triggers skip such a
-- change (with recursive_triggers on, or from the delete triggers, they
-- would otherwise run for every doomed job, whose dependants the cascade
-- has settled already). The cascade counts the run-policy dependants of
-- the ended job and of the doomed jobs, notes the queues of those it
-- released, settles the edges of the doomed jobs and of the ended job,
-- cancels the doomed jobs (an error entry of cause dependency_failed
-- naming the dependency) and empties job_doomed.
--
-- The time of a release or a cancel is the ended job's finished_at; a
-- deletion has none: the database's clock, and for a completion with
-- deletion at least the job's claim time (attempted_at), which comes
-- before the completion.
--
-- job_releases has one row per queue whose jobs a settle released, with
-- the sequence number of the last such settle: the store's listeners
-- (Listen, which reads the database file for other connections' commits)
-- send a NotifyInsert for each row whose number grew, as they do for the
-- queues of new ids; a trigger cannot reach a process's listeners.
--
-- jobs_deadline is rebuilt with the waiting jobs, spelt as DiscardExpired
-- spells the jobs it discards, "(" + pending + " OR state = 'waiting')"
-- (SQLite uses a partial index only for a query that spells its condition
-- the same way); the rebuild reads the jobs table once.
--
-- The edges of a job that is gone for good (deleted from jobs and not
-- archived, or pruned from the archive) are deleted with it
-- (jobs_dependency_edges_gone, jobs_archive_dependency_edges_gone); a
-- job's DependsOn is read from its edges, so the edges of an archived job
-- stay.

{{- define "deps_settle"}}
    UPDATE {{.P}}jobs
    SET deps_completed = deps_completed + ({{.E}} = 'completed'), deps_discarded = deps_discarded + ({{.E}} = 'discarded'),
        deps_cancelled = deps_cancelled + ({{.E}} IN ('cancelled', 'deleted')), waiting_for = waiting_for - 1,
        state = CASE WHEN waiting_for > 1 THEN 'waiting' WHEN run_at <= {{.T}} THEN 'available' ELSE 'scheduled' END,
        version = version + 1
    WHERE id IN (SELECT job_id FROM {{.P}}job_deps WHERE dep_id = {{.D}} AND NOT settled) AND state = 'waiting';
    INSERT INTO {{.P}}job_releases (queue, seq)
    SELECT DISTINCT j.queue, (SELECT COALESCE(MAX(seq), 0) + 1 FROM {{.P}}job_releases)
    FROM {{.P}}job_deps AS d CROSS JOIN {{.P}}jobs AS j ON j.id = d.job_id
    WHERE d.dep_id = {{.D}} AND NOT d.settled AND j.state = 'available' AND j.waiting_for = 0
    ON CONFLICT (queue) DO UPDATE SET seq = excluded.seq;
    UPDATE {{.P}}job_deps SET settled = 1 WHERE dep_id = {{.D}} AND NOT settled;
{{- end}}
{{- define "deps_dooms"}}EXISTS (
        SELECT 1 FROM {{.P}}job_deps AS d CROSS JOIN {{.P}}jobs AS w ON w.id = d.job_id
        WHERE d.dep_id = {{.D}} AND NOT d.settled AND w.state = 'waiting' AND w.on_dependency_failure = '')
{{- end}}
{{- define "deps_settle_cascade"}}
    INSERT INTO {{.P}}job_doomed (id, by_id)
    SELECT id, CASE WHEN MAX(by_id = {{.D}}) THEN {{.D}} ELSE MIN(by_id) END
    FROM (WITH RECURSIVE doomed(id, by_id) AS (
            SELECT d.job_id, {{.D}} FROM {{.P}}job_deps AS d CROSS JOIN {{.P}}jobs AS w ON w.id = d.job_id
            WHERE d.dep_id = {{.D}} AND NOT d.settled AND w.state = 'waiting' AND w.on_dependency_failure = ''
            UNION
            SELECT d.job_id, doomed.id FROM doomed CROSS JOIN {{.P}}job_deps AS d ON d.dep_id = doomed.id CROSS JOIN {{.P}}jobs AS w ON w.id = d.job_id
            WHERE w.state = 'waiting' AND w.on_dependency_failure = '')
          SELECT id, by_id FROM doomed)
    GROUP BY id;
    UPDATE {{.P}}jobs
    SET deps_cancelled = deps_cancelled + c.n - c.nd, deps_discarded = deps_discarded + c.nd,
        waiting_for = waiting_for - c.n,
        state = CASE WHEN waiting_for > c.n THEN 'waiting' WHEN run_at <= {{.T}} THEN 'available' ELSE 'scheduled' END,
        version = version + 1
    FROM (SELECT e.job_id, COUNT(*) AS n, SUM(e.dep_id = {{.D}} AND {{.E}} = 'discarded') AS nd
          FROM (SELECT job_id, dep_id FROM {{.P}}job_deps WHERE dep_id = {{.D}} AND NOT settled
                UNION ALL
                SELECT job_id, dep_id FROM {{.P}}job_deps WHERE dep_id IN (SELECT id FROM {{.P}}job_doomed)) AS e
          WHERE e.job_id NOT IN (SELECT id FROM {{.P}}job_doomed)
          GROUP BY e.job_id) AS c
    WHERE {{.P}}jobs.id = c.job_id AND {{.P}}jobs.state = 'waiting';
    INSERT INTO {{.P}}job_releases (queue, seq)
    SELECT DISTINCT j.queue, (SELECT COALESCE(MAX(seq), 0) + 1 FROM {{.P}}job_releases)
    FROM {{.P}}jobs AS j
    WHERE j.id IN (SELECT job_id FROM {{.P}}job_deps WHERE dep_id = {{.D}} AND NOT settled
                   UNION
                   SELECT job_id FROM {{.P}}job_deps WHERE dep_id IN (SELECT id FROM {{.P}}job_doomed))
      AND j.state = 'available' AND j.waiting_for = 0
    ON CONFLICT (queue) DO UPDATE SET seq = excluded.seq;
    UPDATE {{.P}}job_deps SET settled = 1 WHERE dep_id IN (SELECT id FROM {{.P}}job_doomed);
    UPDATE {{.P}}job_deps SET settled = 1 WHERE dep_id = {{.D}} AND NOT settled;
    UPDATE {{.P}}jobs
    SET state = 'cancelled', finished_at = {{.T}}, waiting_for = 0, lease_until = NULL, version = version + 1,
        deps_cancelled = deps_cancelled + ((SELECT by_id FROM {{.P}}job_doomed AS x WHERE x.id = {{.P}}jobs.id) <> {{.D}} OR {{.E}} <> 'discarded'),
        deps_discarded = deps_discarded + ((SELECT by_id FROM {{.P}}job_doomed AS x WHERE x.id = {{.P}}jobs.id) = {{.D}} AND {{.E}} = 'discarded'),
        errors = json_insert(CASE WHEN json_array_length(errors) >= 20 THEN json_remove(errors, '$[1]') ELSE errors END, '$[#]',
            json_object('attempt', attempt,
                'at', strftime('%Y-%m-%dT%H:%M:%S', {{.T}} / 1000000, 'unixepoch') || printf('.%06dZ', {{.T}} % 1000000),
                'error', (SELECT 'dependency job ' || x.by_id || ' ended ' || CASE WHEN x.by_id = {{.D}} THEN {{.E}} ELSE 'cancelled' END
                          FROM {{.P}}job_doomed AS x WHERE x.id = {{.P}}jobs.id),
                'cause', 'dependency_failed'))
    WHERE id IN (SELECT id FROM {{.P}}job_doomed);
    DELETE FROM {{.P}}job_doomed;
{{- end}}

-- +goose Up
ALTER TABLE {{.P}}jobs ADD COLUMN workflow_id INTEGER;
ALTER TABLE {{.P}}jobs ADD COLUMN step TEXT;
ALTER TABLE {{.P}}jobs ADD COLUMN on_dependency_failure TEXT NOT NULL DEFAULT '';
ALTER TABLE {{.P}}jobs ADD COLUMN dep_count INTEGER NOT NULL DEFAULT 0;
ALTER TABLE {{.P}}jobs ADD COLUMN waiting_for INTEGER NOT NULL DEFAULT 0;
ALTER TABLE {{.P}}jobs ADD COLUMN deps_completed INTEGER NOT NULL DEFAULT 0;
ALTER TABLE {{.P}}jobs ADD COLUMN deps_cancelled INTEGER NOT NULL DEFAULT 0;
ALTER TABLE {{.P}}jobs ADD COLUMN deps_discarded INTEGER NOT NULL DEFAULT 0;
ALTER TABLE {{.P}}jobs ADD COLUMN has_dependants INTEGER NOT NULL DEFAULT 0;
ALTER TABLE {{.P}}jobs_archive ADD COLUMN workflow_id INTEGER;
ALTER TABLE {{.P}}jobs_archive ADD COLUMN step TEXT;
ALTER TABLE {{.P}}jobs_archive ADD COLUMN on_dependency_failure TEXT NOT NULL DEFAULT '';
ALTER TABLE {{.P}}jobs_archive ADD COLUMN dep_count INTEGER NOT NULL DEFAULT 0;
ALTER TABLE {{.P}}jobs_archive ADD COLUMN waiting_for INTEGER NOT NULL DEFAULT 0;
ALTER TABLE {{.P}}jobs_archive ADD COLUMN deps_completed INTEGER NOT NULL DEFAULT 0;
ALTER TABLE {{.P}}jobs_archive ADD COLUMN deps_cancelled INTEGER NOT NULL DEFAULT 0;
ALTER TABLE {{.P}}jobs_archive ADD COLUMN deps_discarded INTEGER NOT NULL DEFAULT 0;
CREATE TABLE IF NOT EXISTS {{.P}}job_deps (
    dep_id  INTEGER NOT NULL,
    job_id  INTEGER NOT NULL,
    settled INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (dep_id, job_id)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS {{.P}}job_deps_job ON {{.P}}job_deps (job_id, dep_id);
CREATE INDEX IF NOT EXISTS {{.P}}jobs_workflow ON {{.P}}jobs (workflow_id, id) WHERE workflow_id IS NOT NULL;
CREATE INDEX IF NOT EXISTS {{.P}}jobs_archive_workflow ON {{.P}}jobs_archive (workflow_id, id) WHERE workflow_id IS NOT NULL;
CREATE TABLE IF NOT EXISTS {{.P}}job_doomed (
    id    INTEGER PRIMARY KEY,
    by_id INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS {{.P}}job_releases (
    queue TEXT    PRIMARY KEY,
    seq   INTEGER NOT NULL
);
DROP INDEX IF EXISTS {{.P}}jobs_deadline;
CREATE INDEX IF NOT EXISTS {{.P}}jobs_deadline ON {{.P}}jobs (deadline)
    WHERE deadline IS NOT NULL AND ((state = 'scheduled' OR state = 'available' OR state = 'retryable') OR state = 'waiting');
{{- $now := "CAST((julianday('now') - 2440587.5) * 86400000000 AS INTEGER)"}}
{{- $ended := "OLD.has_dependants AND OLD.state NOT IN ('completed', 'cancelled', 'discarded') AND NEW.state IN ('completed', 'cancelled', 'discarded')"}}
{{- $failed := printf "%s AND NEW.state <> 'completed' AND NOT (OLD.state = 'waiting' AND NEW.waiting_for = 0)" $ended}}
{{- $at := printf "COALESCE(NEW.finished_at, %s)" $now}}
{{- $deleted := "OLD.has_dependants AND OLD.state NOT IN ('running', 'completed', 'cancelled', 'discarded')"}}
-- +goose StatementBegin
CREATE TRIGGER IF NOT EXISTS {{.P}}jobs_dependency_completed AFTER UPDATE OF finished_at ON {{.P}}jobs
WHEN {{$ended}} AND NEW.state = 'completed'
BEGIN{{template "deps_settle" (args "P" .P "D" "NEW.id" "E" "'completed'" "T" $at)}}
END;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE TRIGGER IF NOT EXISTS {{.P}}jobs_dependency_failed AFTER UPDATE OF finished_at ON {{.P}}jobs
WHEN {{$failed}} AND NOT {{template "deps_dooms" (args "P" .P "D" "NEW.id")}}
BEGIN{{template "deps_settle" (args "P" .P "D" "NEW.id" "E" "NEW.state" "T" $at)}}
END;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE TRIGGER IF NOT EXISTS {{.P}}jobs_dependency_failed_cascade AFTER UPDATE OF finished_at ON {{.P}}jobs
WHEN {{$failed}} AND {{template "deps_dooms" (args "P" .P "D" "NEW.id")}}
BEGIN{{template "deps_settle_cascade" (args "P" .P "D" "NEW.id" "E" "NEW.state" "T" $at)}}
END;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE TRIGGER IF NOT EXISTS {{.P}}jobs_dependency_done_deleted AFTER DELETE ON {{.P}}jobs
WHEN OLD.has_dependants AND OLD.state = 'running'
BEGIN{{template "deps_settle" (args "P" .P "D" "OLD.id" "E" "'completed'" "T" (printf "MAX(%s, COALESCE(OLD.attempted_at, 0))" $now))}}
END;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE TRIGGER IF NOT EXISTS {{.P}}jobs_dependency_deleted AFTER DELETE ON {{.P}}jobs
WHEN {{$deleted}} AND NOT {{template "deps_dooms" (args "P" .P "D" "OLD.id")}}
BEGIN{{template "deps_settle" (args "P" .P "D" "OLD.id" "E" "'deleted'" "T" $now)}}
END;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE TRIGGER IF NOT EXISTS {{.P}}jobs_dependency_deleted_cascade AFTER DELETE ON {{.P}}jobs
WHEN {{$deleted}} AND {{template "deps_dooms" (args "P" .P "D" "OLD.id")}}
BEGIN{{template "deps_settle_cascade" (args "P" .P "D" "OLD.id" "E" "'deleted'" "T" $now)}}
END;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE TRIGGER IF NOT EXISTS {{.P}}jobs_dependency_edges_gone AFTER DELETE ON {{.P}}jobs
WHEN OLD.dep_count > 0 AND NOT EXISTS (SELECT 1 FROM {{.P}}jobs_archive WHERE id = OLD.id)
BEGIN
    DELETE FROM {{.P}}job_deps WHERE job_id = OLD.id;
END;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE TRIGGER IF NOT EXISTS {{.P}}jobs_archive_dependency_edges_gone AFTER DELETE ON {{.P}}jobs_archive
WHEN OLD.dep_count > 0
BEGIN
    DELETE FROM {{.P}}job_deps WHERE job_id = OLD.id;
END;
-- +goose StatementEnd

-- +goose Down
DROP TRIGGER IF EXISTS {{.P}}jobs_archive_dependency_edges_gone;
DROP TRIGGER IF EXISTS {{.P}}jobs_dependency_edges_gone;
DROP TRIGGER IF EXISTS {{.P}}jobs_dependency_deleted_cascade;
DROP TRIGGER IF EXISTS {{.P}}jobs_dependency_deleted;
DROP TRIGGER IF EXISTS {{.P}}jobs_dependency_done_deleted;
DROP TRIGGER IF EXISTS {{.P}}jobs_dependency_failed_cascade;
DROP TRIGGER IF EXISTS {{.P}}jobs_dependency_failed;
DROP TRIGGER IF EXISTS {{.P}}jobs_dependency_completed;
DROP INDEX IF EXISTS {{.P}}jobs_deadline;
CREATE INDEX IF NOT EXISTS {{.P}}jobs_deadline ON {{.P}}jobs (deadline)
    WHERE deadline IS NOT NULL AND (state = 'scheduled' OR state = 'available' OR state = 'retryable');
DROP TABLE IF EXISTS {{.P}}job_releases;
DROP TABLE IF EXISTS {{.P}}job_doomed;
DROP INDEX IF EXISTS {{.P}}jobs_archive_workflow;
DROP INDEX IF EXISTS {{.P}}jobs_workflow;
DROP TABLE IF EXISTS {{.P}}job_deps;
ALTER TABLE {{.P}}jobs_archive DROP COLUMN deps_discarded;
ALTER TABLE {{.P}}jobs_archive DROP COLUMN deps_cancelled;
ALTER TABLE {{.P}}jobs_archive DROP COLUMN deps_completed;
ALTER TABLE {{.P}}jobs_archive DROP COLUMN waiting_for;
ALTER TABLE {{.P}}jobs_archive DROP COLUMN dep_count;
ALTER TABLE {{.P}}jobs_archive DROP COLUMN on_dependency_failure;
ALTER TABLE {{.P}}jobs_archive DROP COLUMN step;
ALTER TABLE {{.P}}jobs_archive DROP COLUMN workflow_id;
ALTER TABLE {{.P}}jobs DROP COLUMN has_dependants;
ALTER TABLE {{.P}}jobs DROP COLUMN deps_discarded;
ALTER TABLE {{.P}}jobs DROP COLUMN deps_cancelled;
ALTER TABLE {{.P}}jobs DROP COLUMN deps_completed;
ALTER TABLE {{.P}}jobs DROP COLUMN waiting_for;
ALTER TABLE {{.P}}jobs DROP COLUMN dep_count;
ALTER TABLE {{.P}}jobs DROP COLUMN on_dependency_failure;
ALTER TABLE {{.P}}jobs DROP COLUMN step;
ALTER TABLE {{.P}}jobs DROP COLUMN workflow_id;
