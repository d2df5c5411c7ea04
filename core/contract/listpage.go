package contract

import "context"

// PageLister is an optional capability of a Store: List bounded by the
// bytes of the jobs it reads, so that a page of large jobs costs what it
// returns and not what its limit could hold. Every built-in store has it;
// a caller falls back to List in chunks sized for the largest job where a
// store does not.
type PageLister interface {
	// ListPage returns what List(ctx, p) returns, cut short by weight: it
	// reads the matching jobs in p's order, at most p.Limit (0 means
	// 100), and stops after the first job at which the weight of the
	// jobs read (JobWeight summed, in bytes) reaches maxBytes. So it
	// returns at least one job when any matches, and the jobs it returns
	// weigh less than maxBytes plus one job. maxBytes <= 0 sets no byte
	// bound.
	//
	// A page is read in p's order from the cursor on (an index serves
	// every order ListParams offers, on SQL stores), in one statement or
	// a few that continue from the last row: its cost grows with the jobs
	// it returns, not with the jobs the store holds before the cursor or
	// after the page. Rule list/page-bounded-by-bytes of
	// storetest. An invalid p.ArgsContains returns an error wrapping
	// ErrInvalidFilter, as List does.
	ListPage(ctx context.Context, p ListParams, maxBytes int) ([]*Job, error)
}
