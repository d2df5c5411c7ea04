package mysql

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/backlogq/backlog/core/contract"

	"github.com/go-sql-driver/mysql"

	"github.com/backlogq/backlog/store/internal/sqlq"
)

// MySQL and MariaDB have no LISTEN/NOTIFY, so the store implements
// contract.Notifier by polling, cheaply:
//
//   - Inserts write nothing extra. A poller reads the jobs inserted since
//     its last read, SELECT id, queue, state FROM jobs WHERE id > ? ORDER BY
//     id LIMIT n, a primary-key range read that finds nothing while nothing
//     is inserted, and notifies the queues that received jobs still
//     available (due and unclaimed), as the PostgreSQL store notifies the
//     queues that received due jobs.
//   - Auto-increment ids are handed out at insert time but become visible at
//     commit, so a transaction that inserted before another and commits after
//     it shows up below the highest id already read. The poller remembers the
//     ids it passed over (the gaps) and looks them up again for a grace
//     period (notifyGapGrace) before giving up on them; most gaps are ids of
//     rolled-back inserts, ignored duplicates or jobs already finished and
//     deleted, and they simply expire.
//   - Pause, resume, cancel and Retry are rare. Each
//     writes a row to the notifications table in the same transaction as the
//     change, and the poller reads that table the same way (id > ?, gaps
//     remembered too). The table holds about a minute of rows: writers prune
//     older ones every half minute at most.
//
// One poller per Store serves every Listen call on it (the engine's client,
// the HTTP API's long-polls, …), on a connection of its own: one statement
// per tick reads both tables (and the gaps, when there are any). It runs only
// while someone listens.

// DefaultNotifyInterval is how often the poller of a Store reads what was
// inserted and notified since its last read, while anyone listens.
const DefaultNotifyInterval = 10 * time.Millisecond

const (
	// notifyJobsBatch and notifyNotesBatch bound the rows one read takes
	// from the jobs and notifications tables; a poller that gets a full
	// batch reads again at once (up to notifyRounds times per tick).
	notifyJobsBatch  = 1000
	notifyNotesBatch = 100
	notifyRounds     = 8

	// notifyGapGrace is how long an id the poller passed over is looked up
	// again: an insert whose transaction commits later than that after a
	// later insert committed wakes nobody (its job waits for the engine's
	// poll, 1 s by default).
	notifyGapGrace = 2 * time.Second
	// notifyGapMax bounds the ids remembered per table (the oldest are
	// dropped first), and so the lookups of one read.
	notifyGapMax = 256
	// notifyGapEvery is how often remembered ids are looked up again.
	notifyGapEvery = 50 * time.Millisecond

	// notifyKeep is how long rows stay in the notifications table;
	// notifyPruneEvery how often (in callers' time) one Store prunes it.
	notifyKeep       = time.Minute
	notifyPruneEvery = 30 * time.Second

	// listenBuffer is the channel buffer of one Listen call. A listener
	// whose buffer is full misses notifications (the engine still polls);
	// it never holds up the poller or the other listeners.
	listenBuffer = 64
)

// errNoSuchTable is ER_NO_SUCH_TABLE: a schema older than version 5 has no
// notifications table.
const errNoSuchTable = 1146

// Listen implements contract.Notifier. The channel receives NotifyInsert for
// queues that received due jobs (from this or any other process, through
// Insert or a committed InsertTx, and from Retry), NotifyPause and
// NotifyResume, and NotifyCancel for every cancelled job,
// within about one notify interval (WithNotifyInterval, default 10 ms) of
// the commit. It starts at the present: nothing committed before Listen
// returns is delivered again. The channel closes when ctx ends, when the
// store is closed, or when the poller's connection fails (the engine then
// listens again and wakes its queues in case it missed something).
//
// With WithNotifyInterval(0) (URL notify_interval=0 or off) Listen returns an
// error wrapping core.ErrUnsupported, on which the engine stops listening and
// relies on its poll interval.
func (s *Store) Listen(ctx context.Context) (<-chan contract.Notification, error) {
	if s.closed.Load() {
		return nil, contract.ErrClosed
	}
	if s.notifyEvery <= 0 {
		return nil, fmt.Errorf("mysql: notifications are off (notify_interval=0): %w", contract.ErrUnsupported)
	}
	h := &s.hub
	h.mu.Lock()
	defer h.mu.Unlock()
	if s.closed.Load() {
		return nil, contract.ErrClosed
	}
	if h.poll == nil {
		p, err := s.startPoller(ctx)
		if err != nil {
			return nil, fmt.Errorf("mysql: listen: %w", err)
		}
		h.poll = p
	}
	p := h.poll
	ch := make(chan contract.Notification, listenBuffer)
	if h.listeners == nil {
		h.listeners = map[chan contract.Notification]struct{}{}
	}
	h.listeners[ch] = struct{}{}
	go func() {
		select {
		case <-ctx.Done():
		case <-p.done: // the poller closed every channel
			return
		}
		h.mu.Lock()
		defer h.mu.Unlock()
		if _, ok := h.listeners[ch]; !ok {
			return
		}
		delete(h.listeners, ch)
		close(ch)
		if len(h.listeners) == 0 && h.poll != nil {
			h.poll.cancel() // nobody listens: stop reading
			h.poll = nil
		}
	}()
	return ch, nil
}

// hub is the Store's listeners and the poller serving them.
type hub struct {
	mu        sync.Mutex
	listeners map[chan contract.Notification]struct{}
	poll      *poller // nil while nobody listens
}

// send delivers notes to every listener without blocking.
func (h *hub) send(notes []contract.Notification) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for ch := range h.listeners {
		for _, n := range notes {
			select {
			case ch <- n:
			default: // this listener is behind; it will poll
			}
		}
	}
}

// end closes every listener's channel and forgets p, if p is still the
// running poller.
func (h *hub) end(p *poller) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.poll != p {
		return
	}
	h.poll = nil
	for ch := range h.listeners {
		delete(h.listeners, ch)
		close(ch)
	}
}

// closeAll is the Store's Close: it stops the poller, closes every
// channel, and waits for the poller to let go of its connection.
func (h *hub) closeAll() {
	h.mu.Lock()
	p := h.poll
	h.poll = nil
	for ch := range h.listeners {
		delete(h.listeners, ch)
		close(ch)
	}
	h.mu.Unlock()
	if p != nil {
		p.cancel()
		<-p.done
	}
}

// poller reads new job ids and notification rows for a Store's listeners.
type poller struct {
	s      *Store
	own    *sql.DB // a pool of one connection made for the poller; nil with New
	conn   *sql.Conn
	stmt   *sql.Stmt // the read without gaps, prepared on conn
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}

	jobs, notes cursor
	gapsAt      time.Time // when remembered ids are next looked up
}

// startPoller connects, reads where both tables end and starts polling.
// The caller holds s.hub.mu.
func (s *Store) startPoller(ctx context.Context) (*poller, error) {
	p := &poller{s: s, done: make(chan struct{})}
	var err error
	if s.connector != nil {
		// A connection of its own, not one of the pool's, so a saturated
		// pool never delays a wake-up and the poller takes no slot from
		// claims.
		p.own = sql.OpenDB(s.connector)
		p.own.SetMaxOpenConns(1)
		p.conn, err = p.own.Conn(ctx)
	} else {
		p.conn, err = s.db.Conn(ctx)
	}
	if err == nil {
		err = p.init(ctx)
	}
	if err != nil {
		p.close()
		return nil, err
	}
	p.ctx, p.cancel = context.WithCancel(context.Background())
	go p.run()
	return p, nil
}

// init reads the highest ids of both tables (where the poller starts: it
// never replays what committed before) and the auto-increment step, and
// prepares the read.
func (p *poller) init(ctx context.Context) error {
	var inc int64
	err := p.conn.QueryRowContext(ctx, "SELECT COALESCE((SELECT MAX(id) FROM "+p.s.t.Jobs+"), 0), COALESCE((SELECT MAX(id) FROM "+p.s.notesTable()+"), 0), @@auto_increment_increment").
		Scan(&p.jobs.high, &p.notes.high, &inc)
	if err != nil {
		return err
	}
	p.jobs.setStep(inc)
	p.notes.setStep(inc)
	p.stmt, err = p.conn.PrepareContext(ctx, p.query(nil, nil))
	return err
}

// query returns the one statement of a read: the jobs and notification rows
// above the highest ids seen, in id order, and the rows of the remembered
// ids jobGaps and noteGaps. Column 1 says which table a row is from.
func (p *poller) query(jobGaps, noteGaps []int64) string {
	jobs, notes := p.s.t.Jobs, p.s.notesTable()
	var b strings.Builder
	b.WriteString("(SELECT 0 AS src, id, queue, state AS what, 0 AS job_id FROM " + jobs + " WHERE id > ? ORDER BY id LIMIT " + strconv.Itoa(notifyJobsBatch) + ")")
	b.WriteString(" UNION ALL (SELECT 1, id, queue, kind, COALESCE(job_id, 0) FROM " + notes + " WHERE id > ? ORDER BY id LIMIT " + strconv.Itoa(notifyNotesBatch) + ")")
	if len(jobGaps) > 0 {
		b.WriteString(" UNION ALL (SELECT 0, id, queue, state, 0 FROM " + jobs + " WHERE id IN (" + idList(jobGaps) + "))")
	}
	if len(noteGaps) > 0 {
		b.WriteString(" UNION ALL (SELECT 1, id, queue, kind, COALESCE(job_id, 0) FROM " + notes + " WHERE id IN (" + idList(noteGaps) + "))")
	}
	return b.String()
}

// idList renders ids as SQL integer literals, comma-separated.
func idList(ids []int64) string {
	b := make([]byte, 0, 12*len(ids))
	for i, id := range ids {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, id, 10)
	}
	return string(b)
}

func (p *poller) close() {
	if p.stmt != nil {
		p.stmt.Close()
	}
	if p.conn != nil {
		p.conn.Close()
	}
	if p.own != nil {
		p.own.Close()
	}
}

// run reads every notify interval until cancelled or a read fails, which
// closes every listener's channel.
func (p *poller) run() {
	defer close(p.done)
	defer p.close()
	t := time.NewTicker(p.s.notifyEvery)
	defer t.Stop()
	for {
		select {
		case <-p.ctx.Done():
			return
		case <-t.C:
		}
		if p.s.closed.Load() {
			p.s.hub.end(p)
			return
		}
		notes, err := p.read(time.Now())
		if err != nil {
			p.s.hub.end(p) // the engine listens again (on a new connection)
			return
		}
		if len(notes) > 0 {
			p.s.hub.send(notes)
		}
	}
}

// read runs one tick's reads and returns what to deliver.
func (p *poller) read(now time.Time) ([]contract.Notification, error) {
	// No timeout per read (a timer per tick costs CPU): a read that hangs
	// delays nothing but wake-ups, the engine polls meanwhile, and
	// cancelling p.ctx (the last listener leaving, Close) aborts it.
	ctx := p.ctx
	var out []contract.Notification
	inserted := map[string]bool{}
	for round := 0; round < notifyRounds; round++ {
		var jobGaps, noteGaps []int64
		if !now.Before(p.gapsAt) {
			p.jobs.expire(now)
			p.notes.expire(now)
			jobGaps, noteGaps = p.jobs.ids(), p.notes.ids()
			p.gapsAt = now.Add(notifyGapEvery)
		}
		var rows *sql.Rows
		var err error
		if len(jobGaps) == 0 && len(noteGaps) == 0 {
			rows, err = p.stmt.QueryContext(ctx, p.jobs.high, p.notes.high)
		} else {
			rows, err = p.conn.QueryContext(ctx, p.query(jobGaps, noteGaps), p.jobs.high, p.notes.high)
		}
		if err != nil {
			return nil, err
		}
		type row struct {
			id, jobID int64
			queue     string
			what      string
		}
		var jobRows, noteRows []row
		for rows.Next() {
			var src int
			var r row
			if err := rows.Scan(&src, &r.id, &r.queue, &r.what, &r.jobID); err != nil {
				rows.Close()
				return nil, err
			}
			if src == 0 {
				jobRows = append(jobRows, r)
			} else {
				noteRows = append(noteRows, r)
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, err
		}
		byID := func(a, b row) int { return cmp.Compare(a.id, b.id) }
		slices.SortFunc(jobRows, byID)
		slices.SortFunc(noteRows, byID)
		jobsHigh, notesHigh := p.jobs.high, p.notes.high
		newJobs, newNotes := 0, 0
		for _, r := range jobRows {
			if r.id > jobsHigh {
				newJobs++
			}
			if p.jobs.see(r.id, now) && r.what == string(contract.StateAvailable) && !inserted[r.queue] {
				inserted[r.queue] = true
				out = append(out, contract.Notification{Kind: contract.NotifyInsert, Queue: r.queue})
			}
		}
		for _, r := range noteRows {
			if r.id > notesHigh {
				newNotes++
			}
			if !p.notes.see(r.id, now) {
				continue
			}
			switch k := contract.NotificationKind(r.what); k {
			case contract.NotifyInsert:
				if !inserted[r.queue] {
					inserted[r.queue] = true
					out = append(out, contract.Notification{Kind: k, Queue: r.queue})
				}
			case contract.NotifyPause, contract.NotifyResume:
				out = append(out, contract.Notification{Kind: k, Queue: r.queue})
			case contract.NotifyCancel:
				out = append(out, contract.Notification{Kind: k, Queue: r.queue, JobID: r.jobID})
			}
		}
		if newJobs < notifyJobsBatch && newNotes < notifyNotesBatch {
			break
		}
	}
	return out, nil
}

// cursor is where a poller stands in one table: the highest id read, and
// the ids below it not read yet (gaps), each looked up again until its
// deadline.
type cursor struct {
	high int64
	gaps []gap // ascending by id, and so by deadline
	// step is the server's auto_increment_increment. Above 1 (Galera,
	// multi-primary Group Replication), ids of one node are step apart,
	// and ids between them that no node hands out would be gaps forever; so
	// only ids whose residue modulo step has been seen count as gaps.
	step     int64
	residues map[int64]bool
}

type gap struct {
	id    int64
	until time.Time
}

func (c *cursor) setStep(step int64) {
	c.step = max(step, 1)
	c.residues = map[int64]bool{}
	if c.high > 0 {
		c.residues[c.high%c.step] = true
	}
}

// see records that id was read at now and reports whether it is news:
// above the highest id read (the ids passed over become gaps) or one of the
// gaps. Ids above the highest must be seen in ascending order.
func (c *cursor) see(id int64, now time.Time) bool {
	if c.step == 0 {
		c.setStep(1)
	}
	if id <= c.high {
		i, found := slices.BinarySearchFunc(c.gaps, id, func(g gap, id int64) int { return cmp.Compare(g.id, id) })
		if !found {
			return false
		}
		c.gaps = slices.Delete(c.gaps, i, i+1)
		return true
	}
	c.residues[id%c.step] = true
	// Only the ids nearest to id can still be in flight in any number;
	// remember at most notifyGapMax of them.
	from := max(c.high+1, id-notifyGapMax*c.step)
	until := now.Add(notifyGapGrace)
	for g := from; g < id; g++ {
		if c.residues[g%c.step] {
			c.gaps = append(c.gaps, gap{id: g, until: until})
		}
	}
	if n := len(c.gaps) - notifyGapMax; n > 0 {
		c.gaps = slices.Delete(c.gaps, 0, n)
	}
	c.high = id
	return true
}

// expire forgets the gaps whose grace ended before now.
func (c *cursor) expire(now time.Time) {
	i := 0
	for i < len(c.gaps) && c.gaps[i].until.Before(now) {
		i++
	}
	c.gaps = slices.Delete(c.gaps, 0, i)
}

// ids returns the gaps' ids.
func (c *cursor) ids() []int64 {
	out := make([]int64, len(c.gaps))
	for i, g := range c.gaps {
		out[i] = g.id
	}
	return out
}

// notesTable is the notifications table's name.
func (s *Store) notesTable() string { return s.prefix + "notifications" }

// ---- writing notifications ----

// txHookKey carries a txHook in the context of a call of the shared SQL.
type txHookKey struct{}

// txHook runs inside the transaction of a change, after its statements
// succeeded, on the same connection.
type txHook func(ctx context.Context, c sqlq.Conn) error

// hookDB is the DB the shared SQL (sqlq) runs on: the store's guarded pool,
// whose InTx also runs the txHook its context carries, inside the same
// transaction and only when the change itself succeeded. That is how
// PauseQueue, ResumeQueue, Cancel and Retry, written once in sqlq for every
// SQL store, write their notification row in their own transaction here: a
// rolled-back or retried change writes no row, or writes it again with the
// change.
type hookDB struct{ *sqlq.GuardedDB }

func (d hookDB) InTx(ctx context.Context, fn func(sqlq.Conn) error) error {
	h, _ := ctx.Value(txHookKey{}).(txHook)
	if h == nil {
		return d.GuardedDB.InTx(ctx, fn)
	}
	return d.GuardedDB.InTx(ctx, func(c sqlq.Conn) error {
		if err := fn(c); err != nil {
			return err
		}
		return h(ctx, c)
	})
}

// note writes a notification row with the statement stmt (an INSERT into
// the notifications table). A schema older than version 5 (a store opened
// with WithMigrate(false) before the migration ran) has no table: the change
// then goes ahead without it, as before. Inside a transaction MySQL undoes
// only the failed statement.
func note(ctx context.Context, c sqlq.Conn, stmt string, args ...any) error {
	_, err := c.Exec(ctx, stmt, args...)
	var me *mysql.MySQLError
	if errors.As(err, &me) && me.Number == errNoSuchTable {
		return nil
	}
	return err
}

// withNote returns ctx carrying a hook that runs stmt with args.
func withNote(ctx context.Context, stmt string, args ...any) context.Context {
	return context.WithValue(ctx, txHookKey{}, txHook(func(ctx context.Context, c sqlq.Conn) error {
		return note(ctx, c, stmt, args...)
	}))
}

// PauseQueue persists a pause of queue (creating its record if needed) and,
// in the same transaction, notifies listeners; idempotent.
func (s *Store) PauseQueue(ctx context.Context, queue string, now time.Time) error {
	err := s.Store.PauseQueue(withNote(ctx, "INSERT INTO "+s.notesTable()+" (kind, queue, created_at) VALUES ('pause', ?, ?)", queue, s.d.Time(now)), queue, now)
	if err == nil {
		s.pruneNotes(ctx, now)
	}
	return err
}

// ResumeQueue lifts a pause of queue and, in the same transaction, notifies
// listeners; a no-op (but still a notification) when it is not paused.
func (s *Store) ResumeQueue(ctx context.Context, queue string, now time.Time) error {
	err := s.Store.ResumeQueue(withNote(ctx, "INSERT INTO "+s.notesTable()+" (kind, queue, created_at) VALUES ('resume', ?, ?)", queue, s.d.Time(now)), queue, now)
	if err == nil {
		s.pruneNotes(ctx, now)
	}
	return err
}

// Cancel moves a job not in a final state to cancelled (FinishedAt=now,
// lease cleared) and returns it; ErrInvalidState for a final job,
// ErrNotFound for a missing one. Listeners are told of every cancel, in the
// same transaction, so the node running the job, if any, can stop it.
func (s *Store) Cancel(ctx context.Context, id int64, now time.Time) (*contract.Job, error) {
	j, err := s.Store.Cancel(withNote(ctx, "INSERT INTO "+s.notesTable()+" (kind, queue, job_id, created_at) SELECT 'cancel', queue, id, ? FROM "+s.t.Jobs+" WHERE id = ?",
		s.d.Time(now), id), id, now)
	if err == nil {
		s.pruneNotes(ctx, now)
	}
	return j, err
}

// Retry makes a job that is not running available now (RunAt=now,
// FinishedAt and lease cleared; MaxAttempts raised to Attempt+1 when its
// attempts are used up), returns it, and in the same transaction wakes the
// listeners of its queue. Running jobs return ErrInvalidState, as does a
// final job whose unique key is now held by another live job; missing ones
// ErrNotFound.
func (s *Store) Retry(ctx context.Context, id int64, now time.Time) (*contract.Job, error) {
	j, err := s.Store.Retry(withNote(ctx, "INSERT INTO "+s.notesTable()+" (kind, queue, job_id, created_at) SELECT 'insert', queue, id, ? FROM "+s.t.Jobs+" WHERE id = ?",
		s.d.Time(now), id), id, now)
	if err == nil {
		s.pruneNotes(ctx, now)
	}
	return j, err
}

// pruneNotes deletes notification rows older than notifyKeep before now,
// at most once per notifyPruneEvery of callers' time per Store, keeping the
// newest row. It is best effort: a failure leaves the rows for next time.
func (s *Store) pruneNotes(ctx context.Context, now time.Time) {
	at := now.UnixMicro()
	last := s.prunedAt.Load()
	if d := at - last; d < notifyPruneEvery.Microseconds() && d > -notifyPruneEvery.Microseconds() {
		return
	}
	if !s.prunedAt.CompareAndSwap(last, at) {
		return
	}
	var newest sql.NullInt64
	if err := s.db.QueryRowContext(ctx, "SELECT MAX(id) FROM "+s.notesTable()).Scan(&newest); err != nil || !newest.Valid {
		return
	}
	_, _ = s.db.ExecContext(ctx, "DELETE FROM "+s.notesTable()+" WHERE id < ? AND created_at < ? ORDER BY id LIMIT 1000",
		newest.Int64, s.d.Time(now.Add(-notifyKeep)))
}
