package core_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/core/contract"
	"github.com/backlogq/backlog/internal/teststores"
)

// secretText appears in every plaintext the tests seal; it must never be
// found in what a store returns.
const secretText = "4111-1111-1111-1111"

type chargeArgs struct {
	Card string `json:"card"`
}

func (chargeArgs) Kind() string { return "charge" }

// encClient starts a client on st with fast retries and enc (nil = off).
func encClient(t *testing.T, st contract.Store, h *core.Handlers, enc *core.Encryption) *core.Client {
	t.Helper()
	c, err := core.NewClient(st, core.Config{
		Queues:              map[string]core.QueueConfig{core.DefaultQueue: {MaxWorkers: 4}},
		Handlers:            h,
		Logger:              quietLogger(),
		PollInterval:        10 * time.Millisecond,
		MaintenanceInterval: -1,
		Retry:               core.DelayList{0},
		Retention:           &core.Retention{Completed: time.Hour, Cancelled: time.Hour, Discarded: time.Hour},
		Encryption:          enc,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = c.Stop(ctx)
	})
	return c
}

// producer returns an insert-only client (no queues) on st.
func producer(t *testing.T, st contract.Store, enc *core.Encryption) *core.Client {
	t.Helper()
	c, err := core.NewClient(st, core.Config{Logger: quietLogger(), MaintenanceInterval: -1, Encryption: enc})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func assertSealedRow(t *testing.T, j *core.Job, what string) {
	t.Helper()
	raw, _ := json.Marshal(j)
	if bytes.Contains(raw, []byte(secretText)) {
		t.Fatalf("%s: the stored job holds the plaintext: %s", what, raw)
	}
	if !json.Valid(j.Args) || !contract.IsSealed(j.Args) {
		t.Fatalf("%s: stored args %s are not a sealed JSON envelope", what, j.Args)
	}
}

// TestEncryptionAtRestOnStores runs sealed jobs through the engine on every
// store reachable here and reads back what each store keeps.
func TestEncryptionAtRestOnStores(t *testing.T) {
	k1 := mustKeyring(t, "k1", map[string][]byte{"k1": testKey(1)})
	rotated := mustKeyring(t, "k2", map[string][]byte{"k1": testKey(1), "k2": testKey(2)})
	lost := mustKeyring(t, "k9", map[string][]byte{"k9": testKey(9)})

	teststores.Run(t, func(t *testing.T, st contract.Store) {
		ctx := context.Background()
		seen := make(chan string, 16)
		h := core.NewHandlers()
		core.Handle(h, func(ctx context.Context, j *core.TypedJob[chargeArgs]) error {
			seen <- "charge " + j.Args.Card
			return core.RecordResult(ctx, map[string]string{"charged": j.Args.Card})
		})
		h.HandleRaw("fail", func(ctx context.Context, j *core.Job) error {
			seen <- "fail " + string(j.Args)
			return errors.New("declined card " + secretText)
		})
		h.HandleRaw("step1", func(ctx context.Context, j *core.Job) error {
			seen <- "step1 " + string(j.Args)
			return core.Continue("step2", j.Args, time.Time{})
		})
		h.HandleRaw("step2", func(ctx context.Context, j *core.Job) error {
			seen <- "step2 " + string(j.Args)
			return nil
		})
		h.HandleRaw("plain", func(ctx context.Context, j *core.Job) error {
			seen <- "plain " + string(j.Args)
			return nil
		})
		h.HandleRaw("lost", func(ctx context.Context, j *core.Job) error {
			seen <- "lost ran"
			return nil
		})
		enc := &core.Encryption{Keys: rotated, Results: true, Errors: true}
		w := encClient(t, st, h, enc)

		// Jobs enqueued before the rotation (k1), without encryption
		// (plain), and with a key the worker does not hold (k9).
		oldJob, err := producer(t, st, &core.Encryption{Keys: k1}).Enqueue(ctx, chargeArgs{Card: "old " + secretText}, nil)
		if err != nil {
			t.Fatal(err)
		}
		plainJob, err := producer(t, st, nil).EnqueueRaw(ctx, "plain", []byte(`[1]`), nil)
		if err != nil {
			t.Fatal(err)
		}
		lostJob, err := producer(t, st, &core.Encryption{Keys: lost}).EnqueueRaw(ctx, "lost", []byte(`{"s":"`+secretText+`"}`), &core.Options{MaxAttempts: 2})
		if err != nil {
			t.Fatal(err)
		}
		// Jobs enqueued by the worker's own client, current key k2.
		newJob, err := w.Enqueue(ctx, chargeArgs{Card: secretText}, &core.Options{UniqueKey: "charge-1"})
		if err != nil {
			t.Fatal(err)
		}
		if dup, err := w.Enqueue(ctx, chargeArgs{Card: secretText}, &core.Options{UniqueKey: "charge-1"}); err != nil || !dup.Duplicate {
			t.Fatalf("unique key with sealed args: %+v, %v", dup, err)
		}
		failJob, err := w.EnqueueRaw(ctx, "fail", []byte(`{"s":"`+secretText+`"}`), &core.Options{MaxAttempts: 1})
		if err != nil {
			t.Fatal(err)
		}
		stepJob, err := w.EnqueueMany(ctx, []core.InsertParams{{Kind: "step1", Args: []byte(`{"s":"` + secretText + `"}`)}})
		if err != nil {
			t.Fatal(err)
		}

		// Stored before any run: ciphertext only, under the right key ids.
		for _, c := range []struct {
			id  int64
			kid string
		}{{oldJob.Job.ID, "k1"}, {lostJob.Job.ID, "k9"}, {newJob.Job.ID, "k2"}, {failJob.Job.ID, "k2"}, {stepJob[0].Job.ID, "k2"}} {
			j, err := st.Get(ctx, c.id)
			if err != nil {
				t.Fatal(err)
			}
			assertSealedRow(t, j, j.Kind)
			if kid, _ := core.SealedKeyID(j.Args); kid != c.kid {
				t.Fatalf("job %d (%s) sealed with %q, want %q", c.id, j.Kind, kid, c.kid)
			}
		}

		if err := w.Start(ctx); err != nil {
			t.Fatal(err)
		}
		done := map[int64]core.State{
			oldJob.Job.ID: core.StateCompleted, plainJob.Job.ID: core.StateCompleted, newJob.Job.ID: core.StateCompleted,
			failJob.Job.ID: core.StateDiscarded, stepJob[0].Job.ID: core.StateCompleted, lostJob.Job.ID: core.StateDiscarded,
		}
		final := map[int64]*core.Job{}
		for id, s := range done {
			final[id] = waitState(t, st, id, s)
		}
		close(seen)
		var got []string
		for s := range seen {
			got = append(got, s)
		}
		joined := strings.Join(got, "\n")
		for _, want := range []string{
			"charge " + secretText, "charge old " + secretText, "plain [1]",
			`fail {"s":"` + secretText + `"}`, `step1 {"s":"` + secretText + `"}`, `step2 {"s":"` + secretText + `"}`,
		} {
			if !strings.Contains(joined, want) {
				t.Errorf("handlers saw:\n%s\nwant a line %q", joined, want)
			}
		}
		if strings.Contains(joined, "lost ran") {
			t.Error("a job whose args did not decrypt reached its handler")
		}

		// Completed: result sealed, opens to the handler's result.
		for _, id := range []int64{newJob.Job.ID, oldJob.Job.ID} {
			j := final[id]
			assertSealedRow(t, j, "completed charge")
			if !contract.IsSealed(j.Result) {
				t.Fatalf("result %s is not sealed", j.Result)
			}
			o, err := rotated.OpenJob(j)
			if err != nil || !strings.Contains(string(o.Result), secretText) || !strings.Contains(string(o.Args), secretText) {
				t.Fatalf("opened job: args %s result %s, %v", o.Args, o.Result, err)
			}
		}
		if j := final[plainJob.Job.ID]; string(j.Result) != "" || contract.IsSealed(j.Args) {
			t.Fatalf("plain job: args %s result %s", j.Args, j.Result)
		}

		// Discarded after its handler failed: error text sealed.
		j := final[failJob.Job.ID]
		assertSealedRow(t, j, "failed job")
		if len(j.Errors) != 1 || !contract.IsSealedText(j.Errors[0].Error) {
			t.Fatalf("errors %+v", j.Errors)
		}
		if e, err := rotated.OpenAttemptError(j.Errors[0]); err != nil || e.Error != "declined card "+secretText {
			t.Fatalf("opened error %+v, %v", e, err)
		}

		// Continued: the next step's args are sealed for the next kind.
		j = final[stepJob[0].Job.ID]
		assertSealedRow(t, j, "continued job")
		if args, err := rotated.OpenArgs("step2", j.Args); err != nil || !strings.Contains(string(args), secretText) {
			t.Fatalf("continued args: %s, %v", args, err)
		}

		// Missing key: every attempt failed with the decrypt error; the
		// job is discarded (dead letter), its sealed args intact.
		j = final[lostJob.Job.ID]
		assertSealedRow(t, j, "job with a missing key")
		if kid, _ := core.SealedKeyID(j.Args); kid != "k9" || j.Attempt != 2 || len(j.Errors) != 2 {
			t.Fatalf("job with a missing key: kid %q attempt %d errors %+v", kid, j.Attempt, j.Errors)
		}
		for _, e := range j.Errors {
			o, err := rotated.OpenAttemptError(e)
			if err != nil || e.Cause != core.CauseDecrypt || !strings.Contains(o.Error, `key id "k9"`) || !strings.Contains(o.Error, "cannot decrypt args") {
				t.Fatalf("decrypt error entry %+v (opened %q, %v)", e, o.Error, err)
			}
		}
	})
}

// TestEncryptionRequireSealedRefusesPlainArgs: with RequireSealed, a job
// whose args were stored plain fails with ErrDecrypt instead of running.
func TestEncryptionRequireSealedRefusesPlainArgs(t *testing.T) {
	st := teststores.Memory(t)
	ran := make(chan struct{}, 1)
	h := core.NewHandlers()
	h.HandleRaw("x", func(ctx context.Context, j *core.Job) error { ran <- struct{}{}; return nil })
	k := mustKeyring(t, "k1", map[string][]byte{"k1": testKey(1)})
	w := encClient(t, st, h, &core.Encryption{Keys: k, RequireSealed: true})
	r, err := producer(t, st, nil).EnqueueRaw(context.Background(), "x", []byte(`{}`), &core.Options{MaxAttempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	j := waitState(t, st, r.Job.ID, core.StateDiscarded)
	if len(j.Errors) != 1 || j.Errors[0].Cause != core.CauseDecrypt || !strings.Contains(j.Errors[0].Error, "RequireSealed") {
		t.Fatalf("errors %+v", j.Errors)
	}
	select {
	case <-ran:
		t.Fatal("plain args ran under RequireSealed")
	default:
	}
}

// TestEncryptionWithoutKeysRefusesSealedArgs: a worker with no keyring never
// hands sealed args to a handler.
func TestEncryptionWithoutKeysRefusesSealedArgs(t *testing.T) {
	st := teststores.Memory(t)
	h := core.NewHandlers()
	h.HandleRaw("x", func(ctx context.Context, j *core.Job) error { return errors.New("must not run") })
	w := encClient(t, st, h, nil)
	k := mustKeyring(t, "k1", map[string][]byte{"k1": testKey(1)})
	r, err := producer(t, st, &core.Encryption{Keys: k}).EnqueueRaw(context.Background(), "x", []byte(`{}`), &core.Options{MaxAttempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	j := waitState(t, st, r.Job.ID, core.StateDiscarded)
	if len(j.Errors) != 1 || j.Errors[0].Cause != core.CauseDecrypt || !strings.Contains(j.Errors[0].Error, `key id "k1"`) {
		t.Fatalf("errors %+v", j.Errors)
	}
}

func TestEncryptionLimitsApplyToPlaintext(t *testing.T) {
	st := teststores.Memory(t)
	k := mustKeyring(t, "k1", map[string][]byte{"k1": testKey(1)})
	c, err := core.NewClient(st, core.Config{Logger: quietLogger(), MaintenanceInterval: -1, MaxArgsBytes: 100, Encryption: &core.Encryption{Keys: k}})
	if err != nil {
		t.Fatal(err)
	}
	// 90 bytes of args seal to well over 100 bytes: accepted.
	args := []byte(`{"s":"` + strings.Repeat("a", 82) + `"}`)
	r, err := c.EnqueueRaw(context.Background(), "x", args, nil)
	if err != nil || len(r.Job.Args) <= 100 || !contract.IsSealed(r.Job.Args) {
		t.Fatalf("enqueue: %v, stored %d bytes", err, len(r.Job.Args))
	}
	if _, err := c.EnqueueRaw(context.Background(), "x", []byte(`{"s":"`+strings.Repeat("a", 100)+`"}`), nil); !errors.Is(err, core.ErrInvalidJob) {
		t.Fatalf("over the limit: %v", err)
	}
	if _, err := core.NewClient(st, core.Config{Encryption: &core.Encryption{}}); err == nil {
		t.Fatal("Encryption without Keys accepted")
	}
}

// txCompleterStore records transactional completions instead of applying
// them, to show what CompleteTx hands the store.
type txCompleterStore struct {
	contract.Store
	got chan contract.Outcome
}

func (s *txCompleterStore) CompleteTx(ctx context.Context, tx any, o contract.Outcome) error {
	s.got <- o
	return nil
}

func TestEncryptionSealsTransactionalCompletionResult(t *testing.T) {
	st := &txCompleterStore{Store: teststores.Memory(t), got: make(chan contract.Outcome, 1)}
	h := core.NewHandlers()
	h.HandleRaw("tx", func(ctx context.Context, j *core.Job) error {
		if err := core.RecordRawResult(ctx, []byte(`"`+secretText+`"`)); err != nil {
			return err
		}
		return core.CompleteTx(ctx, nil)
	})
	k := mustKeyring(t, "k1", map[string][]byte{"k1": testKey(1)})
	w := encClient(t, st, h, &core.Encryption{Keys: k, Results: true})
	if _, err := w.EnqueueRaw(context.Background(), "tx", nil, nil); err != nil {
		t.Fatal(err)
	}
	if err := w.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case o := <-st.got:
		if bytes.Contains(o.Result, []byte(secretText)) || !contract.IsSealed(o.Result) {
			t.Fatalf("CompleteTx result %s", o.Result)
		}
		if res, err := k.OpenResult("tx", o.Result); err != nil || string(res) != `"`+secretText+`"` {
			t.Fatalf("opened %s, %v", res, err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no transactional completion")
	}
}

// TestEncryptionHandlerSeesOpenedErrorHistory: sealed error entries of
// earlier attempts reach the handler opened; the store keeps them sealed.
func TestEncryptionHandlerSeesOpenedErrorHistory(t *testing.T) {
	st := teststores.Memory(t)
	history := make(chan []core.AttemptError, 1)
	h := core.NewHandlers()
	h.HandleRaw("twice", func(ctx context.Context, j *core.Job) error {
		if j.Attempt == 1 {
			return errors.New("first try " + secretText)
		}
		history <- j.Errors
		return nil
	})
	k := mustKeyring(t, "k1", map[string][]byte{"k1": testKey(1)})
	w := encClient(t, st, h, &core.Encryption{Keys: k, Errors: true})
	r, err := w.EnqueueRaw(context.Background(), "twice", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	j := waitState(t, st, r.Job.ID, core.StateCompleted)
	assertSealedRow(t, j, "retried job")
	if errs := <-history; len(errs) != 1 || errs[0].Error != "first try "+secretText {
		t.Fatalf("handler saw errors %+v", errs)
	}
}
