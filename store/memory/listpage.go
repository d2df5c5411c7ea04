package memory

import (
	"context"

	"github.com/backlogq/backlog/core"
)

// ListPage implements core.PageLister: List cut at maxBytes of args and
// results (core.CutPage).
func (s *Store) ListPage(ctx context.Context, p core.ListParams, maxBytes int) ([]*core.Job, error) {
	jobs, err := s.List(ctx, p)
	if err != nil {
		return nil, err
	}
	return core.CutPage(jobs, maxBytes), nil
}
