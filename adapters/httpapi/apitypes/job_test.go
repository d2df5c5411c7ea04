package apitypes

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/backlogq/backlog/core"
)

// FromCore writes what the API documents for each field.
func TestFromCore(t *testing.T) {
	if FromCore(nil) != nil {
		t.Fatal("FromCore(nil) is not nil")
	}
	east := time.FixedZone("east", 3*3600)
	at := time.Date(2030, 1, 2, 6, 4, 5, 123000, east)
	j := &core.Job{
		ID: 7, Queue: "q", Kind: "k", Args: []byte(`{"n": 1}`), Priority: 3, State: core.StateRetryable,
		Attempt: 1, ClaimSeq: 2, MaxAttempts: 5, RunAt: at, CreatedAt: at, AttemptedAt: at, LeaseUntil: at,
		UniqueKey: "u", PartitionKey: "p", Tags: []string{"t"}, Metadata: map[string]string{"a": "b"},
		Errors:   []core.AttemptError{{Attempt: 1, At: at, Error: "boom", Cause: core.CauseHandlerError}},
		WorkerID: "w", Result: []byte(`{"ok": true}`),
	}
	got, err := json.Marshal(FromCore(j))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"id":7,"queue":"q","kind":"k","args":{"n":1},"priority":3,"state":"retryable","attempt":1,"claim_seq":2,` +
		`"max_attempts":5,"run_at":"2030-01-02T03:04:05.000123Z","unique_key":"u","partition_key":"p","tags":["t"],` +
		`"metadata":{"a":"b"},"errors":[{"attempt":1,"at":"2030-01-02T03:04:05.000123Z","error":"boom","cause":"handler_error"}],` +
		`"result":{"ok":true},"created_at":"2030-01-02T03:04:05.000123Z","attempted_at":"2030-01-02T03:04:05.000123Z",` +
		`"worker_id":"w","lease_until":"2030-01-02T03:04:05.000123Z"}`
	if string(got) != want {
		t.Errorf("FromCore encodes\n%s\nwant\n%s", got, want)
	}
	if j.Errors[0].At.Location() != east {
		t.Error("FromCore changed the stored job's error times")
	}

	for _, c := range []struct {
		name         string
		args, result string
		wantArgs     string
		wantResult   string // "" = absent
	}{
		{"JSON result", `[1]`, `{"a":1}`, `[1]`, `{"a":1}`},
		{"text result", `{}`, "hello\n", `{}`, `"hello\n"`},
		{"result not UTF-8", `{}`, "\"a\xffb\"", `{}`, ``},
		{"no args, empty result", ``, ``, `{}`, ``},
		{"args not JSON", `nope`, ``, `"nope"`, ``},
	} {
		a := FromCore(&core.Job{Args: []byte(c.args), Result: []byte(c.result)})
		if string(a.Args) != c.wantArgs || string(a.Result) != c.wantResult {
			t.Errorf("%s: args %s result %s; want %s and %s", c.name, a.Args, a.Result, c.wantArgs, c.wantResult)
		}
		if back := a.CoreJob(); string(back.Result) != c.result && (c.wantResult == "" || c.wantResult == c.result) {
			t.Errorf("%s: result read back %q, want %q", c.name, back.Result, c.result)
		}
		if (a.ResultBase64 != "") != (c.name == "result not UTF-8") {
			t.Errorf("%s: result_base64 %q", c.name, a.ResultBase64)
		}
		if !json.Valid(a.Args) || a.Result != nil && !json.Valid(a.Result) {
			t.Errorf("%s: invalid JSON in args %q or result %q", c.name, a.Args, a.Result)
		}
	}
}

// The job holding a gone row's unique key (HeldJob in openapi.json)
// carries only what the hold keeps: zero fields are omitted.
func TestFromCoreHeldJob(t *testing.T) {
	got, err := json.Marshal(FromCore(&core.Job{ID: 3, Queue: "q", Kind: "k", UniqueKey: "u"}))
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"id":3,"queue":"q","kind":"k","args":{},"attempt":0,"unique_key":"u"}`; string(got) != want {
		t.Errorf("held job %s; want %s", got, want)
	}
}

// A job encoded by FromCore decodes to the same job (in UTC), lease token
// aside, and CoreJob gives back the stored job.
func TestCoreJobRoundTrip(t *testing.T) {
	at := time.Date(2030, 1, 2, 3, 4, 5, 6000, time.UTC)
	j := &core.Job{
		ID: 9, Queue: "q", Kind: "k", Args: []byte(`{"n":1}`), Priority: 5, State: core.StateCompleted,
		Attempt: 2, ClaimSeq: 3, MaxAttempts: 20, RunAt: at, Deadline: at.Add(time.Hour), UniqueKey: "u",
		PartitionKey: "p", Tags: []string{"a", "b"}, Metadata: map[string]string{"k": "v"},
		Errors:    []core.AttemptError{{Attempt: 1, At: at, Error: "x", Trace: "t", Cause: core.CauseTimeout}},
		Result:    []byte(`{"r":1}`),
		CreatedAt: at, AttemptedAt: at, FinishedAt: at, WorkerID: "w", LeaseUntil: at,
	}
	a := FromCore(j)
	a.LeaseToken = "tok"
	b, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	var back Job
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if back.LeaseToken != "tok" {
		t.Errorf("lease token %q after the round trip", back.LeaseToken)
	}
	if got := back.CoreJob(); !reflect.DeepEqual(got, j) {
		t.Errorf("round trip:\n%+v\nwant\n%+v", got, j)
	}
}

// TestUniqueHoldRoundTrip: a hold converts to the API form (UTC, seconds)
// and back unchanged.
func TestUniqueHoldRoundTrip(t *testing.T) {
	until := time.Date(2026, 11, 27, 9, 0, 0, 123000, time.FixedZone("CET", 3600))
	h := core.UniqueHold{Key: "k", Scope: core.UniqueQueue, ScopedKey: "q:default:k", Queue: "default", Kind: "email",
		JobID: 7, State: core.StateCompleted, UniqueFor: 90 * time.Minute, Until: until}
	a := UniqueHoldFromCore(h)
	if a.Scope != "queue" || a.UniqueForSeconds != 5400 || a.Until == nil || a.Until.Location() != time.UTC {
		t.Fatalf("API form %+v", a)
	}
	back := a.Core()
	if back.Until.Equal(until) && back.Until.Location() == time.UTC {
		back.Until = h.Until
	}
	if back != h {
		t.Fatalf("round trip %+v, want %+v", back, h)
	}
}
