package postgres

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/backlogq/backlog/core"
	"github.com/jackc/pgx/v5"
)

// Notifications travel on the channel "backlog_<schema>" with payloads
// "insert <queue>", "pause <queue>", "resume <queue>" and "cancel <job id>".

// Listen opens a dedicated connection (not one of the pool's), LISTENs on
// the schema's channel and delivers notifications sent by any store on the
// same schema until ctx ends or the store is closed; then it closes the
// channel. When the connection drops, the channel closes too (the engine
// then listens again and wakes its queues in case it missed something).
// Delivery is best effort. In poll-only mode (WithNotify(false)) Listen
// returns an error wrapping core.ErrUnsupported, on which the engine stops
// listening and relies on polling.
func (s *Store) Listen(ctx context.Context) (<-chan core.Notification, error) {
	if s.closed.Load() {
		return nil, core.ErrClosed
	}
	if !s.notify {
		return nil, fmt.Errorf("postgres: notifications are off (poll-only mode): %w", core.ErrUnsupported)
	}
	ch := make(chan core.Notification, 64)
	cfg := s.pool.Config().ConnConfig
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{s.channel}.Sanitize()); err != nil {
		_ = conn.Close(context.Background())
		return nil, err
	}
	lctx, cancel := context.WithCancel(ctx)
	go func() {
		defer close(ch)
		defer cancel()
		defer func() {
			cctx, ccancel := context.WithTimeout(context.Background(), time.Second)
			_ = conn.Close(cctx)
			ccancel()
		}()
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
			note, ok := parseNotification(n.Payload)
			if !ok {
				continue
			}
			select {
			case ch <- note:
			case <-lctx.Done():
				return
			}
		}
	}()
	return ch, nil
}

// parseNotification decodes a payload sent by a store.
func parseNotification(payload string) (core.Notification, bool) {
	kind, arg, ok := strings.Cut(payload, " ")
	if !ok || arg == "" {
		return core.Notification{}, false
	}
	switch k := core.NotificationKind(kind); k {
	case core.NotifyInsert, core.NotifyPause, core.NotifyResume:
		return core.Notification{Kind: k, Queue: arg}, true
	case core.NotifyCancel:
		id, err := strconv.ParseInt(arg, 10, 64)
		if err != nil {
			return core.Notification{}, false
		}
		return core.Notification{Kind: k, JobID: id}, true
	}
	return core.Notification{}, false
}

// send notifies listeners after a change committed. It is best effort: the
// change already took effect, so a failure is not reported.
func (s *Store) send(ctx context.Context, kind core.NotificationKind, arg string) {
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
	s.send(ctx, core.NotifyPause, queue)
	return nil
}

// ResumeQueue lifts a pause of queue and notifies listeners; a no-op (but
// still a notification) when it is not paused.
func (s *Store) ResumeQueue(ctx context.Context, queue string, now time.Time) error {
	if err := s.Store.ResumeQueue(ctx, queue, now); err != nil {
		return err
	}
	s.send(ctx, core.NotifyResume, queue)
	return nil
}

// Cancel moves a job not in a final state to cancelled (FinishedAt=now,
// lease cleared) and returns it; ErrInvalidState for a final job,
// ErrNotFound for a missing one. When the job had been claimed, listeners
// are told, so the node running it can stop it.
func (s *Store) Cancel(ctx context.Context, id int64, now time.Time) (*core.Job, error) {
	j, err := s.Store.Cancel(ctx, id, now)
	if err != nil {
		return nil, err
	}
	if j.WorkerID != "" {
		s.send(ctx, core.NotifyCancel, strconv.FormatInt(id, 10))
	}
	return j, nil
}

// Retry makes a job that is not running available now (RunAt=now,
// FinishedAt and lease cleared; MaxAttempts raised to Attempt+1 when its
// attempts are used up), returns it, and wakes the listeners of its queue.
// Running jobs return ErrInvalidState, as does a final job whose unique key
// is now held by another live job; missing ones ErrNotFound.
func (s *Store) Retry(ctx context.Context, id int64, now time.Time) (*core.Job, error) {
	j, err := s.Store.Retry(ctx, id, now)
	if err != nil {
		return nil, err
	}
	s.send(ctx, core.NotifyInsert, j.Queue)
	return j, nil
}
