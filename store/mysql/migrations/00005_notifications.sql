-- Schema version 5: notifications, the short-lived log of the rare events
-- core.Notifier delivers besides inserts: pause and resume of a queue,
-- cancel of a claimed job, and retry of a job (an "insert" of its queue).
-- The statement that makes the change writes its row in the same
-- transaction, so a rolled-back change notifies nobody. Listeners read the
-- rows above the highest id they have seen (a primary-key range read that
-- finds nothing while nothing happens); inserts of jobs need no row here,
-- listeners read new job ids from the jobs table itself, so the insert path
-- writes nothing extra. Rows older than about a minute are pruned by the
-- writers (the newest row is always kept, so the id never restarts).
-- No existing table changes.

-- +goose Up
CREATE TABLE IF NOT EXISTS {{.P}}notifications (
    id         BIGINT       NOT NULL AUTO_INCREMENT,
    kind       VARCHAR(16)  NOT NULL,
    queue      VARCHAR(128) NOT NULL,
    job_id     BIGINT       NULL,
    created_at DATETIME(6)  NOT NULL,
    PRIMARY KEY (id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- +goose Down
DROP TABLE IF EXISTS {{.P}}notifications;
