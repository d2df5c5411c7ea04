package sqlq

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/backlogq/backlog/core/contract"
)

// Config assembles a Store.
type Config struct {
	Dialect Dialect // required
	DB      DB      // required
	Tables  Tables  // required

	// Strategy is the claim strategy; "" means contract.StrategyOptimistic.
	// contract.StrategySerialized is the store's own claim in one write
	// transaction (SQLite); sqlq runs no claim of its own for it.
	// contract.StrategySkipLocked needs a dialect whose LockSuffix(true) is
	// non-empty.
	Strategy contract.ClaimStrategy

	// Settle, when set, runs inside the transaction of each shared change
	// that ends jobs, after the change: Cancel, Delete of a job not yet
	// final, and the discards of Rescue, RescueWorkers and
	// DiscardExpired. A store whose database cannot settle dependants
	// (contract.Dependencies) by trigger settles them there; nil (the
	// default) runs nothing.
	Settle SettleFunc

	// DeleteEdges makes the shared changes that delete jobs (Prune,
	// Delete, PruneArchive) also delete, in their transaction, the
	// deleted jobs' own dependency edges (Tables.Deps rows whose job_id
	// they name); see ForgetEdges. False (the default) leaves that to the
	// database's triggers (SQLite, PostgreSQL).
	DeleteEdges bool
}

// Ended is a job a change ended: its id and its end, contract.StateCompleted,
// StateCancelled or StateDiscarded, or "" for a job deleted before it ended.
type Ended struct {
	ID    int64
	State contract.State
}

// SettleFunc settles the dependants of the jobs ended (distinct ids) on c,
// the transaction that ended them, at now (UTC; for Delete, which takes no
// time, the store's clock). An error rolls the change back.
type SettleFunc func(ctx context.Context, c Conn, ended []Ended, now time.Time) error

// Store implements the contract.Store methods the SQL stores share: all but
// Claim, Insert, Finish and ExtendLeases, which each store owns, and Close.
// A store embeds it, adds those, and overrides what else it runs itself.
// It is safe for concurrent use.
type Store struct {
	d        Dialect
	db       DB
	t        Tables
	strategy contract.ClaimStrategy
	retrier  Retrier // classifies errors with the dialect's Transient
	settle   SettleFunc
	edges    bool // Config.DeleteEdges

	// limitedSeen holds the queues this process last found limited
	// (queue name → struct{}): a hint of which claim path to try first
	// (LimitedHint). Claims stay correct without it: the path of
	// unlimited queues passes over limited ones, and the limited path
	// reads the limits under its lock.
	limitedSeen sync.Map
}

// New checks cfg and returns a Store. It returns an error wrapping
// core.ErrUnsupported for a strategy the dialect cannot run.
func New(cfg Config) (*Store, error) {
	if cfg.Dialect == nil || cfg.DB == nil {
		return nil, errors.New("sqlq: Config needs a Dialect and a DB")
	}
	if cfg.Tables.Jobs == "" || cfg.Tables.Queues == "" || cfg.Tables.Workers == "" || cfg.Tables.Holds == "" {
		return nil, errors.New("sqlq: Config needs the jobs, queues, workers and holds table names")
	}
	s := &Store{
		d: cfg.Dialect, db: cfg.DB, t: cfg.Tables, strategy: cfg.Strategy, settle: cfg.Settle, edges: cfg.DeleteEdges,
		retrier: Retrier{Transient: cfg.Dialect.Transient},
	}
	if s.strategy == "" {
		s.strategy = contract.StrategyOptimistic
	}
	switch s.strategy {
	case contract.StrategyOptimistic, contract.StrategySerialized:
	case contract.StrategySkipLocked:
		if s.d.LockSuffix(true) == "" {
			return nil, fmt.Errorf("sqlq: %s has no SKIP LOCKED: claim strategy %q: %w", s.d.Name(), s.strategy, contract.ErrUnsupported)
		}
	default:
		return nil, fmt.Errorf("sqlq: unknown claim strategy %q: %w", s.strategy, contract.ErrUnsupported)
	}
	return s, nil
}

// Strategy returns the claim strategy in use.
func (s *Store) Strategy() contract.ClaimStrategy { return s.strategy }

// retry runs fn with the store's Retrier.
func (s *Store) retry(ctx context.Context, fn func() error) error {
	return s.retrier.Do(ctx, fn)
}

// tx runs fn in a write transaction, retrying transient errors.
func (s *Store) tx(ctx context.Context, fn func(Conn) error) error {
	return s.retry(ctx, func() error { return s.db.InTx(ctx, fn) })
}

// ---- single jobs ----

// Get returns one job, or an error wrapping core.ErrNotFound.
func (s *Store) Get(ctx context.Context, id int64) (*contract.Job, error) {
	var j *contract.Job
	err := s.retry(ctx, func() (err error) {
		j, err = s.getOn(ctx, s.db, id)
		return err
	})
	return j, err
}

func (s *Store) getOn(ctx context.Context, c Conn, id int64) (*contract.Job, error) {
	b := newBuilder(s.d, 1)
	b.w("SELECT ", JobColumns, " FROM ", s.t.Jobs, " WHERE id = ", b.arg(id))
	jobs, err := ScanJobs(c.Query(ctx, b.String(), b.args...))
	if err != nil {
		return nil, err
	}
	if len(jobs) == 0 {
		return nil, fmt.Errorf("job %d: %w", id, contract.ErrNotFound)
	}
	return jobs[0], s.LoadDependsOn(ctx, c, jobs)
}

// getManyOn returns the jobs with the given ids, in the order of ids
// (missing ids are skipped).
func (s *Store) getManyOn(ctx context.Context, c Conn, ids []int64) ([]*contract.Job, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	byID := make(map[int64]*contract.Job, len(ids))
	chunk := max(1, min(1000, s.d.MaxParams()-1))
	for start := 0; start < len(ids); start += chunk {
		part := ids[start:min(len(ids), start+chunk)]
		b := newBuilder(s.d, len(part))
		b.w("SELECT ", JobColumns, " FROM ", s.t.Jobs, " WHERE id IN ").in(part)
		jobs, err := ScanJobs(c.Query(ctx, b.String(), b.args...))
		if err == nil {
			err = s.LoadDependsOn(ctx, c, jobs)
		}
		if err != nil {
			return nil, err
		}
		for _, j := range jobs {
			byID[j.ID] = j
		}
	}
	out := make([]*contract.Job, 0, len(ids))
	for _, id := range ids {
		if j, ok := byID[id]; ok {
			out = append(out, j)
		}
	}
	return out, nil
}

// updateOne runs an UPDATE (built by fn, without RETURNING) of one job and
// returns the job as it now is, or nil when no row matched.
func (s *Store) updateOne(ctx context.Context, c Conn, id int64, b *builder) (*contract.Job, error) {
	if s.d.Returning(StmtUpdate) {
		b.w(" RETURNING ", JobColumns)
		jobs, err := ScanJobs(c.Query(ctx, b.String(), b.args...))
		if err != nil || len(jobs) == 0 {
			return nil, err
		}
		return jobs[0], s.LoadDependsOn(ctx, c, jobs)
	}
	res, err := c.Exec(ctx, b.String(), b.args...)
	if err != nil {
		return nil, err
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		return nil, err
	}
	return s.getOn(ctx, c, id)
}

// Cancel moves a job not in a final state to cancelled (FinishedAt=now,
// lease cleared) and returns it; ErrInvalidState for a final job,
// ErrNotFound for a missing one.
func (s *Store) Cancel(ctx context.Context, id int64, now time.Time) (*contract.Job, error) {
	var out *contract.Job
	err := s.tx(ctx, func(c Conn) error {
		b := newBuilder(s.d, 2)
		b.w("UPDATE ", s.t.Jobs, " SET state = 'cancelled', finished_at = ", b.arg(s.d.Time(now)),
			", lease_until = NULL, version = version + 1 WHERE id = ", b.arg(id), " AND state NOT IN ", finalIn)
		j, err := s.updateOne(ctx, c, id, b)
		if err != nil {
			return err
		}
		if j == nil {
			cur, err := s.getOn(ctx, c, id)
			if err != nil {
				return err
			}
			return fmt.Errorf("cancel job %d in state %s: %w", id, cur.State, contract.ErrInvalidState)
		}
		out = j
		return s.settled(ctx, c, []Ended{{ID: id, State: contract.StateCancelled}}, now)
	})
	return out, err
}

// Retry makes a job that is not running available now (RunAt=now,
// FinishedAt and lease cleared; MaxAttempts raised to Attempt+1 when its
// attempts are used up) and returns it. Running jobs return
// ErrInvalidState, as do waiting ones (they would run before their
// dependencies), as does a job with a unique key whose hold has passed
// to another job. The job's hold is locked first, so no insert takes it
// over while the job becomes live again.
func (s *Store) Retry(ctx context.Context, id int64, now time.Time) (*contract.Job, error) {
	var out *contract.Job
	err := s.tx(ctx, func(c Conn) error {
		owned, err := s.holdOwned(ctx, c, id)
		if err != nil {
			return err
		}
		if !owned {
			cur, err := s.getOn(ctx, c, id)
			if err != nil {
				return err
			}
			if cur.UniqueKey != "" && cur.State != contract.StateRunning {
				return fmt.Errorf("retry job %d: its unique key %q has passed to another job: %w", id, cur.UniqueKey, contract.ErrInvalidState)
			}
		}
		b := newBuilder(s.d, 2)
		b.w("UPDATE ", s.t.Jobs, " SET state = 'available', run_at = ", b.arg(s.d.Time(now)),
			", finished_at = NULL, lease_until = NULL, max_attempts = CASE WHEN attempt >= max_attempts THEN attempt + 1 ELSE max_attempts END",
			", version = version + 1 WHERE id = ", b.arg(id), " AND state NOT IN ('running','waiting')")
		j, err := s.updateOne(ctx, c, id, b)
		if err != nil {
			return err
		}
		if j == nil {
			cur, err := s.getOn(ctx, c, id)
			if err != nil {
				return err
			}
			return fmt.Errorf("retry job %d in state %s: %w", id, cur.State, contract.ErrInvalidState)
		}
		out = j
		return nil
	})
	return out, err
}

// Delete removes a job that is not running; ErrInvalidState for a running
// job, ErrNotFound for a missing one. A final job's unique key stays held
// until FinishedAt + UniqueFor (ReleaseHolds, in the same transaction);
// the key of a job not yet final is freed.
func (s *Store) Delete(ctx context.Context, id int64) error {
	return s.tx(ctx, func(c Conn) error {
		owned, err := s.holdOwned(ctx, c, id)
		if err != nil {
			return err
		}
		b := newBuilder(s.d, 1)
		b.w("SELECT ", JobColumns, " FROM ", s.t.Jobs, " WHERE id = ", b.arg(id), s.d.LockSuffix(false))
		jobs, err := ScanJobs(c.Query(ctx, b.String(), b.args...))
		if err != nil {
			return err
		}
		if len(jobs) == 0 {
			return fmt.Errorf("job %d: %w", id, contract.ErrNotFound)
		}
		j := jobs[0]
		if j.State == contract.StateRunning {
			return fmt.Errorf("delete job %d: it is running (cancel it first): %w", id, contract.ErrInvalidState)
		}
		b = newBuilder(s.d, 1)
		b.w("DELETE FROM ", s.t.Jobs, " WHERE id = ", b.arg(id))
		if _, err := c.Exec(ctx, b.String(), b.args...); err != nil {
			return err
		}
		if !j.State.Final() {
			if err := s.settled(ctx, c, []Ended{{ID: id}}, contract.UTC(time.Now())); err != nil {
				return err
			}
		}
		if j.DependsOn != nil { // dep_count > 0
			if err := s.forgetEdges(ctx, c, []int64{id}); err != nil {
				return err
			}
		}
		if !owned {
			return nil
		}
		var fin time.Time
		if j.State.Final() {
			fin = j.FinishedAt
		}
		return s.ReleaseHolds(ctx, c, []Release{{JobID: id, FinishedAt: fin}})
	})
}

// settled runs the Config's Settle, if any, for the jobs ended.
func (s *Store) settled(ctx context.Context, c Conn, ended []Ended, now time.Time) error {
	if s.settle == nil || len(ended) == 0 {
		return nil
	}
	return s.settle(ctx, c, ended, now)
}

// ---- listing and counting ----

// List and ListPage live in list.go.

// Stats returns per-queue counts by state and pause flags for every queue
// with jobs or a persisted pause, ordered by queue name.
func (s *Store) Stats(ctx context.Context) ([]contract.QueueStats, error) {
	var out []contract.QueueStats
	err := s.retry(ctx, func() error {
		out = nil
		byName := map[string]*contract.QueueStats{}
		get := func(q string) *contract.QueueStats {
			st, ok := byName[q]
			if !ok {
				st = &contract.QueueStats{Queue: q, Counts: map[contract.State]int{}}
				byName[q] = st
			}
			return st
		}
		rows, err := s.db.Query(ctx, "SELECT queue, state, COUNT(*) FROM "+s.t.Jobs+" GROUP BY queue, state")
		if err != nil {
			return err
		}
		for rows.Next() {
			var q, state string
			var n int64
			if err := rows.Scan(&q, &state, &n); err != nil {
				rows.Close()
				return err
			}
			get(q).Counts[contract.State(state)] = int(n)
		}
		if err := rows.Err(); err != nil {
			rows.Close()
			return err
		}
		rows.Close()
		b := newBuilder(s.d, 1)
		b.w("SELECT name FROM ", s.t.Queues, " WHERE paused = ", b.arg(true))
		rows, err = s.db.Query(ctx, b.String(), b.args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var q string
			if err := rows.Scan(&q); err != nil {
				return err
			}
			get(q).Paused = true
		}
		if err := rows.Err(); err != nil {
			return err
		}
		for _, st := range byName {
			out = append(out, *st)
		}
		sortStats(out)
		return nil
	})
	return out, err
}

// ---- queues ----

// PauseQueue persists a pause of queue (creating its record); idempotent.
func (s *Store) PauseQueue(ctx context.Context, queue string, now time.Time) error {
	return s.setPaused(ctx, queue, now, true)
}

// ResumeQueue lifts a pause of queue; a no-op when it is not paused.
func (s *Store) ResumeQueue(ctx context.Context, queue string, now time.Time) error {
	return s.setPaused(ctx, queue, now, false)
}

func (s *Store) setPaused(ctx context.Context, queue string, now time.Time, paused bool) error {
	return s.tx(ctx, func(c Conn) error {
		if paused {
			verb, suffix := s.d.InsertIgnore()
			b := newBuilder(s.d, 3)
			b.w(verb, " ", s.t.Queues, " (name, paused, updated_at) VALUES (", b.arg(queue), ", ", b.arg(true), ", ", b.arg(s.d.Time(now)), ")", suffix)
			res, err := c.Exec(ctx, b.String(), b.args...)
			if err != nil {
				return err
			}
			if n, err := res.RowsAffected(); err != nil || n > 0 {
				return err
			}
		}
		b := newBuilder(s.d, 4)
		b.w("UPDATE ", s.t.Queues, " SET paused = ", b.arg(paused), ", updated_at = ", b.arg(s.d.Time(now)),
			" WHERE name = ", b.arg(queue), " AND paused <> ", b.arg(paused))
		_, err := c.Exec(ctx, b.String(), b.args...)
		return err
	})
}
