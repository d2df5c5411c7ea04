package sqlq

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/backlogq/backlog/core"
)

// fence selects how a batched change guards its row.
type fence int

const (
	// fenceHolder: the row is running, held by Change.Worker at
	// Change.ClaimSeq (Finish, CompleteTx).
	fenceHolder fence = iota
	// fenceVersion: the row's version is still Change.Version (Rescue and
	// DiscardExpired, after reading their candidates).
	fenceVersion
)

// Change is one row's new values in a batched update of jobs: a finish
// outcome (OutcomeChange), a rescue or a deadline discard.
type Change struct {
	ID       int64
	Worker   string // fenceHolder: the worker that must hold the job
	ClaimSeq int64  // fenceHolder: the claim it must be held at
	Version  int64  // fenceVersion: the version the row must still have

	State      core.State
	NewAttempt int
	RunAt      time.Time // zero: keep
	FinishedAt time.Time // zero: NULL
	Err        string    // JSON of one AttemptError; "": none
	Result     []byte
	SetResult  bool
	Kind       string // "": keep
	Args       []byte // nil: keep
}

// changeCol is a column of the derived table a batched change joins with
// the jobs table: one row per Change.
type changeCol int

const (
	colID            changeCol = iota // Change.ID
	colFenceWorker                    // Change.Worker
	colFenceClaimSeq                  // Change.ClaimSeq
	colFenceVersion                   // Change.Version
	colState                          // Change.State
	colAttempt                        // Change.NewAttempt
	colRunAt                          // Change.RunAt; NULL keeps run_at
	colFinishedAt                     // Change.FinishedAt; NULL clears finished_at
	colError                          // Change.Err; NULL appends nothing
	colResult                         // Change.Result
	colSetResult                      // 1 when Change.SetResult, else 0
	colKind                           // Change.Kind; NULL keeps kind
	colArgs                           // Change.Args; NULL keeps args
	numChangeCols
)

// changeColumns gives each change column its name in the derived table,
// its parameter type and its value for one change.
var changeColumns = [numChangeCols]struct {
	name  string
	typ   Type
	value func(d Dialect, ch *Change) any
}{
	colID:            {"id", TypeInt, func(_ Dialect, ch *Change) any { return ch.ID }},
	colFenceWorker:   {"fence_worker", TypeText, func(_ Dialect, ch *Change) any { return ch.Worker }},
	colFenceClaimSeq: {"fence_claim_seq", TypeInt, func(_ Dialect, ch *Change) any { return ch.ClaimSeq }},
	colFenceVersion:  {"fence_version", TypeInt, func(_ Dialect, ch *Change) any { return ch.Version }},
	colState:         {"new_state", TypeText, func(_ Dialect, ch *Change) any { return string(ch.State) }},
	colAttempt:       {"new_attempt", TypeInt, func(_ Dialect, ch *Change) any { return int64(ch.NewAttempt) }},
	colRunAt:         {"new_run_at", TypeTime, func(d Dialect, ch *Change) any { return d.Time(ch.RunAt) }},
	colFinishedAt:    {"new_finished_at", TypeTime, func(d Dialect, ch *Change) any { return d.Time(ch.FinishedAt) }},
	colError: {"new_error", TypeJSON, func(_ Dialect, ch *Change) any {
		if ch.Err == "" {
			return nil
		}
		return ch.Err
	}},
	colResult: {"new_result", TypeBytes, func(_ Dialect, ch *Change) any {
		if ch.Result == nil {
			return nil
		}
		return ch.Result
	}},
	colSetResult: {"set_result", TypeInt, func(_ Dialect, ch *Change) any {
		if ch.SetResult {
			return int64(1)
		}
		return int64(0)
	}},
	colKind: {"new_kind", TypeText, func(_ Dialect, ch *Change) any {
		if ch.Kind == "" {
			return nil
		}
		return ch.Kind
	}},
	colArgs: {"new_args", TypeJSON, func(_ Dialect, ch *Change) any {
		if ch.Args == nil {
			return nil
		}
		return string(ch.Args)
	}},
}

// changeColNames lists the names of changeColumns in order.
var changeColNames = func() []string {
	names := make([]string, numChangeCols)
	for c := range changeColumns {
		names[c] = changeColumns[c].name
	}
	return names
}()

// changeSet writes the SET list of a batched change; ref renders a change
// column (a derived-table column or a bound parameter), called in textual
// order. version is the new version: "" for version + 1, else the
// expression to set.
func (s *Store) changeSet(b *builder, ref func(col changeCol) string, version string) {
	T := s.t.Jobs + "."
	if version == "" {
		version = T + "version + 1"
	}
	b.w("state = ", ref(colState), ", attempt = ", ref(colAttempt), ", run_at = COALESCE(", ref(colRunAt), ", ", T, "run_at), finished_at = ", ref(colFinishedAt),
		", lease_until = NULL, version = ", version, ", errors = CASE WHEN ", ref(colError), " IS NULL THEN ", T, "errors ELSE ")
	b.w(s.d.AppendJSON(T+"errors", ref(colError)))
	b.w(" END, result = CASE WHEN ", ref(colSetResult), " = 1 THEN ", ref(colResult), " ELSE ", T, "result END, kind = COALESCE(", ref(colKind), ", ", T,
		"kind), args = COALESCE(", ref(colArgs), ", ", T, "args)")
}

// changeFence writes the fence predicate; ref renders a change column.
func (s *Store) changeFence(b *builder, f fence, ref func(col changeCol) string) {
	T := s.t.Jobs + "."
	switch f {
	case fenceHolder:
		b.w(T, "state = 'running' AND ", T, "worker_id = ", ref(colFenceWorker), " AND ", T, "claim_seq = ", ref(colFenceClaimSeq))
	case fenceVersion:
		b.w(T, "version = ", ref(colFenceVersion))
	}
}

// applyChanges applies changes (distinct ids) under fence f plus the extra
// predicate (which may bind parameters through its builder), in as few
// statements as the dialect allows, and returns the ids that applied.
func (s *Store) applyChanges(ctx context.Context, c Conn, chs []Change, f fence, extra func(b *builder)) (map[int64]bool, error) {
	applied := make(map[int64]bool, len(chs))
	if len(chs) == 0 {
		return applied, nil
	}
	chunk := max(1, min(500, (s.d.MaxParams()-8)/int(numChangeCols)))
	for start := 0; start < len(chs); start += chunk {
		part := chs[start:min(len(chs), start+chunk)]
		if err := s.applyBatch(ctx, c, part, f, extra, applied); err != nil {
			return nil, err
		}
	}
	return applied, nil
}

func (s *Store) applyBatch(ctx context.Context, c Conn, part []Change, f fence, extra func(b *builder), applied map[int64]bool) error {
	T := s.t.Jobs
	b := newBuilder(s.d, len(part)*int(numChangeCols)+4)
	rows := make([][]string, len(part))
	for i := range part {
		row := make([]string, numChangeCols)
		for c, col := range changeColumns {
			row[c] = b.argT(col.value(s.d, &part[i]), col.typ)
		}
		rows[i] = row
	}
	vref := func(c changeCol) string { return "v." + changeColumns[c].name }
	// Without UPDATE … RETURNING, the statement stamps a random version
	// token on the rows it changes, and a read of the token in the same
	// transaction says which applied.
	ret, token := "", int64(0)
	set := &builder{d: s.d, args: b.args}
	if s.d.Returning(StmtUpdate) {
		ret = T + ".id"
		s.changeSet(set, vref, "")
	} else {
		token = versionToken()
		s.changeSet(set, vref, set.arg(token))
	}
	where := &builder{d: s.d, args: set.args}
	where.w(T, ".id = v.id AND ")
	s.changeFence(where, f, vref)
	if extra != nil {
		where.w(" AND ")
		extra(where)
	}
	q := s.d.UpdateFrom(T, "v", changeColNames, rows, set.String(), where.String(), ret)
	if ret != "" {
		ids, err := ScanIDs(c.Query(ctx, q, where.args...))
		for _, id := range ids {
			applied[id] = true
		}
		return err
	}
	return s.appliedByToken(ctx, c, q, where.args, part, token, applied)
}

// appliedByToken runs q, an UPDATE of the changes part that sets version to
// token, and marks the ids it changed in applied: all or none when the row
// count says so, else the rows now carrying the token.
func (s *Store) appliedByToken(ctx context.Context, c Conn, q string, args []any, part []Change, token int64, applied map[int64]bool) error {
	r, err := c.Exec(ctx, q, args...)
	if err != nil {
		return err
	}
	n, err := r.RowsAffected()
	if err != nil || n == 0 {
		return err
	}
	if int(n) == len(part) {
		for i := range part {
			applied[part[i].ID] = true
		}
		return nil
	}
	b := newBuilder(s.d, len(part)+1)
	b.w("SELECT id FROM ", s.t.Jobs, " WHERE version = ", b.arg(token), " AND id IN (")
	for i := range part {
		if i > 0 {
			b.w(",")
		}
		b.w(b.arg(part[i].ID))
	}
	b.w(")")
	ids, err := ScanIDs(c.Query(ctx, b.String(), b.args...))
	for _, id := range ids {
		applied[id] = true
	}
	return err
}

// versionToken is a random version to stamp on rows, to recognise them
// afterwards. It lies in [2^62, 2^62+2^61): far from the small counts
// version + 1 produces, with room to add to it.
func versionToken() int64 { return 1<<62 + rand.Int64N(1<<61) }

// Finish applies a batch of fenced outcomes in one transaction and returns
// one result per outcome in input order. An outcome whose fence fails
// (job not running under its worker id and claim_seq) reports Applied=false
// and changes nothing. An unknown outcome kind fails the whole call.
func (s *Store) Finish(ctx context.Context, outcomes []core.Outcome) ([]core.FinishResult, error) {
	if len(outcomes) == 0 {
		return []core.FinishResult{}, nil
	}
	var out []core.FinishResult
	err := s.tx(ctx, func(c Conn) (err error) {
		out, err = s.FinishOn(ctx, c, outcomes)
		return err
	})
	return out, err
}

// FinishOn is Finish on a caller-supplied connection or transaction, with
// no retries (core.TxCompleter uses it with the caller's transaction).
func (s *Store) FinishOn(ctx context.Context, c Conn, outcomes []core.Outcome) ([]core.FinishResult, error) {
	res := make([]core.FinishResult, len(outcomes))
	chs := make([]Change, len(outcomes))
	for i := range outcomes {
		res[i].JobID = outcomes[i].JobID
		ch, err := OutcomeChange(&outcomes[i])
		if err != nil {
			return nil, fmt.Errorf("sqlq: %w", err)
		}
		chs[i] = ch
	}
	// Rounds of distinct job ids, so a job named twice is applied in input
	// order (the second normally fails its fence).
	for _, now := range Rounds(len(outcomes), func(i int) int64 { return outcomes[i].JobID }) {
		var upd []Change
		var updIdx, delIdx []int
		for _, i := range now {
			if outcomes[i].Kind == core.OutcomeComplete && outcomes[i].Delete {
				delIdx = append(delIdx, i)
			} else {
				upd = append(upd, chs[i])
				updIdx = append(updIdx, i)
			}
		}
		applied, err := s.applyChanges(ctx, c, upd, fenceHolder, nil)
		if err != nil {
			return nil, err
		}
		for _, i := range updIdx {
			res[i].Applied = applied[outcomes[i].JobID]
		}
		if len(delIdx) > 0 {
			deleted, err := s.fencedDelete(ctx, c, outcomes, delIdx)
			if err != nil {
				return nil, err
			}
			for _, i := range delIdx {
				res[i].Applied = deleted[outcomes[i].JobID]
			}
		}
	}
	return res, nil
}

// OutcomeChange turns a finish outcome into a holder-fenced change: the
// state, attempt, run_at, finished_at, error entry, result and next kind and
// args the outcome's kind asks for. An unknown kind is an error.
func OutcomeChange(o *core.Outcome) (Change, error) {
	ch := Change{ID: o.JobID, Worker: o.WorkerID, ClaimSeq: o.ClaimSeq, NewAttempt: o.Attempt}
	if o.Error != nil {
		e, err := EncodeError(*o.Error)
		if err != nil {
			return ch, err
		}
		ch.Err = e
	}
	at := core.UTC(o.At)
	runAt := core.UTC(o.RunAt)
	dueState := func() core.State {
		if runAt.After(at) {
			return core.StateScheduled
		}
		return core.StateAvailable
	}
	switch o.Kind {
	case core.OutcomeComplete:
		ch.State, ch.FinishedAt = core.StateCompleted, at
		ch.Result, ch.SetResult = o.Result, true
	case core.OutcomeRetry:
		ch.State, ch.RunAt = core.StateRetryable, runAt
	case core.OutcomeSnooze:
		ch.State, ch.RunAt = dueState(), runAt
		ch.NewAttempt = max(0, o.Attempt-1)
	case core.OutcomeContinue:
		ch.State, ch.RunAt = dueState(), runAt
		ch.NewAttempt = 0
		ch.Kind = o.NextKind
		if o.NextArgs != nil {
			ch.Args = o.NextArgs
		}
	case core.OutcomeCancel:
		ch.State, ch.FinishedAt = core.StateCancelled, at
	case core.OutcomeDiscard:
		ch.State, ch.FinishedAt = core.StateDiscarded, at
	default:
		return ch, fmt.Errorf("job %d: unknown outcome kind %q", o.JobID, o.Kind)
	}
	if ch.RunAt.IsZero() && (o.Kind == core.OutcomeRetry || o.Kind == core.OutcomeSnooze || o.Kind == core.OutcomeContinue) {
		ch.RunAt = at // no RunAt given: due at once
	}
	return ch, nil
}

// fencedDelete deletes the completed-with-Delete outcomes whose fence holds
// and returns the deleted ids. The fence is primary-key lookups, then the
// fence as row values against a VALUES list, which the database turns into
// one indexed temporary list (a CASE per column would compare every row
// with every listed id, quadratic in the batch size). The id list must
// stay: row values alone make SQLite scan the table.
func (s *Store) fencedDelete(ctx context.Context, c Conn, outcomes []core.Outcome, idx []int) (map[int64]bool, error) {
	out := make(map[int64]bool, len(idx))
	chunk := max(1, min(500, (s.d.MaxParams()-4)/5))
	for start := 0; start < len(idx); start += chunk {
		part := idx[start:min(len(idx), start+chunk)]
		b := newBuilder(s.d, 4*len(part))
		b.w("DELETE FROM ", s.t.Jobs, " WHERE id IN (")
		for k, i := range part {
			if k > 0 {
				b.w(",")
			}
			b.w(b.argT(outcomes[i].JobID, TypeInt))
		}
		b.w(") AND state = 'running' AND (id, worker_id, claim_seq) IN (VALUES ")
		for k, i := range part {
			if k > 0 {
				b.w(",")
			}
			b.w("(", b.argT(outcomes[i].JobID, TypeInt), ",", b.argT(outcomes[i].WorkerID, TypeText), ",", b.argT(outcomes[i].ClaimSeq, TypeInt), ")")
		}
		b.w(") RETURNING id")
		ids, err := ScanIDs(c.Query(ctx, b.String(), b.args...))
		if err != nil {
			return nil, err
		}
		for _, id := range ids {
			out[id] = true
		}
	}
	return out, nil
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
func FinishRounds(ctx context.Context, c Conn, name string, outcomes []core.Outcome, chunk int,
	update, del func(ctx context.Context, c Conn, chs []Change, part []int) (map[int64]bool, error)) ([]core.FinishResult, error) {
	res := make([]core.FinishResult, len(outcomes))
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
			if o := &outcomes[i]; o.Kind == core.OutcomeComplete && o.Delete {
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
