-- Schema version 1 of the backlog MySQL/MariaDB store. {{.P}} is the table
-- prefix. Times are DATETIME(6) holding UTC; JSON columns are JSON (on
-- MariaDB an alias of LONGTEXT with a JSON_VALID check). Names compare byte
-- for byte: every table defaults to utf8mb4_bin.

-- +goose Up
CREATE TABLE IF NOT EXISTS {{.P}}jobs (
    id           BIGINT       NOT NULL AUTO_INCREMENT,
    queue        VARCHAR(128) NOT NULL,
    kind         VARCHAR(255) NOT NULL,
    args         JSON         NOT NULL,
    priority     SMALLINT     NOT NULL,
    state        VARCHAR(16)  NOT NULL,
    attempt      INT          NOT NULL DEFAULT 0,
    max_attempts INT          NOT NULL,
    run_at       DATETIME(6)  NOT NULL,
    deadline     DATETIME(6)  NULL,
    unique_key   VARCHAR(255) NULL,
    tags         JSON         NULL,
    metadata     JSON         NULL,
    errors       JSON         NULL,
    result       LONGBLOB     NULL,
    created_at   DATETIME(6)  NOT NULL,
    attempted_at DATETIME(6)  NULL,
    finished_at  DATETIME(6)  NULL,
    worker_id    VARCHAR(255) NULL,
    lease_until  DATETIME(6)  NULL,
    version      BIGINT       NOT NULL DEFAULT 0,
    -- 1 while a claim may take the job (scheduled, available, retryable):
    -- MySQL has no partial indexes, so the claim index leads with it.
    pending      TINYINT AS (CASE WHEN state IN ('scheduled','available','retryable') THEN 1 ELSE 0 END) STORED,
    -- The unique key while the job is live, NULL once it is final (or has
    -- no key): a unique index on it makes keys unique among live jobs.
    unique_live  VARCHAR(255) AS (CASE WHEN state IN ('scheduled','available','running','retryable') THEN unique_key END) STORED,
    PRIMARY KEY (id),
    -- Claim: equality on (queue, pending), then index order is claim order,
    -- so LIMIT n FOR UPDATE SKIP LOCKED reads (and locks) only the rows it
    -- returns plus not-yet-due ones ahead of them.
    INDEX claim_idx (queue, pending, priority, run_at, id),
    UNIQUE INDEX unique_idx (unique_live),
    -- The next three indexes leave state out on purpose: every claim and
    -- finish changes state, and an index holding it would be rewritten each
    -- time. lease_until is set only while a job runs, finished_at only once
    -- it is final, and deadline never changes, so these entries move only
    -- when their own column does.
    -- Rescue of expired leases, and lease extension (running rows only).
    INDEX lease_idx (lease_until),
    -- Prune of finished jobs by age.
    INDEX finished_idx (finished_at),
    -- Deadline discards.
    INDEX deadline_idx (deadline)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE IF NOT EXISTS {{.P}}queues (
    name       VARCHAR(128) NOT NULL,
    paused     BOOLEAN      NOT NULL DEFAULT FALSE,
    updated_at DATETIME(6)  NOT NULL,
    PRIMARY KEY (name)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE IF NOT EXISTS {{.P}}workers (
    id           VARCHAR(255) NOT NULL,
    host         VARCHAR(255) NOT NULL,
    pid          BIGINT       NOT NULL,
    queues       JSON         NOT NULL,
    tags         JSON         NULL,
    metadata     JSON         NULL,
    started_at   DATETIME(6)  NOT NULL,
    heartbeat_at DATETIME(6)  NOT NULL,
    PRIMARY KEY (id),
    INDEX heartbeat_idx (heartbeat_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- +goose Down
DROP TABLE IF EXISTS {{.P}}workers;
DROP TABLE IF EXISTS {{.P}}queues;
DROP TABLE IF EXISTS {{.P}}jobs;
