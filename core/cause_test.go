package core_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/backlogq/backlog/core"
)

// TestErrorEntriesCarryTheirCause: every failed attempt's error entry has
// a machine-readable cause, stored with it, so metrics, events, the API
// and the dashboard never parse error text.
func TestErrorEntriesCarryTheirCause(t *testing.T) {
	h := core.NewHandlers()
	h.HandleRaw("fails", func(context.Context, *core.Job) error { return errors.New("boom") })
	h.HandleRaw("panics", func(context.Context, *core.Job) error { panic("kaboom") })
	h.HandleRaw("slow", func(ctx context.Context, _ *core.Job) error {
		<-ctx.Done()
		return ctx.Err()
	}, core.WithTimeout(20*time.Millisecond))
	h.HandleRaw("late", func(ctx context.Context, _ *core.Job) error {
		<-ctx.Done()
		return ctx.Err()
	})
	h.HandleRaw("bad-step", func(context.Context, *core.Job) error { return core.Continue("", nil, time.Time{}) })
	c, st := newClient(t, h, nil)
	if err := c.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	// Kinds this worker has no handler for come from a producer-only
	// client that allows kinds no worker announced.
	producer, err := core.NewClient(st, core.Config{Logger: quietLogger(), MaintenanceInterval: -1, AllowUnknownKinds: true})
	if err != nil {
		t.Fatal(err)
	}
	once := &core.Options{MaxAttempts: 1}
	for _, c := range []struct {
		kind, cause string
		opts        *core.Options
	}{
		{"fails", core.CauseHandlerError, once},
		{"panics", core.CausePanic, once},
		{"slow", core.CauseTimeout, once},
		// The deadline leaves a loaded machine time to claim the job
		// before it passes (a job claimed after it is discarded by the
		// claim path with the same cause, but the handler must see it).
		{"late", core.CauseDeadline, &core.Options{MaxAttempts: 1, Deadline: time.Now().Add(500 * time.Millisecond)}},
		{"bad-step", core.CauseInvalidContinue, once},
		{"nobody-handles-it", core.CauseUnknownKind, once},
	} {
		r, err := producer.EnqueueRaw(t.Context(), c.kind, nil, c.opts)
		if err != nil {
			t.Fatal(err)
		}
		j := waitState(t, st, r.Job.ID, core.StateDiscarded)
		if len(j.Errors) != 1 || j.Errors[0].Cause != c.cause {
			t.Errorf("%s: error entries %+v; want one with cause %q", c.kind, j.Errors, c.cause)
		}
	}
}

func TestCauseOf(t *testing.T) {
	for _, c := range []struct {
		err  error
		want string
	}{
		{errors.New("x"), core.CauseHandlerError},
		{core.Permanent(errors.New("x")), core.CauseHandlerError},
		{&core.PanicError{Value: 1}, core.CausePanic},
		{fmt.Errorf("wrapped: %w", &core.TimeoutError{After: time.Second, Err: context.DeadlineExceeded}), core.CauseTimeout},
		{&core.TimeoutError{After: time.Second, Err: &core.PanicError{Value: 1}}, core.CausePanic},
		{fmt.Errorf("%w %q", core.ErrUnknownKind, "k"), core.CauseUnknownKind},
		{&core.DecryptError{Err: core.ErrUnknownKey}, core.CauseDecrypt},
		{core.ShutdownCause(), core.CauseShutdown},
	} {
		if got := core.CauseOf(c.err); got != c.want {
			t.Errorf("CauseOf(%v) = %q; want %q", c.err, got, c.want)
		}
	}
	e := &core.TimeoutError{After: 20 * time.Millisecond, Err: context.DeadlineExceeded}
	if e.Error() != "attempt timed out after 20ms: context deadline exceeded" || !errors.Is(e, context.DeadlineExceeded) {
		t.Errorf("TimeoutError: %q", e.Error())
	}
}
