package sqlite

import "github.com/backlogq/backlog/core"

// The store rewrites sealed values of stored jobs (re-encryption after a
// key rotation, `backlog keys rotate`) with the SQL shared in
// store/internal/sqlq: Store.RewriteSealed, promoted from the embedded
// *sqlq.Store, fenced by the version column.
var _ core.SealedRewriter = (*Store)(nil)
