package httpapi

import (
	"context"
	"fmt"
	"strings"

	"github.com/backlogq/backlog/core"
)

// ReservedMetadataPrefix starts the metadata keys backlog writes itself
// (core.PeriodicMetadataName "backlog.periodic" and its settings among
// them): a submission whose token lacks the admin role may not set a key
// with this prefix (400 invalid-request), so that a producer cannot pass
// its job off as a periodic run or steer what backlog reads from them.
const ReservedMetadataPrefix = "backlog."

// checkSubmission runs the checks of a submission (ps, all of it; item,
// when not nil, names the i-th item in messages, "jobs[3]: ") that need the request or the
// store, before anything is inserted: reserved metadata keys, then the
// queues (checkQueues).
func (s *Server) checkSubmission(ctx context.Context, ps []core.InsertParams, item func(int) string) error {
	if reqFrom(ctx).roles&roleAdmin == 0 {
		for i, p := range ps {
			for k := range p.Metadata {
				if strings.HasPrefix(k, ReservedMetadataPrefix) {
					prefix := ""
					if item != nil {
						prefix = item(i)
					}
					return newProblem(SlugInvalidRequest, fmt.Sprintf("%smetadata key %q is reserved: keys starting with %q are written by backlog itself (only the admin token may set them); nothing was inserted", prefix, clip(k), ReservedMetadataPrefix))
				}
			}
		}
	}
	return s.checkQueues(ctx, ps, item)
}

// jobsItem names the i-th job of POST /v1/jobs/batch in messages.
func jobsItem(i int) string { return fmt.Sprintf("jobs[%d]: ", i) }
