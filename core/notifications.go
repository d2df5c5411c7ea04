package core

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/backlogq/backlog/core/contract"
)

// FollowNotifications listens to n until ctx ends: it calls onListen
// (when not nil) each time a Listen succeeds, before the first of its
// notifications, onNote for every notification, and onGap each time the
// store closes the channel (a lost connection: notifications may have
// been missed), before listening again. A failed Listen is retried after a backoff that starts
// at 100 ms and grows to maxDelay (at least 1 s). An outage
// of the listener is logged once, at Warn, when it starts (later failures
// of it at Debug), and once, at Info, when listening works again, with
// how long it did not ("failed_for", a duration). log's messages start
// with prefix. It returns nil when ctx ends, and the error wrapping
// ErrUnsupported at once when the store cannot notify here (poll-only
// mode, a transaction pooler): the caller then relies on polling.
//
// The engine's nodes and the HTTP API's long-polls both follow a store's
// notifications this way.
func FollowNotifications(ctx context.Context, n contract.Notifier, log *slog.Logger, prefix string, maxDelay time.Duration,
	onListen func(), onNote func(contract.Notification), onGap func()) error {
	failures := 0
	var failedSince time.Time
	for ctx.Err() == nil {
		ch, err := n.Listen(ctx)
		if errors.Is(err, ErrUnsupported) {
			return err
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			failures++
			if failures == 1 {
				failedSince = time.Now()
				log.Warn(prefix+"listening for notifications failed; polling until it works again (further failures are logged at debug level)", "err", err)
			} else {
				log.Debug(prefix+"listening for notifications failed again", "err", err, "failures", failures)
			}
			if !sleepCtx(ctx, retryDelay(failures, maxDelay)) {
				return nil
			}
			continue
		}
		if failures > 0 {
			log.Info(prefix+"listening for notifications again", "failed_for", time.Since(failedSince).Round(time.Millisecond).String())
			failures = 0
		}
		if onListen != nil {
			onListen()
		}
		for note := range ch {
			onNote(note)
		}
		onGap()
		if !sleepCtx(ctx, 100*time.Millisecond) {
			return nil
		}
	}
	return nil
}
