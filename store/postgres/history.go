package postgres

import "github.com/backlogq/backlog/core"

// The store keeps the queue history (core.QueueHistory, implemented by
// store/internal/sqlq) in <schema>.queue_history and <schema>.queue_totals
// (migration 00010), written with INSERT … ON CONFLICT DO UPDATE.
var _ core.QueueHistory = (*Store)(nil)
