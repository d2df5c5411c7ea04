-- Schema version 14: the archive of finished jobs (contract.Archiver).
-- With the engine's Retention.Archive on, maintenance moves final jobs
-- past their retention from jobs into jobs_archive (one transaction per
-- batch: INSERT … SELECT by id, then DELETE) instead of deleting them,
-- and prunes the archive past Retention.ArchiveTTL.
--
-- The table has the jobs table's stored columns with the same types (and
-- progress and checkpoint, nullable JSON, so a job of any later schema
-- keeps its shape), without the generated columns and the claim, lease,
-- unique and deadline indexes: archived jobs are never claimed or
-- changed. Ids come from the jobs table (no AUTO_INCREMENT).
-- finished_idx serves the archive's pruning (oldest finished_at first);
-- run_at_idx serves lists by (run_at, id), as on jobs.
--
-- A new, empty table: the jobs table is not touched.

-- +goose Up
CREATE TABLE IF NOT EXISTS {{.P}}jobs_archive (
    id            BIGINT       NOT NULL,
    queue         VARCHAR(128) NOT NULL,
    kind          VARCHAR(255) NOT NULL,
    args          JSON         NOT NULL,
    priority      SMALLINT     NOT NULL,
    state         VARCHAR(16)  NOT NULL,
    attempt       INT          NOT NULL DEFAULT 0,
    max_attempts  INT          NOT NULL,
    run_at        DATETIME(6)  NOT NULL,
    deadline      DATETIME(6)  NULL,
    unique_key    VARCHAR(255) NULL,
    tags          JSON         NULL,
    metadata      JSON         NULL,
    errors        JSON         NULL,
    result        LONGBLOB     NULL,
    created_at    DATETIME(6)  NOT NULL,
    attempted_at  DATETIME(6)  NULL,
    finished_at   DATETIME(6)  NULL,
    worker_id     VARCHAR(255) NULL,
    lease_until   DATETIME(6)  NULL,
    version       BIGINT       NOT NULL DEFAULT 0,
    claim_seq     BIGINT       NOT NULL DEFAULT 0,
    partition_key VARCHAR(255) NULL,
    progress      JSON         NULL,
    checkpoint    JSON         NULL,
    PRIMARY KEY (id),
    INDEX finished_idx (finished_at, id),
    INDEX run_at_idx (run_at, id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- +goose Down
DROP TABLE IF EXISTS {{.P}}jobs_archive;
