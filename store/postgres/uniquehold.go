package postgres

import "github.com/backlogq/backlog/core"

// Store lists and releases unique-key holds through the shared protocol
// (sqlq.Store.UniqueHolds, sqlq.Store.ReleaseUniqueHold) over its
// unique_keys table.
var _ core.UniqueHolder = (*Store)(nil)
