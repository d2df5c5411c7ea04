package httpapi

import (
	"fmt"
	"net/http"
	"sort"
	"unicode/utf8"

	"github.com/backlogq/backlog/core/contract"
)

// Page sizes of GET /v1/queues.
const (
	// DefaultQueuePage is how many queues GET /v1/queues answers when
	// the request names no limit.
	DefaultQueuePage = 100
	// MaxQueuePage is the largest limit GET /v1/queues accepts.
	MaxQueuePage = 1000
)

// QueuesResponse answers GET /v1/queues: one page of queues ordered by
// name, and, when more may follow, NextAfter: the name of the page's last
// queue, to send as after for the next page (absent on the last page).
type QueuesResponse struct {
	Queues    []QueueInfo `json:"queues"`
	NextAfter string      `json:"next_after,omitempty"`
}

// listQueues serves GET /v1/queues?limit=N&after=NAME: at most limit
// (1..MaxQueuePage, default DefaultQueuePage) queues whose names sort
// after after (byte order), read through the StatsCache (at most
// StatsCacheTTL old). A bad limit or after is 400 invalid-request.
func (s *Server) listQueues(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	limit := DefaultQueuePage
	if v := q.Get("limit"); v != "" {
		n, ok := parseDecimal(v, 1, MaxQueuePage)
		if !ok {
			return newProblem(SlugInvalidRequest, fmt.Sprintf("limit must be an integer from 1 to %d in canonical decimal, not %q", MaxQueuePage, clip(v)))
		}
		limit = int(n)
	}
	after := q.Get("after")
	if len(after) > contract.MaxQueueLen || !utf8.ValidString(after) {
		return newProblem(SlugInvalidRequest, fmt.Sprintf("after must be a queue name (at most %d bytes of UTF-8): the next_after of the previous page", contract.MaxQueueLen))
	}
	stats, err := s.stats.Stats(r.Context(), s.cfg.StatsCacheTTL)
	if err != nil {
		return err
	}
	// Store.Stats is ordered by name.
	start := 0
	if after != "" {
		start = sort.Search(len(stats), func(i int) bool { return stats[i].Queue > after })
	}
	page := stats[start:]
	var out QueuesResponse
	if len(page) > limit {
		page = page[:limit]
		out.NextAfter = page[len(page)-1].Queue
	}
	out.Queues = make([]QueueInfo, 0, len(page))
	for _, q := range page {
		out.Queues = append(out.Queues, toQueue(q))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// checkQueueKnown refuses a pause or resume of a queue the store does not
// hold (Store.Stats lists it: it has jobs or a pause) with 404 not-found,
// as a likely typo, unless the request says create=true. A create other
// than true or false is 400 invalid-request. The cached queue list is read
// first, the store only when the name is not in it.
func (s *Server) checkQueueKnown(r *http.Request, name string) error {
	switch v := r.URL.Query().Get("create"); v {
	case "true":
		return nil
	case "", "false":
	default:
		return newProblem(SlugInvalidRequest, fmt.Sprintf("create must be true or false, not %q", clip(v)))
	}
	stats, err := s.stats.Stats(r.Context(), s.cfg.StatsCacheTTL)
	if err != nil {
		return err
	}
	for pass := 0; ; pass++ {
		for _, q := range stats {
			if q.Queue == name {
				return nil
			}
		}
		if pass == 1 {
			break
		}
		if stats, err = s.stats.FreshStats(r.Context()); err != nil {
			return err
		}
	}
	return newProblem(SlugNotFound, fmt.Sprintf("queue %q has no jobs and no pause: send create=true to act on a new queue", clip(name)))
}
