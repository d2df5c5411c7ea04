package mysql

import (
	"github.com/backlogq/backlog/store/internal/sqlq"
)

// withExtra scans a row holding JobColumns followed by more columns: the
// extra destinations are appended to the ones sqlq.ScanJob passes.
type withExtra struct {
	s     sqlq.Scanner
	extra []any
}

func (w withExtra) Scan(dest ...any) error { return w.s.Scan(append(dest, w.extra...)...) }
