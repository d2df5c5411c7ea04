package sqlq

import (
	"context"
	"math/rand/v2"
)

// This file applies batches of Changes fenced by version, for Rescue,
// RescueWorkers and DiscardExpired (rescue.go): one UPDATE of the jobs
// table joined by primary key with a derived table of the changes
// (Dialect.UpdateFrom), changing a row only while its version is still the
// one its change read.

// changeCol is a column of the derived table a batched change joins with
// the jobs table: one row per Change.
type changeCol int

const (
	colID           changeCol = iota // Change.ID
	colFenceVersion                  // Change.Version
	colState                         // Change.State
	colAttempt                       // Change.NewAttempt
	colRunAt                         // Change.RunAt; NULL keeps run_at
	colFinishedAt                    // Change.FinishedAt; NULL clears finished_at
	colError                         // Change.Err; NULL appends nothing
	colResult                        // Change.Result
	colSetResult                     // 1 when Change.SetResult, else 0
	colKind                          // Change.Kind; NULL keeps kind
	colArgs                          // Change.Args; NULL keeps args
	numChangeCols
)

// changeColumns gives each change column its name in the derived table,
// its parameter type and its value for one change.
var changeColumns = [numChangeCols]struct {
	name  string
	typ   Type
	value func(d Dialect, ch *Change) any
}{
	colID:           {"id", TypeInt, func(_ Dialect, ch *Change) any { return ch.ID }},
	colFenceVersion: {"fence_version", TypeInt, func(_ Dialect, ch *Change) any { return ch.Version }},
	colState:        {"new_state", TypeText, func(_ Dialect, ch *Change) any { return string(ch.State) }},
	colAttempt:      {"new_attempt", TypeInt, func(_ Dialect, ch *Change) any { return int64(ch.NewAttempt) }},
	colRunAt:        {"new_run_at", TypeTime, func(d Dialect, ch *Change) any { return d.Time(ch.RunAt) }},
	colFinishedAt:   {"new_finished_at", TypeTime, func(d Dialect, ch *Change) any { return d.Time(ch.FinishedAt) }},
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
	// A continuation (the only change with a kind) starts the next step
	// without the checkpoint of the one before.
	b.w(", checkpoint = CASE WHEN ", ref(colKind), " IS NULL THEN ", T, "checkpoint ELSE NULL END")
}

// applyChanges applies changes (distinct ids) to the rows whose version is
// still Change.Version and that match the extra predicate (which may bind
// parameters through its builder), in as few statements as the dialect
// allows, and returns the ids that applied.
func (s *Store) applyChanges(ctx context.Context, c Conn, chs []Change, extra func(b *builder)) (map[int64]bool, error) {
	applied := make(map[int64]bool, len(chs))
	if len(chs) == 0 {
		return applied, nil
	}
	chunk := max(1, min(500, (s.d.MaxParams()-8)/int(numChangeCols)))
	for start := 0; start < len(chs); start += chunk {
		part := chs[start:min(len(chs), start+chunk)]
		if err := s.applyBatch(ctx, c, part, extra, applied); err != nil {
			return nil, err
		}
	}
	return applied, nil
}

func (s *Store) applyBatch(ctx context.Context, c Conn, part []Change, extra func(b *builder), applied map[int64]bool) error {
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
	where.w(T, ".id = v.id AND ", T, ".version = ", vref(colFenceVersion))
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
