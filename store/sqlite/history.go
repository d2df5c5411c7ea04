package sqlite

import "github.com/backlogq/backlog/core"

// The store keeps the queue history (core.QueueHistory, implemented by
// store/internal/sqlq) in <prefix>queue_history and <prefix>queue_totals
// (migration 00009), written with INSERT … ON CONFLICT DO UPDATE.
var _ core.QueueHistory = (*Store)(nil)
