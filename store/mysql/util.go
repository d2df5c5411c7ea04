package mysql

import (
	"strings"

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
