package contract

import (
	"context"
	"time"
)

// Archiver is an optional capability of a Store: an archive of finished
// jobs, a second table of the jobs table's shape (the SQL stores:
// <prefix>jobs_archive). The engine's maintenance moves final jobs past
// their retention there instead of deleting them when Retention.Archive
// is on, and prunes the archive past its own retention
// (Retention.ArchiveTTL). Operators read it with ListArchived and
// GetArchived; archived jobs are never claimed, changed or counted by
// Stats. Every built-in store implements it.
type Archiver interface {
	// Archive moves up to limit jobs in final state `state` whose
	// FinishedAt is before `before` from the jobs into the archive and
	// returns how many: the jobs Prune with the same arguments would
	// delete (storetest rule archive/moves-exactly-what-prune-would-delete),
	// with the same limit rule (a call returns limit whenever at least
	// limit jobs qualify). A state that is not final returns an error
	// wrapping ErrInvalidArgument and ErrInvalidState and moves nothing
	// (storetest rule archive/non-final-state-is-an-invalid-argument).
	//
	// Each batch is one transaction: a job is in the jobs or in the
	// archive, never in both and never in neither, whatever runs at the
	// same time; two handles archiving at once move each job once
	// (storetest rule archive/concurrent-archivers-move-each-job-once).
	// An archived job reads back from GetArchived and ListArchived with
	// every field as Get returned it before the move (storetest rule
	// archive/keeps-every-field), and Get returns ErrNotFound for it
	// (rule archive/moved-jobs-leave-the-jobs).
	//
	// For unique keys an archived job is a pruned one (see Prune): its
	// hold lasts until FinishedAt + UniqueFor whether or not a row
	// exists anywhere, and Archive forgets ended holds as Prune does
	// (storetest rule archive/key-held-as-after-prune).
	Archive(ctx context.Context, state State, before time.Time, limit int) (int, error)

	// PruneArchive deletes up to limit archived jobs whose FinishedAt is
	// before `before`, whatever their state, and returns how many;
	// callers loop while the count equals limit (storetest rule
	// archive/prune-archive-takes-only-older-jobs). Which ones a call
	// deletes when more qualify is not part of the contract (the SQL
	// stores take the oldest FinishedAt first, then id).
	PruneArchive(ctx context.Context, before time.Time, limit int) (int, error)

	// ListArchived is List over the archive: the same filters, orders,
	// keyset cursor and default limit (storetest rule
	// archive/list-pages-in-order). An invalid p.ArgsContains returns an
	// error wrapping ErrInvalidFilter.
	ListArchived(ctx context.Context, p ListParams) ([]*Job, error)

	// GetArchived returns one archived job, or ErrNotFound (wrapped) when
	// the archive has no job with that id.
	GetArchived(ctx context.Context, id int64) (*Job, error)
}
