package mysql

import (
	"cmp"
	"slices"
	"strings"

	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/store/internal/sqlq"
)

// marks returns n comma-separated "?" placeholders.
func marks(n int) string {
	if n <= 0 {
		return ""
	}
	return strings.Repeat("?,", n-1) + "?"
}

// withExtra scans a row holding JobColumns followed by more columns: the
// extra destinations are appended to the ones sqlq.ScanJob passes.
type withExtra struct {
	s     sqlq.Scanner
	extra []any
}

func (w withExtra) Scan(dest ...any) error { return w.s.Scan(append(dest, w.extra...)...) }

// scanJobs drains rows of JobColumns into jobs and closes them.
func scanJobs(rows sqlq.Rows, err error) ([]*core.Job, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*core.Job
	for rows.Next() {
		j, err := sqlq.ScanJob(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, j)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return out, rows.Close()
}

// scanIDs drains rows of one integer column and closes them.
func scanIDs(rows sqlq.Rows, err error) ([]int64, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		out = append(out, id)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return out, rows.Close()
}

// sortClaimOrder sorts jobs by priority, run_at, id: claim order.
func sortClaimOrder(jobs []*core.Job) {
	slices.SortFunc(jobs, func(a, b *core.Job) int {
		if c := cmp.Compare(a.Priority, b.Priority); c != 0 {
			return c
		}
		if c := a.RunAt.Compare(b.RunAt); c != 0 {
			return c
		}
		return cmp.Compare(a.ID, b.ID)
	})
}
