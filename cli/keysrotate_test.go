//go:build unix

package cli

import (
	"context"
	"encoding/json"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/core/contract"
	"github.com/backlogq/backlog/store"
	"github.com/backlogq/backlog/store/memory"
)

// A store without contract.SealedRewriter, for the error of keys rotate.
func init() {
	store.Register("test-norewrite", func(context.Context, *url.URL) (contract.Store, error) {
		return struct{ contract.Store }{memory.New()}, nil
	})
}

// rotationFixture is a SQLite store holding, under key k1: a scheduled
// job, a completed job with a sealed result, a discarded job with sealed
// error text, and a running job; and a job with plain args. It returns
// the store, the keyring texts of k1 and of k2-then-k1, and the running
// job.
type rotationFixture struct {
	db, specOld, specNew string
	st                   contract.Store
	old, rotated         *core.Keyring
	running              *core.Job
	plain                map[int64]string // job id → args in clear
}

func newRotationFixture(t *testing.T) *rotationFixture {
	t.Helper()
	f := &rotationFixture{db: tempDB(t), plain: map[int64]string{}}
	f.specOld = testKeyring(t, "k1")
	f.specNew = testKeyring(t, "k2") + "," + f.specOld
	var err error
	if f.old, err = core.ParseKeyring(f.specOld); err != nil {
		t.Fatal(err)
	}
	if f.rotated, err = core.ParseKeyring(f.specNew); err != nil {
		t.Fatal(err)
	}
	f.st = openStore(t, f.db)
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Microsecond)
	insert := func(queue, kind, args string, sealed bool, runAt time.Time) *core.Job {
		t.Helper()
		a := []byte(args)
		if sealed {
			a = f.old.SealArgs(kind, a)
		}
		res, err := f.st.Insert(ctx, now, []core.InsertParams{{Queue: queue, Kind: kind, Args: a, Priority: 5, MaxAttempts: 3, RunAt: runAt}})
		if err != nil {
			t.Fatal(err)
		}
		f.plain[res[0].Job.ID] = args
		return res[0].Job
	}
	claim := func(queue string) *core.Job {
		t.Helper()
		jobs, err := f.st.Claim(ctx, contract.ClaimParams{Queue: queue, WorkerID: "w", Limit: 1, Now: now, LeaseUntil: now.Add(time.Hour)})
		if err != nil || len(jobs) != 1 {
			t.Fatalf("claim %s: %d jobs, %v", queue, len(jobs), err)
		}
		return jobs[0]
	}
	finish := func(o contract.Outcome) {
		t.Helper()
		if res, err := f.st.Finish(ctx, []contract.Outcome{o}); err != nil || !res[0].Applied {
			t.Fatalf("finish: %v, %v", res, err)
		}
	}

	insert("later", "mail", `{"to":"ann@example.com"}`, true, now.Add(time.Hour))
	insert("done", "pay", `{"card":"4111"}`, true, now)
	c := claim("done")
	finish(contract.Outcome{JobID: c.ID, WorkerID: "w", ClaimSeq: c.ClaimSeq, Kind: contract.OutcomeComplete, At: now, Result: f.old.SealResult("pay", []byte("receipt 4111"))})
	insert("dead", "pay", `{"card":"5500"}`, true, now)
	d := claim("dead")
	ae := f.old.SealAttemptError(core.AttemptError{Attempt: 1, At: now, Error: "card 5500 declined", Trace: "stack"})
	finish(contract.Outcome{JobID: d.ID, WorkerID: "w", ClaimSeq: d.ClaimSeq, Kind: contract.OutcomeDiscard, At: now, Error: &ae})
	insert("busy", "pay", `{"card":"3700"}`, true, now)
	f.running = claim("busy")
	insert("plain", "note", `{"text":"not secret"}`, false, now)
	return f
}

// finishRunning completes the running job as its worker would.
func (f *rotationFixture) finishRunning(t *testing.T) {
	t.Helper()
	r := f.running
	res, err := f.st.Finish(context.Background(), []contract.Outcome{{JobID: r.ID, WorkerID: "w", ClaimSeq: r.ClaimSeq, Kind: contract.OutcomeComplete, At: time.Now().UTC()}})
	if err != nil || !res[0].Applied {
		t.Fatalf("finish the running job: %v, %v", res, err)
	}
}

// checkAllUnder fails unless every sealed value of the store is under kid
// and opens with the rotated keyring to what was stored, and plain args
// are still plain.
func (f *rotationFixture) checkAllUnder(t *testing.T, kid string) {
	t.Helper()
	for _, j := range allJobs(t, f.st) {
		if j.Kind == "note" {
			if contract.IsSealed(j.Args) || string(j.Args) != f.plain[j.ID] {
				t.Fatalf("job %d: plain args became %s; rotation must leave plain values plain", j.ID, j.Args)
			}
			continue
		}
		if got, ok := core.SealedKeyID(j.Args); !ok || got != kid {
			t.Fatalf("job %d (%s): args under %q, want %q", j.ID, j.State, got, kid)
		}
		opened, err := f.rotated.OpenJob(j)
		if err != nil {
			t.Fatalf("job %d: %v", j.ID, err)
		}
		if string(opened.Args) != f.plain[j.ID] {
			t.Fatalf("job %d: args open to %s, want %s", j.ID, opened.Args, f.plain[j.ID])
		}
		if j.Result != nil {
			if got, _ := core.SealedKeyID(j.Result); got != kid || string(opened.Result) != "receipt 4111" {
				t.Fatalf("job %d: result under %q opens to %q", j.ID, got, opened.Result)
			}
		}
		for _, e := range j.Errors {
			if got, _ := core.SealedKeyID([]byte(e.Error)); got != kid {
				t.Fatalf("job %d: error text under %q, want %q", j.ID, got, kid)
			}
		}
		for _, e := range opened.Errors {
			if e.Error != "card 5500 declined" || e.Trace != "stack" {
				t.Fatalf("job %d: error entry opens to %+v", j.ID, e)
			}
		}
	}
}

// TestKeysRotate: a dry run counts and changes nothing; a rotation
// re-seals every job that is not running, reports the running one and
// exits 1 at its pass bound; once that job has finished, a second run
// re-seals it too and exits 0.
func TestKeysRotate(t *testing.T) {
	t.Parallel()
	f := newRotationFixture(t)
	keys := map[string]string{keysEnv: f.specNew}
	before := allJobs(t, f.st)

	r := cliEnv(t, keys, f.db, "keys", "rotate", "--dry-run")
	if r.code != 0 || !strings.Contains(r.stdout, "dry run: 5 jobs; 7 values in 4 jobs sealed with keys other than k2 (k1: 7), 1 of the jobs running") {
		t.Fatalf("dry run: %s", r)
	}
	for i, j := range allJobs(t, f.st) {
		if string(j.Args) != string(before[i].Args) || string(j.Result) != string(before[i].Result) {
			t.Fatalf("a dry run changed job %d", j.ID)
		}
	}

	r = cliEnv(t, keys, f.db, "keys", "rotate", "--batch", "2", "--max-passes", "2", "--interval", "10ms")
	if r.code != 1 || !strings.Contains(r.stderr, "stopped after 2 passes with 1 job still under other keys (1 running)") {
		t.Fatalf("rotate with a running job: want exit 1 naming it: %s", r)
	}
	if !strings.Contains(r.stdout, "pass 1: 4 jobs read, 3 rewritten, 0 changed meanwhile, 0 not openable; 1 value in 1 job sealed with keys other than k2 (k1: 1), 1 of the jobs running") ||
		!strings.Contains(r.stdout, "pass 2: 4 jobs read, 0 rewritten") {
		t.Fatalf("rotate output: %s", r)
	}
	for _, j := range allJobs(t, f.st) {
		if j.ID == f.running.ID {
			if got, _ := core.SealedKeyID(j.Args); got != "k1" || j.State != core.StateRunning || j.ClaimSeq != f.running.ClaimSeq {
				t.Fatalf("the running job was touched: %s under %q at ClaimSeq %d", j.State, got, j.ClaimSeq)
			}
		} else if j.Kind != "note" {
			if got, _ := core.SealedKeyID(j.Args); got != "k2" {
				t.Fatalf("job %d (%s) still under %q after the first run", j.ID, j.State, got)
			}
		}
	}

	f.finishRunning(t)
	r = cliEnv(t, keys, f.db, "keys", "rotate", "-o", "json")
	if r.code != 0 {
		t.Fatalf("rotate after the running job finished: %s", r)
	}
	rep := decodeJSON[rotateReport](t, r.stdout)
	if !rep.Done || rep.CurrentKey != "k2" || len(rep.Passes) != 1 || rep.Passes[0].Rewritten != 1 || rep.Passes[0].Read != 5 || rep.Remaining.OldJobs != 0 || rep.Remaining.Jobs != 5 {
		t.Fatalf("rotate -o json: %+v", rep)
	}
	f.checkAllUnder(t, "k2")

	// Nothing left: another run rewrites nothing.
	r = cliEnv(t, keys, f.db, "keys", "rotate")
	if r.code != 0 || !strings.Contains(r.stdout, "pass 1: 5 jobs read, 0 rewritten") || !strings.Contains(r.stdout, "done: no stored value is sealed with a key other than k2") {
		t.Fatalf("rotate of a rotated table: %s", r)
	}
	// k1 can go: a keyring of k2 alone opens everything.
	k2, err := core.ParseKeyring(strings.SplitN(f.specNew, ",", 2)[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range allJobs(t, f.st) {
		if _, err := k2.OpenJob(j); err != nil {
			t.Fatalf("job %d does not open without k1: %v", j.ID, err)
		}
	}
}

// TestKeysRotateWaitsForRunningJobs: passes repeat, --interval apart,
// until the job that was running when the first pass went by is
// re-sealed too.
func TestKeysRotateWaitsForRunningJobs(t *testing.T) {
	t.Parallel()
	f := newRotationFixture(t)
	e, out, errb := testEnv("")
	e.getenv = func(k string) string { return map[string]string{keysEnv: f.specNew}[k] }
	done := make(chan int, 1)
	go func() {
		done <- run(context.Background(), e, []string{"--db", f.db, "keys", "rotate", "--interval", "100ms", "--max-passes", "200"})
	}()
	waitFor(t, 20*time.Second, "the first pass", func() bool { return strings.Contains(out.String(), "pass 1:") })
	f.finishRunning(t)
	select {
	case code := <-done:
		if code != 0 || !strings.Contains(out.String(), "done:") {
			t.Fatalf("rotate exited %d\nstdout:\n%s\nstderr:\n%s", code, out, errb)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("rotate did not end after the running job finished\nstdout:\n%s", out)
	}
	f.checkAllUnder(t, "k2")
}

// TestKeysRotateErrors: no keyring, bad flags, a store without the
// capability, and values under a key the keyring lacks.
func TestKeysRotateErrors(t *testing.T) {
	t.Parallel()
	f := newRotationFixture(t)
	for _, tc := range []struct {
		vars map[string]string
		db   string
		args []string
		code int
		want string
	}{
		{nil, f.db, nil, 2, "needs the keyring"},
		{map[string]string{keysEnv: f.specNew}, f.db, []string{"--batch", "0"}, 2, "--batch"},
		{map[string]string{keysEnv: f.specNew}, f.db, []string{"--max-passes", "0"}, 2, "--max-passes"},
		{map[string]string{keysEnv: f.specNew}, "test-norewrite:x", nil, 1, "does not implement contract.SealedRewriter"},
		{map[string]string{keysEnv: f.specNew}, "test-norewrite:x", []string{"--dry-run"}, 1, "does not implement contract.SealedRewriter"},
	} {
		r := cliEnv(t, tc.vars, tc.db, append([]string{"keys", "rotate"}, tc.args...)...)
		if r.code != tc.code || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("keys rotate %v on %s: want exit %d naming %q: %s", tc.args, tc.db, tc.code, tc.want, r)
		}
	}

	// A keyring without k1: nothing opens, nothing is written, every job
	// is named, and no key material is printed.
	f.finishRunning(t)
	k3 := testKeyring(t, "k3")
	r := cliEnv(t, map[string]string{keysEnv: k3}, f.db, "keys", "rotate", "--interval", "1ms")
	if r.code != 1 || !strings.Contains(r.stderr, "values of 4 jobs do not open with this keyring") ||
		!strings.Contains(r.stderr, `(key id "k1"): key id not in this process's keyring`) {
		t.Fatalf("rotate without the old key: %s", r)
	}
	if strings.Count(r.stdout, "pass ") != 1 {
		t.Fatalf("rotate kept passing over values that cannot open: %s", r)
	}
	if strings.Contains(r.stdout+r.stderr, k3[3:]) || strings.Contains(r.stdout+r.stderr, f.specOld[3:]) {
		t.Fatalf("rotate printed key material: %s", r)
	}
	for _, j := range allJobs(t, f.st) {
		if j.Kind != "note" {
			if kid, _ := core.SealedKeyID(j.Args); kid != "k1" {
				t.Fatalf("job %d was rewritten under %q without its key", j.ID, kid)
			}
		}
	}
	// The dry run reports them too, and exits 0.
	r = cliEnv(t, map[string]string{keysEnv: k3}, f.db, "keys", "rotate", "--dry-run", "-o", "json")
	if r.code != 0 {
		t.Fatalf("dry run: %s", r)
	}
	var rep rotateReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Remaining.Unopenable != 4 || len(rep.Remaining.Failures) != 4 || rep.Done || !rep.DryRun {
		t.Fatalf("dry run without the old key: %+v", rep)
	}
}

// TestKeysRotateKeepsPlainText: of an error entry whose message is sealed
// and whose trace is not, the message moves to the new key and the trace
// stays plain.
func TestKeysRotateKeepsPlainText(t *testing.T) {
	t.Parallel()
	db := tempDB(t)
	st := openStore(t, db)
	specOld := testKeyring(t, "k1")
	old, err := core.ParseKeyring(specOld)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Microsecond)
	if _, err := st.Insert(ctx, now, []core.InsertParams{{Queue: "q", Kind: "k", Args: []byte(`{}`), Priority: 5, MaxAttempts: 1, RunAt: now}}); err != nil {
		t.Fatal(err)
	}
	jobs, err := st.Claim(ctx, contract.ClaimParams{Queue: "q", WorkerID: "w", Limit: 1, Now: now, LeaseUntil: now.Add(time.Hour)})
	if err != nil || len(jobs) != 1 {
		t.Fatalf("claim: %v, %v", jobs, err)
	}
	sealed := old.SealAttemptError(core.AttemptError{Error: "secret message"})
	ae := core.AttemptError{Attempt: 1, At: now, Error: sealed.Error, Trace: "plain trace"}
	if _, err := st.Finish(ctx, []contract.Outcome{{JobID: jobs[0].ID, WorkerID: "w", ClaimSeq: jobs[0].ClaimSeq, Kind: contract.OutcomeDiscard, At: now, Error: &ae}}); err != nil {
		t.Fatal(err)
	}
	spec := testKeyring(t, "k2") + "," + specOld
	if r := cliEnv(t, map[string]string{keysEnv: spec}, db, "keys", "rotate"); r.code != 0 {
		t.Fatalf("rotate: %s", r)
	}
	got := allJobs(t, st)[0].Errors[0]
	if kid, _ := core.SealedKeyID([]byte(got.Error)); kid != "k2" || got.Trace != "plain trace" {
		t.Fatalf("after rotate the entry is %+v; want the message under k2 and the trace plain", got)
	}
}
