package postgres

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/backlogq/backlog/core/contract"

	"github.com/jackc/pgx/v5"
)

// Notifications travel on the channel "backlog_<schema>" with payloads
// "insert <queue>", "pause <queue>", "resume <queue>", "cancel <job id>"
// and "finish <job id>,<job id>,…" (at most 300 ids); "probe <hex>" is a
// Listen's check of its own connection, which every listener ignores.

// listenProbeWait bounds how long Listen waits for its own probe
// notification before it concludes that LISTEN does not hold on its
// connection.
const listenProbeWait = 5 * time.Second

// Listen opens a dedicated connection (not one of the pool's; the one
// WithListenConnString names, if any), LISTENs on the schema's channel and
// delivers notifications sent by any store on the same schema until ctx
// ends or the store is closed; then it closes the channel. When the
// connection drops, the channel closes too (the engine then listens again
// and wakes its queues in case it missed something). Delivery is best
// effort.
//
// Before it returns, Listen sends a probe notification through the pool
// and waits (at most 5 s) until its own connection hears it: behind a
// transaction pooler a LISTEN is accepted and then hears nothing, since
// the client holds no server session between transactions. A probe that
// does not arrive is an error wrapping core.ErrUnsupported, which says so;
// the engine logs it and wakes on its poll interval instead of waiting for
// notifications that never come.
//
// In poll-only mode (WithNotify(false)), and behind a transaction pooler
// (WithPooler(PoolerTransaction)) without a listen connection string,
// Listen returns an error wrapping core.ErrUnsupported at once.
func (s *Store) Listen(ctx context.Context) (<-chan contract.Notification, error) {
	if s.closed.Load() {
		return nil, contract.ErrClosed
	}
	if !s.notify {
		return nil, fmt.Errorf("postgres: notifications are off (poll-only mode): %w", contract.ErrUnsupported)
	}
	cfg := s.listen
	if cfg == nil {
		if s.pooler == PoolerTransaction {
			return nil, fmt.Errorf("postgres: behind a transaction pooler LISTEN hears nothing; give the store a direct connection for notifications (listen_host in the URL, WithListenConnString): %w", contract.ErrUnsupported)
		}
		cfg = s.pool.Config().ConnConfig
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	closeConn := func() {
		cctx, ccancel := context.WithTimeout(context.Background(), time.Second)
		_ = conn.Close(cctx)
		ccancel()
	}
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{s.channel}.Sanitize()); err != nil {
		closeConn()
		return nil, err
	}
	early, err := s.probeListen(ctx, conn)
	if err != nil {
		closeConn()
		return nil, err
	}
	ch := make(chan contract.Notification, 64+len(early))
	for _, n := range early {
		ch <- n
	}
	lctx, cancel := context.WithCancel(ctx)
	go func() {
		defer close(ch)
		defer cancel()
		defer closeConn()
		go func() {
			select { // end the wait when the store closes
			case <-s.done:
				cancel()
			case <-lctx.Done():
			}
		}()
		for {
			n, err := conn.WaitForNotification(lctx)
			if err != nil {
				return // ctx ended or the connection dropped
			}
			for _, note := range parseNotification(n.Payload) {
				select {
				case ch <- note:
				case <-lctx.Done():
					return
				}
			}
		}
	}()
	return ch, nil
}

// probeListen sends a probe notification through the pool and waits until
// conn, which LISTENs on the channel, hears it. It returns the
// notifications heard before the probe, to be delivered first.
func (s *Store) probeListen(ctx context.Context, conn *pgx.Conn) ([]contract.Notification, error) {
	var b [8]byte
	_, _ = rand.Read(b[:])
	payload := "probe " + hex.EncodeToString(b[:])
	if _, err := s.pool.Exec(ctx, s.q.notify, s.channel, payload); err != nil {
		return nil, fmt.Errorf("postgres: send the listen probe: %w", err)
	}
	pctx, cancel := context.WithTimeout(ctx, listenProbeWait)
	defer cancel()
	var early []contract.Notification
	for {
		n, err := conn.WaitForNotification(pctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			if pctx.Err() != nil {
				return nil, fmt.Errorf("postgres: a notification sent on channel %s did not reach the listening connection within %s: LISTEN does not hold here (a transaction pooler such as PgBouncer with pool_mode=transaction in between?); give the store a direct connection for notifications (listen_host in the URL) or set notify=false: %w",
					s.channel, listenProbeWait, contract.ErrUnsupported)
			}
			return nil, err
		}
		if n.Payload == payload {
			return early, nil
		}
		early = append(early, parseNotification(n.Payload)...)
	}
}

// parseNotification decodes a payload sent by a store: nothing for one it
// does not know, one notification per job id of a finish.
func parseNotification(payload string) []contract.Notification {
	kind, arg, ok := strings.Cut(payload, " ")
	if !ok || arg == "" {
		return nil
	}
	switch k := contract.NotificationKind(kind); k {
	case contract.NotifyInsert, contract.NotifyPause, contract.NotifyResume:
		return []contract.Notification{{Kind: k, Queue: arg}}
	case contract.NotifyCancel, contract.NotifyFinish:
		var notes []contract.Notification
		for f := range strings.SplitSeq(arg, ",") {
			id, err := strconv.ParseInt(f, 10, 64)
			if err != nil {
				return nil
			}
			notes = append(notes, contract.Notification{Kind: k, JobID: id})
		}
		return notes
	}
	return nil
}

// NotifiesFinish implements contract.FinishNotifier: every Finish and
// committed CompleteTx that makes jobs final sends a NotifyFinish with
// their ids (in the finishing statement itself, so only once committed),
// and Delete one for the deleted job; false in poll-only mode
// (WithNotify(false)).
func (s *Store) NotifiesFinish() bool { return s.notify }

// Delete removes a job that is not running (see the Store contract) and
// notifies listeners with a NotifyFinish for it, so that its waiters
// learn at once that it is gone.
func (s *Store) Delete(ctx context.Context, id int64) error {
	if err := s.Store.Delete(ctx, id); err != nil {
		return err
	}
	s.send(ctx, contract.NotifyFinish, strconv.FormatInt(id, 10))
	return nil
}

// send notifies listeners after a change committed. It is best effort: the
// change already took effect, so a failure is not reported.
func (s *Store) send(ctx context.Context, kind contract.NotificationKind, arg string) {
	if !s.notify || s.closed.Load() {
		return
	}
	_, _ = s.pool.Exec(ctx, s.q.notify, s.channel, string(kind)+" "+arg)
}

// PauseQueue persists a pause of queue (creating its record if needed) and
// notifies listeners; idempotent.
func (s *Store) PauseQueue(ctx context.Context, queue string, now time.Time) error {
	if err := s.Store.PauseQueue(ctx, queue, now); err != nil {
		return err
	}
	s.send(ctx, contract.NotifyPause, queue)
	return nil
}

// ResumeQueue lifts a pause of queue and notifies listeners; a no-op (but
// still a notification) when it is not paused.
func (s *Store) ResumeQueue(ctx context.Context, queue string, now time.Time) error {
	if err := s.Store.ResumeQueue(ctx, queue, now); err != nil {
		return err
	}
	s.send(ctx, contract.NotifyResume, queue)
	return nil
}

// Cancel moves a job not in a final state to cancelled (FinishedAt=now,
// lease cleared) and returns it; ErrInvalidState for a final job,
// ErrNotFound for a missing one. Listeners are told of every cancel, so
// the node running the job, if any, can stop it.
func (s *Store) Cancel(ctx context.Context, id int64, now time.Time) (*contract.Job, error) {
	j, err := s.Store.Cancel(ctx, id, now)
	if err != nil {
		return nil, err
	}
	s.send(ctx, contract.NotifyCancel, strconv.FormatInt(id, 10))
	return j, nil
}

// Retry makes a job that is not running available now (RunAt=now,
// FinishedAt and lease cleared; MaxAttempts raised to Attempt+1 when its
// attempts are used up), returns it, and wakes the listeners of its queue.
// Running and waiting jobs return ErrInvalidState, as does a final job
// whose unique key is now held by another live job; missing ones
// ErrNotFound.
func (s *Store) Retry(ctx context.Context, id int64, now time.Time) (*contract.Job, error) {
	if err := s.refuseWaiting(ctx, id); err != nil {
		return nil, err
	}
	j, err := s.Store.Retry(ctx, id, now)
	if err != nil {
		return nil, err
	}
	s.send(ctx, contract.NotifyInsert, j.Queue)
	return j, nil
}
