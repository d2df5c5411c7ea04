package memory

import (
	"context"

	"github.com/backlogq/backlog/core/contract"
	"github.com/backlogq/backlog/core/storekit"
)

// ListPage implements contract.PageLister: List cut at maxBytes of args and
// results (storekit.CutPage).
func (s *Store) ListPage(ctx context.Context, p contract.ListParams, maxBytes int) ([]*contract.Job, error) {
	jobs, err := s.List(ctx, p)
	if err != nil {
		return nil, err
	}
	return storekit.CutPage(jobs, maxBytes), nil
}
