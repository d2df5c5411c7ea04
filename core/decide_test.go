package core_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/core/contract"
)

// tracedErr is a failure with a trace, as a shell command's is.
type tracedErr struct{ msg, trace string }

func (e *tracedErr) Error() string      { return e.msg }
func (e *tracedErr) ErrorTrace() string { return e.trace }

// TestDecide walks the one decision through every verdict and every
// discard rule, from the handler's error (Classify) to the fenced outcome
// (Decide).
func TestDecide(t *testing.T) {
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	stopped, stop := context.WithCancelCause(context.Background())
	stop(core.ShutdownCause())
	exact := core.ExponentialBackoff{Base: 2 * time.Second, Max: 5 * time.Second, Jitter: -1}
	panicked := core.CallSafely(func() error { panic("kaboom") })

	type want struct {
		kind   contract.OutcomeKind
		event  core.EventKind
		reason string
		runAt  time.Duration // after now; for retry, snooze, continue
		errMsg string        // the error entry's message ("" = no entry); a prefix when it ends in "…"
		trace  string        // a substring of the entry's trace
	}
	cases := []struct {
		name    string
		ctx     context.Context
		err     error
		attempt int // of 3; 0 means 1
		dl      time.Duration
		policy  core.RetryPolicy
		maxArgs int
		want    want
	}{
		{name: "success completes", want: want{kind: contract.OutcomeComplete, event: core.EventJobCompleted}},
		{name: "snooze waits without an entry", err: core.Snooze(5 * time.Minute),
			want: want{kind: contract.OutcomeSnooze, event: core.EventJobSnoozed, runAt: 5 * time.Minute}},
		{name: "hard stop hands back at once", ctx: stopped, err: errors.New("interrupted"),
			want: want{kind: contract.OutcomeSnooze, event: core.EventJobSnoozed}},
		{name: "cancel records the error", err: core.Cancel(errors.New("not wanted")),
			want: want{kind: contract.OutcomeCancel, event: core.EventJobCancelled, errMsg: "job cancelled: not wanted"}},
		{name: "permanent discards at once", err: core.Permanent(&tracedErr{"bad input", "line 7"}),
			want: want{kind: contract.OutcomeDiscard, event: core.EventJobDiscarded, reason: core.ReasonPermanent, errMsg: "permanent failure: bad input", trace: "line 7"}},
		{name: "continue moves on", err: core.Continue("step2", []byte(`{"n":2}`), now.Add(time.Minute)),
			want: want{kind: contract.OutcomeContinue, event: core.EventJobContinued, runAt: time.Minute}},
		{name: "continue without a time is due now", err: core.Continue("step2", []byte(`{}`), time.Time{}),
			want: want{kind: contract.OutcomeContinue, event: core.EventJobContinued}},
		{name: "invalid continuation fails the attempt", err: core.Continue("", []byte(`{}`), time.Time{}), policy: core.DelayList{time.Second},
			want: want{kind: contract.OutcomeRetry, event: core.EventJobRetried, runAt: time.Second, errMsg: "invalid continuation…"}},
		{name: "continuation over the args limit fails the attempt", err: core.Continue("k", []byte(`"0123456789"`), time.Time{}), maxArgs: 5, policy: core.DelayList{time.Second},
			want: want{kind: contract.OutcomeRetry, event: core.EventJobRetried, runAt: time.Second, errMsg: "invalid continuation…"}},
		{name: "failure retries by the policy", err: &tracedErr{"boom", "stderr tail"}, policy: core.DelayList{10 * time.Second},
			want: want{kind: contract.OutcomeRetry, event: core.EventJobRetried, runAt: 10 * time.Second, errMsg: "boom", trace: "stderr tail"}},
		{name: "retry_in comes before the policy", err: core.RetryIn(errors.New("later"), 3*time.Second), policy: core.DelayList{time.Hour},
			want: want{kind: contract.OutcomeRetry, event: core.EventJobRetried, runAt: 3 * time.Second, errMsg: "later"}},
		{name: "exponential without jitter is exact (attempt 1)", err: errors.New("x"), policy: exact,
			want: want{kind: contract.OutcomeRetry, event: core.EventJobRetried, runAt: 2 * time.Second, errMsg: "x"}},
		{name: "exponential without jitter is exact (attempt 2)", err: errors.New("x"), attempt: 2, policy: exact,
			want: want{kind: contract.OutcomeRetry, event: core.EventJobRetried, runAt: 4 * time.Second, errMsg: "x"}},
		{name: "last attempt discards as exhausted", err: errors.New("x"), attempt: 3, policy: core.DelayList{time.Second},
			want: want{kind: contract.OutcomeDiscard, event: core.EventJobDiscarded, reason: core.ReasonExhausted, errMsg: "x"}},
		{name: "deadline passed discards", err: errors.New("slow"), dl: -time.Second,
			want: want{kind: contract.OutcomeDiscard, event: core.EventJobDiscarded, reason: core.ReasonDeadline, errMsg: "slow"}},
		{name: "retry past the deadline discards", err: errors.New("slow"), dl: time.Minute, policy: core.DelayList{time.Hour},
			want: want{kind: contract.OutcomeDiscard, event: core.EventJobDiscarded, reason: core.ReasonDeadline, errMsg: "slow (next retry would pass the job's deadline)"}},
		{name: "panic is a failure with its stack", err: panicked, policy: core.DelayList{0},
			want: want{kind: contract.OutcomeRetry, event: core.EventJobRetried, errMsg: "handler panicked: kaboom", trace: "decide_test.go"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			attempt := max(tc.attempt, 1)
			started := now.Add(-90 * time.Second)
			job := &core.Job{ID: 7, Kind: "k", WorkerID: "w1", ClaimSeq: 11, Attempt: attempt, MaxAttempts: 3, AttemptedAt: started}
			if tc.dl != 0 {
				job.Deadline = now.Add(tc.dl)
			}
			ctx := tc.ctx
			if ctx == nil {
				ctx = context.Background()
			}
			v := core.Classify(ctx, tc.err)
			if v.Kind == contract.OutcomeComplete {
				v.Result = []byte(`"done"`)
			}
			d := core.Decide(job, v, core.DecidePolicy{Now: now, Retry: tc.policy, MaxArgsBytes: tc.maxArgs, DeleteCompleted: true})
			o, w := d.Outcome, tc.want
			if o.JobID != 7 || o.WorkerID != "w1" || o.ClaimSeq != 11 || o.Attempt != attempt || !o.At.Equal(now) {
				t.Errorf("fence: %+v", o)
			}
			if o.Kind != w.kind || d.Event != w.event || d.Reason != w.reason {
				t.Fatalf("outcome %s event %s reason %q, want %s %s %q (err %v)", o.Kind, d.Event, d.Reason, w.kind, w.event, w.reason, d.Err)
			}
			switch o.Kind {
			case contract.OutcomeRetry, contract.OutcomeSnooze, contract.OutcomeContinue:
				if !o.RunAt.Equal(now.Add(w.runAt)) {
					t.Errorf("run at %s, want now+%s", o.RunAt, w.runAt)
				}
			case contract.OutcomeComplete:
				if string(o.Result) != `"done"` || !o.Delete {
					t.Errorf("completion: %+v", o)
				}
			}
			if o.Kind == contract.OutcomeContinue && (o.NextKind != "step2" || len(o.NextArgs) == 0) {
				t.Errorf("continuation: %+v", o)
			}
			switch {
			case w.errMsg == "" && o.Error != nil:
				t.Errorf("unexpected error entry %+v", o.Error)
			case w.errMsg == "":
			case o.Error == nil:
				t.Errorf("no error entry, want %q", w.errMsg)
			case o.Error.Attempt != attempt || !o.Error.At.Equal(now):
				t.Errorf("entry attempt/time: %+v", o.Error)
			case strings.HasSuffix(w.errMsg, "…") && !strings.HasPrefix(o.Error.Error, strings.TrimSuffix(w.errMsg, "…")),
				!strings.HasSuffix(w.errMsg, "…") && o.Error.Error != w.errMsg:
				t.Errorf("entry %q, want %q", o.Error.Error, w.errMsg)
			case !strings.Contains(o.Error.Trace, w.trace):
				t.Errorf("trace %q lacks %q", o.Error.Trace, w.trace)
			case !o.Error.StartedAt.Equal(started):
				t.Errorf("entry StartedAt %s, want the job's AttemptedAt %s", o.Error.StartedAt, started)
			case o.Error.DiscardReason != w.reason:
				t.Errorf("entry DiscardReason %q, want the decision's reason %q", o.Error.DiscardReason, w.reason)
			}
			if tc.err != nil && d.Err == nil {
				t.Errorf("the decision lost the handler's error")
			}
		})
	}
}

// TestDecideDefaultPolicy: without a policy the wait is
// ExponentialBackoff{}'s, 1 s ± 25 % after the first attempt.
func TestDecideDefaultPolicy(t *testing.T) {
	now := time.Now().UTC()
	job := &core.Job{Attempt: 1, MaxAttempts: 5}
	d := core.Decide(job, core.Classify(context.Background(), errors.New("x")), core.DecidePolicy{Now: now})
	if wait := d.Outcome.RunAt.Sub(now); d.Outcome.Kind != contract.OutcomeRetry || wait < 750*time.Millisecond || wait > 1250*time.Millisecond {
		t.Fatalf("default policy: %s after %s", d.Outcome.Kind, wait)
	}
}

// TestErrorEntryBounds: the entry's message keeps its head and its trace
// its tail, within MaxErrorBytes.
func TestErrorEntryBounds(t *testing.T) {
	long := strings.Repeat("m", contract.MaxErrorBytes)
	ae := core.ErrorEntry(2, time.Unix(0, 0), &tracedErr{long, "start " + long + " end"})
	if len(ae.Error)+len(ae.Trace) > contract.MaxErrorBytes+64 || !strings.HasSuffix(ae.Trace, " end") || ae.Attempt != 2 {
		t.Fatalf("entry: %d + %d bytes, trace ends %q", len(ae.Error), len(ae.Trace), ae.Trace[len(ae.Trace)-8:])
	}
	if got := core.ErrorEntry(1, time.Unix(0, 0), nil); got.Error != "<nil>" {
		t.Fatalf("nil error: %+v", got)
	}
}

// TestRetryInInProcess: a handler's RetryIn delay comes before its kind's
// policy, in process as for remote workers.
func TestRetryInInProcess(t *testing.T) {
	h := core.NewHandlers()
	h.HandleRaw("later", func(ctx context.Context, j *core.Job) error {
		return core.RetryIn(errors.New("not yet"), time.Hour)
	}, core.WithRetry(core.DelayList{0}))
	c, st := newClient(t, h, nil)
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	r, _ := c.EnqueueRaw(context.Background(), "later", nil, &core.Options{MaxAttempts: 3})
	j := waitState(t, st, r.Job.ID, core.StateRetryable)
	if wait := time.Until(j.RunAt); wait < 59*time.Minute || j.Errors[0].Error != "not yet" {
		t.Fatalf("retry in %s, errors %+v", wait, j.Errors)
	}
}

// TestDecideRescueEntry: a rescue's error entry starts at the job's
// AttemptedAt, and when it discards the job it says why: worker_lost with
// no attempts left, deadline when attempts were left but the deadline
// passed; a retried job's entry has no reason.
func TestDecideRescueEntry(t *testing.T) {
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	started := now.Add(-time.Minute)
	for _, tc := range []struct {
		name    string
		attempt int
		dl      time.Time
		kind    contract.OutcomeKind
		reason  string
	}{
		{"attempts left retries", 1, time.Time{}, contract.OutcomeRetry, ""},
		{"no attempts left discards", 3, time.Time{}, contract.OutcomeDiscard, core.ReasonWorkerLost},
		{"deadline passed discards", 1, now.Add(-time.Second), contract.OutcomeDiscard, core.ReasonDeadline},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j := &core.Job{ID: 1, WorkerID: "w", Attempt: tc.attempt, MaxAttempts: 3, Deadline: tc.dl, AttemptedAt: started, RunAt: started}
			o := core.DecideRescue(j, core.CauseLeaseExpired, now, now)
			if o.Kind != tc.kind || o.Error == nil || o.Error.DiscardReason != tc.reason || !o.Error.StartedAt.Equal(started) {
				t.Fatalf("outcome %s entry %+v; want %s with DiscardReason %q and StartedAt %s", o.Kind, o.Error, tc.kind, tc.reason, started)
			}
		})
	}
}
