package sqlq

import (
	"context"
	"fmt"
	"time"

	"github.com/backlogq/backlog/core/contract"
)

// Change is one job's new values: a finish outcome (OutcomeChange), a
// rescue or a deadline discard.
type Change struct {
	ID       int64
	Worker   string // a finish: the worker that must hold the job
	ClaimSeq int64  // a finish: the claim it must be held at
	Version  int64  // a rescue or discard: the version the row must still have

	State      contract.State
	NewAttempt int
	RunAt      time.Time // zero: keep
	FinishedAt time.Time // zero: NULL
	Err        string    // JSON of one AttemptError; "": none
	Result     []byte
	SetResult  bool
	Kind       string // "": keep
	Args       []byte // nil: keep
}

// OutcomeChange turns a finish outcome into a holder-fenced change: the
// state, attempt, run_at, finished_at, error entry, result and next kind and
// args the outcome's kind asks for. An unknown kind is an error.
func OutcomeChange(o *contract.Outcome) (Change, error) {
	ch := Change{ID: o.JobID, Worker: o.WorkerID, ClaimSeq: o.ClaimSeq, NewAttempt: o.Attempt}
	if o.Error != nil {
		e, err := EncodeError(*o.Error)
		if err != nil {
			return ch, err
		}
		ch.Err = e
	}
	at := contract.UTC(o.At)
	runAt := contract.UTC(o.RunAt)
	dueState := func() contract.State {
		if runAt.After(at) {
			return contract.StateScheduled
		}
		return contract.StateAvailable
	}
	switch o.Kind {
	case contract.OutcomeComplete:
		ch.State, ch.FinishedAt = contract.StateCompleted, at
		ch.Result, ch.SetResult = o.Result, true
	case contract.OutcomeRetry:
		ch.State, ch.RunAt = contract.StateRetryable, runAt
	case contract.OutcomeSnooze:
		ch.State, ch.RunAt = dueState(), runAt
		ch.NewAttempt = max(0, o.Attempt-1)
	case contract.OutcomeContinue:
		ch.State, ch.RunAt = dueState(), runAt
		ch.NewAttempt = 0
		ch.Kind = o.NextKind
		if o.NextArgs != nil {
			ch.Args = o.NextArgs
		}
	case contract.OutcomeCancel:
		ch.State, ch.FinishedAt = contract.StateCancelled, at
	case contract.OutcomeDiscard:
		ch.State, ch.FinishedAt = contract.StateDiscarded, at
	default:
		return ch, fmt.Errorf("job %d: unknown outcome kind %q: %w", o.JobID, o.Kind, contract.ErrInvalidArgument)
	}
	if ch.RunAt.IsZero() && (o.Kind == contract.OutcomeRetry || o.Kind == contract.OutcomeSnooze || o.Kind == contract.OutcomeContinue) {
		ch.RunAt = at // no RunAt given: due at once
	}
	return ch, nil
}

// AppendRow appends to args the values a store's finish statement binds
// for ch, one row of its outcomes: id, fence worker, fence claim_seq, new
// state, new attempt, new run_at (NULL: keep), finished_at (NULL: none),
// the error entry to append (NULL: none), the result, 1 or 0 for whether
// to set it, the next kind and args (NULL: keep). d encodes the times.
func (ch *Change) AppendRow(args []any, d Dialect) []any {
	args = append(args, ch.ID, ch.Worker, ch.ClaimSeq)
	for c := colState; c < numChangeCols; c++ {
		args = append(args, changeColumns[c].value(d, ch))
	}
	return args
}

// FinishRounds runs the protocol every database/sql store's Finish shares
// and returns one result per outcome, in input order. Each outcome becomes
// a Change (OutcomeChange; an unknown kind fails the whole call, its error
// prefixed with name). The outcomes are applied in rounds of distinct job
// ids (Rounds), so a job named twice is applied in input order (the second
// normally fails its fence). In each round, update applies the outcomes
// other than completions with Delete, and then del deletes those, at most
// chunk outcomes a call: each is given every outcome's change and the
// indexes of the ones to apply, and returns the ids whose fence held (the
// job still running under the outcome's worker at its claim) and which it
// therefore changed. Both run on c.
func FinishRounds(ctx context.Context, c Conn, name string, outcomes []contract.Outcome, chunk int,
	update, del func(ctx context.Context, c Conn, chs []Change, part []int) (map[int64]bool, error)) ([]contract.FinishResult, error) {
	res := make([]contract.FinishResult, len(outcomes))
	chs := make([]Change, len(outcomes))
	for i := range outcomes {
		res[i].JobID = outcomes[i].JobID
		ch, err := OutcomeChange(&outcomes[i])
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		chs[i] = ch
	}
	apply := func(idx []int, fn func(ctx context.Context, c Conn, chs []Change, part []int) (map[int64]bool, error)) error {
		for start := 0; start < len(idx); start += chunk {
			part := idx[start:min(len(idx), start+chunk)]
			applied, err := fn(ctx, c, chs, part)
			if err != nil {
				return err
			}
			for _, i := range part {
				res[i].Applied = applied[outcomes[i].JobID]
			}
		}
		return nil
	}
	for _, round := range Rounds(len(outcomes), func(i int) int64 { return outcomes[i].JobID }) {
		var upd, dels []int
		for _, i := range round {
			if o := &outcomes[i]; o.Kind == contract.OutcomeComplete && o.Delete {
				dels = append(dels, i)
			} else {
				upd = append(upd, i)
			}
		}
		if err := apply(upd, update); err != nil {
			return nil, err
		}
		if err := apply(dels, del); err != nil {
			return nil, err
		}
	}
	return res, nil
}
