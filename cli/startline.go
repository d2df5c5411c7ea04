package cli

import (
	"fmt"
	"strings"

	"github.com/backlogq/backlog/core"
)

// periodicSuffix is the part of work's and serve's start line that lists
// the periodic schedules they run, "; periodic NAME (SCHEDULE), ..." in the
// order given, or "" when there are none.
func periodicSuffix(ps []core.PeriodicJob) string {
	if len(ps) == 0 {
		return ""
	}
	parts := make([]string, len(ps))
	for i, p := range ps {
		parts[i] = fmt.Sprintf("%s (%s)", printable(p.Name, ""), printable(p.Schedule, ""))
	}
	return "; periodic " + strings.Join(parts, ", ")
}
