package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/backlogq/backlog/core/contract"
	"github.com/backlogq/backlog/store/internal/sqlq"
	"github.com/jackc/pgx/v5"
)

// finishArgs are the parallel arrays of one Finish statement.
type finishArgs struct {
	id         []int64
	worker     []string
	claimSeq   []int64
	state      []string
	newAttempt []int32
	runAt      []*time.Time
	finishedAt []*time.Time
	errEntry   []*string
	result     [][]byte
	setResult  []bool
	kind       []*string
	args       []*string
	del        []bool
}

func (a *finishArgs) add(o *contract.Outcome) error {
	ch, err := sqlq.OutcomeChange(o)
	if err != nil {
		return fmt.Errorf("postgres: %w", err)
	}
	var (
		ra, fi     *time.Time
		errEntry   *string
		kind, args *string
		del        = o.Kind == contract.OutcomeComplete && o.Delete
	)
	if ch.State.Final() {
		fi = &ch.FinishedAt
	} else {
		ra = &ch.RunAt
	}
	if ch.Err != "" {
		errEntry = &ch.Err
	}
	if ch.Kind != "" {
		kind = &ch.Kind
	}
	if ch.Args != nil {
		s := string(ch.Args)
		args = &s
	}
	a.id = append(a.id, ch.ID)
	a.worker = append(a.worker, ch.Worker)
	a.claimSeq = append(a.claimSeq, ch.ClaimSeq)
	a.state = append(a.state, string(ch.State))
	a.newAttempt = append(a.newAttempt, int32(ch.NewAttempt))
	a.runAt = append(a.runAt, ra)
	a.finishedAt = append(a.finishedAt, fi)
	a.errEntry = append(a.errEntry, errEntry)
	a.result = append(a.result, ch.Result)
	a.setResult = append(a.setResult, ch.SetResult)
	a.kind = append(a.kind, kind)
	a.args = append(a.args, args)
	a.del = append(a.del, del)
	return nil
}

func (a *finishArgs) params() []any {
	return []any{a.id, a.worker, a.claimSeq, a.state, a.newAttempt, a.runAt, a.finishedAt, a.errEntry, a.result, a.setResult, a.kind, a.args, a.del, string(contract.StateRunning)}
}

// Finish applies a batch of fenced outcomes in one statement (an UPDATE …
// FROM unnest of the outcomes, and a DELETE … USING for completions with
// Delete) and returns one result per outcome in input order. An outcome
// whose fence fails (the job is not running under its worker id and
// claim_seq) reports Applied=false and changes nothing. A batch naming one job
// more than once is applied in input order, in one transaction. An unknown
// outcome kind fails the whole call.
func (s *Store) Finish(ctx context.Context, outcomes []contract.Outcome) ([]contract.FinishResult, error) {
	if len(outcomes) == 0 {
		return []contract.FinishResult{}, nil
	}
	rounds, err := finishRounds(outcomes)
	if err != nil {
		return nil, err
	}
	var out []contract.FinishResult
	if len(rounds) == 1 {
		err = s.retry(ctx, func() (err error) {
			out, err = s.finishOn(ctx, s.db, outcomes, rounds)
			return err
		})
	} else {
		err = s.inTx(ctx, func(tx pgx.Tx) (err error) {
			out, err = s.finishOn(ctx, pgConn{tx}, outcomes, rounds)
			return err
		})
	}
	return out, err
}

// finishRound is one statement's outcomes: distinct job ids.
type finishRound struct {
	idx  []int
	args finishArgs
}

// finishRounds splits outcomes into rounds of distinct job ids, so a job
// named twice is applied in input order (the second normally fails its
// fence).
func finishRounds(outcomes []contract.Outcome) ([]finishRound, error) {
	idx := sqlq.Rounds(len(outcomes), func(i int) int64 { return outcomes[i].JobID })
	rounds := make([]finishRound, len(idx))
	for r, part := range idx {
		rounds[r].idx = part
		for _, i := range part {
			if err := rounds[r].args.add(&outcomes[i]); err != nil {
				return nil, err
			}
		}
	}
	return rounds, nil
}

// finishOn runs the rounds on q (the pool or a transaction), without
// retries.
func (s *Store) finishOn(ctx context.Context, q sqlq.Conn, outcomes []contract.Outcome, rounds []finishRound) ([]contract.FinishResult, error) {
	res := make([]contract.FinishResult, len(outcomes))
	for i := range outcomes {
		res[i].JobID = outcomes[i].JobID
	}
	for _, r := range rounds {
		applied := make(map[int64]bool, len(r.idx))
		stmt, params, cols := s.q.finish, r.args.params(), 1
		if s.notify {
			stmt, params, cols = s.q.finishNotify, append(params, s.channel), 2
		}
		rows, err := q.Query(ctx, stmt, s.planEachCall(params...)...)
		err = scanInts(rows, err, cols, func(v []int64) { applied[v[0]] = true })
		if err != nil {
			return nil, err
		}
		for _, i := range r.idx {
			res[i].Applied = applied[outcomes[i].JobID]
		}
	}
	return res, nil
}

// ExtendLeases sets LeaseUntil=until on the named jobs still running under
// workerID at their claim_seq, in one statement, and returns how many it
// touched. A job whose row is being written at that moment (its finish or
// cancellation in flight) is skipped: it needs no longer lease, and waiting
// could deadlock with the completer.
func (s *Store) ExtendLeases(ctx context.Context, workerID string, leases []contract.Lease, until time.Time) (int, error) {
	if len(leases) == 0 {
		return 0, nil
	}
	ids, seqs := make([]int64, len(leases)), make([]int64, len(leases))
	for i, l := range leases {
		ids[i], seqs[i] = l.JobID, l.ClaimSeq
	}
	var n int64
	err := s.retry(ctx, func() error {
		tag, err := s.pool.Exec(ctx, s.q.extendLeases, s.planEachCall(workerID, contract.UTC(until), ids, seqs)...)
		n = tag.RowsAffected()
		return err
	})
	return int(n), err
}
