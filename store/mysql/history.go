package mysql

import "github.com/backlogq/backlog/core"

// The store keeps the queue history (core.QueueHistory, implemented by
// store/internal/sqlq) in <prefix>queue_history and <prefix>queue_totals
// (migration 00010).
var _ core.QueueHistory = (*Store)(nil)

// DuplicateKeyUpdate implements sqlq.DuplicateKeyUpserter: the history's
// additive upserts are INSERT … ON DUPLICATE KEY UPDATE c = c + VALUES(c)
// (VALUES() still works on MySQL 8.0.20+, where it is deprecated in
// favour of a row alias that MariaDB lacks).
func (dialect) DuplicateKeyUpdate() bool { return true }
