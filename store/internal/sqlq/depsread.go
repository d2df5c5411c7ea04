package sqlq

import (
	"context"

	"github.com/backlogq/backlog/core/contract"
)

// LoadDependsOn fills the DependsOn of the jobs that have dependencies
// (dep_count > 0: DepFields.Set left them a non-nil, empty slice) from
// the dependency table, ascending, in reads of at most the dialect's
// parameter limit. Jobs without dependencies cost nothing.
func (s *Store) LoadDependsOn(ctx context.Context, c Conn, jobs []*contract.Job) error {
	if s.t.Deps == "" {
		return nil
	}
	byID := map[int64]*contract.Job{}
	var ids []int64
	for _, j := range jobs {
		if j != nil && j.DependsOn != nil && len(j.DependsOn) == 0 {
			byID[j.ID] = j
			ids = append(ids, j.ID)
		}
	}
	chunk := max(1, min(1000, s.d.MaxParams()-1))
	for start := 0; start < len(ids); start += chunk {
		part := ids[start:min(len(ids), start+chunk)]
		b := newBuilder(s.d, len(part))
		b.w("SELECT job_id, dep_id FROM ", s.t.Deps, " WHERE job_id IN ").in(part).w(" ORDER BY job_id, dep_id")
		rows, err := c.Query(ctx, b.String(), b.args...)
		if err != nil {
			return err
		}
		for rows.Next() {
			var job, dep int64
			if err := rows.Scan(&job, &dep); err != nil {
				rows.Close()
				return err
			}
			if j := byID[job]; j != nil {
				j.DependsOn = append(j.DependsOn, dep)
			}
		}
		if err := rows.Err(); err != nil {
			rows.Close()
			return err
		}
		if err := rows.Close(); err != nil {
			return err
		}
	}
	return nil
}

// ForgetEdges deletes, on c, the dependency edges of the jobs ids (rows
// of Tables.Deps whose job_id is one of them), in statements of at most
// the dialect's parameter limit: the jobs' rows are gone (deleted, or
// pruned from the archive). Edges that name them as the job waited for
// (dep_id) belong to their dependants and stay. A store without a
// dependency table runs nothing.
func (s *Store) ForgetEdges(ctx context.Context, c Conn, ids []int64) error {
	if s.t.Deps == "" {
		return nil
	}
	return s.deleteIn(ctx, c, s.t.Deps, "job_id", ids)
}

// forgetEdges is ForgetEdges for the shared changes that delete jobs,
// when the store asked for it (Config.DeleteEdges).
func (s *Store) forgetEdges(ctx context.Context, c Conn, ids []int64) error {
	if !s.edges || len(ids) == 0 {
		return nil
	}
	return s.ForgetEdges(ctx, c, ids)
}
