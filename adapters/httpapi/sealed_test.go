package httpapi

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/core/contract"
	"github.com/backlogq/backlog/internal/teststores"
)

func sealedTestKeys(t *testing.T) *core.Keyring {
	t.Helper()
	k, err := core.NewKeyring("k1", map[string][]byte{"k1": bytes.Repeat([]byte{7}, core.KeySize)})
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// TestSealedValuesThroughTheAPI: with keys on the server's client, args a
// producer submits in clear are stored sealed; results and error text a
// remote worker reports in clear are stored sealed, by the single and the
// batch outcome endpoints alike (also on a server that did not hand the
// job out); callers of the roles in OpenSealedFor read them opened, the
// others read the stored ciphertext.
func TestSealedValuesThroughTheAPI(t *testing.T) {
	teststores.Run(t, func(t *testing.T, st contract.Store) {
		keys := sealedTestKeys(t)
		ccfg := core.Config{Encryption: &core.Encryption{Keys: keys, Results: true, Errors: true}}
		cfg := Config{Tokens: Tokens{Producer: "p", Worker: "w", Admin: "a"}}
		h := newHarness(t, st, ccfg, cfg)
		other := newHarness(t, st, ccfg, cfg) // a second server: claims it did not hand out
		ctx := t.Context()

		h.token = "p"
		var ids []int64
		for i := range 4 {
			ids = append(ids, h.submit(map[string]any{"kind": "mail", "args": map[string]any{"to": "bob", "n": i}}).ID)
		}
		for _, id := range ids {
			j, err := st.Get(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if !contract.IsSealed(j.Args) || strings.Contains(string(j.Args), "bob") {
				t.Fatalf("stored args %s; want sealed", j.Args)
			}
		}
		if got := h.get(ids[0]); !contract.IsSealed(got.Args) {
			t.Fatalf("producer read args %s; want the ciphertext (producer not in OpenSealedFor)", got.Args)
		}

		h.token = "w"
		h.register("w1", map[string]any{"queues": []string{"default"}})
		jobs := h.claim("w1", map[string]any{"limit": 4})
		if len(jobs) != 4 {
			t.Fatalf("claimed %d jobs; want 4", len(jobs))
		}
		byID := map[int64]*Job{}
		for _, j := range jobs {
			if !strings.Contains(string(j.Args), `"bob"`) {
				t.Fatalf("worker claimed args %s; want them opened", j.Args)
			}
			byID[j.ID] = j
		}
		// Single endpoints on this server, the batch on the other one.
		h.must(http.StatusOK, "POST", outcomePath(byID[ids[0]], "complete"), map[string]any{"lease_token": byID[ids[0]].LeaseToken, "result": map[string]any{"secret": "r0"}}, nil)
		h.must(http.StatusOK, "POST", outcomePath(byID[ids[1]], "fail"), map[string]any{"lease_token": byID[ids[1]].LeaseToken, "error": "secret e1", "trace": "secret t1", "action": "discard"}, nil)
		other.token = "w"
		var out OutcomesResponse
		other.must(http.StatusOK, "POST", "/v1/workers/w1/outcomes", OutcomesRequest{Outcomes: []OutcomeItem{
			{JobID: ids[2], LeaseToken: byID[ids[2]].LeaseToken, Type: "complete", Result: json.RawMessage(`{"secret":"r2"}`)},
			{JobID: ids[3], LeaseToken: byID[ids[3]].LeaseToken, Type: "fail", Error: "secret e3", Action: "discard"},
		}}, &out)
		for _, r := range out.Results {
			if r.Problem != nil {
				t.Fatalf("batch item %d: %+v", r.JobID, r.Problem)
			}
		}

		for _, id := range ids {
			j, err := st.Get(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(string(j.Result), "secret") || (j.Result != nil && !contract.IsSealed(j.Result)) {
				t.Fatalf("job %d: stored result %s; want sealed", id, j.Result)
			}
			for _, e := range j.Errors {
				if strings.Contains(e.Error+e.Trace, "secret") || !contract.IsSealedText(e.Error) {
					t.Fatalf("job %d: stored error %+v; want sealed", id, e)
				}
			}
		}

		h.token = "a"
		for i, id := range ids {
			j := h.get(id)
			want := map[int]string{0: "r0", 1: "secret e1", 2: "r2", 3: "secret e3"}[i]
			if got := string(j.Result) + errorsText(j.Errors); !strings.Contains(got, want) {
				t.Fatalf("admin read job %d as %s; want %q opened", id, got, want)
			}
		}
		h.token = "p"
		if j := h.get(ids[0]); !contract.IsSealed(j.Result) {
			t.Fatalf("producer read result %s; want the ciphertext", j.Result)
		}
		var page ListResponse
		h.must(http.StatusOK, "GET", "/v1/jobs?limit=10", nil, &page)
		for _, j := range page.Jobs {
			if !contract.IsSealed(j.Args) {
				t.Fatalf("producer listed args %s; want the ciphertext", j.Args)
			}
		}
	})
}

func errorsText(es []core.AttemptError) string {
	var b strings.Builder
	for _, e := range es {
		b.WriteString(e.Error + " " + e.Trace + " ")
	}
	return b.String()
}

// TestOpenSealedFor: the roles named read opened values; "none" opens for
// nobody, an open API (no tokens) opens for every caller, and a name
// that is not a role is refused by New.
func TestOpenSealedFor(t *testing.T) {
	st := teststores.Memory(t)
	keys := sealedTestKeys(t)
	ccfg := core.Config{Encryption: &core.Encryption{Keys: keys}}
	for _, c := range []struct {
		spec   string
		tokens Tokens
		token  string
		opened bool
	}{
		{"producer", Tokens{Producer: "p", Admin: "a"}, "p", true},
		{"producer", Tokens{Producer: "p", Admin: "a"}, "a", false},
		{"none", Tokens{Producer: "p", Admin: "a"}, "a", false},
		{"", Tokens{}, "", true},
		{"none", Tokens{}, "", false},
	} {
		h := newHarness(t, st, ccfg, Config{Tokens: c.tokens, OpenSealedFor: c.spec})
		h.token = c.token
		j := h.submit(map[string]any{"kind": "k", "args": map[string]any{"x": 1}})
		if got := h.get(j.ID); contract.IsSealed(got.Args) == c.opened {
			t.Errorf("OpenSealedFor %q, token %q: read %s; want opened %v", c.spec, c.token, got.Args, c.opened)
		}
	}
	c, err := core.NewClient(st, core.Config{MaintenanceInterval: -1, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := New(c, Config{OpenSealedFor: "worker,root"}); err == nil || !strings.Contains(err.Error(), `"root"`) {
		t.Fatalf("New with OpenSealedFor worker,root: %v; want an error naming root", err)
	}
}

// TestSealedTextIsNeverCut: an error a worker sealed itself is stored
// whole (cutting it to the plain-text bound would destroy it) and opens;
// sealed text beyond MaxSealedTextBytes is replaced by a note.
func TestSealedTextIsNeverCut(t *testing.T) {
	st := teststores.Memory(t)
	keys := sealedTestKeys(t)
	h := newHarness(t, st, core.Config{}, Config{})
	h.submit(map[string]any{"kind": "k"})
	h.submit(map[string]any{"kind": "k"})
	h.register("w1", map[string]any{"queues": []string{"default"}})
	jobs := h.claim("w1", map[string]any{"limit": 2})
	long := strings.Repeat("é", contract.MaxErrorBytes) // over the plain bound
	sealed := keys.SealAttemptError(core.AttemptError{Error: long}.Bounded())
	h.must(http.StatusOK, "POST", outcomePath(jobs[0], "fail"), map[string]any{"lease_token": jobs[0].LeaseToken, "error": sealed.Error, "action": "discard"}, nil)
	j, err := st.Get(t.Context(), jobs[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := keys.OpenAttemptError(j.Errors[0]); err != nil {
		t.Fatalf("a sealed error stored through the API does not open: %v (stored %d bytes, sent %d)", err, len(j.Errors[0].Error), len(sealed.Error))
	}
	huge := "backlog-enc:1:k1:" + strings.Repeat("A", contract.MaxSealedTextBytes)
	h.must(http.StatusOK, "POST", outcomePath(jobs[1], "fail"), map[string]any{"lease_token": jobs[1].LeaseToken, "error": huge, "action": "discard"}, nil)
	if j, _ = st.Get(t.Context(), jobs[1].ID); !strings.Contains(j.Errors[0].Error, "dropped") {
		t.Fatalf("over-long sealed text stored as %d bytes; want a note", len(j.Errors[0].Error))
	}
}

// TestSubmittedSealedArgsAreRefused: a producer reads another job's sealed
// args (the ciphertext) and submits them as its own job's args: the job
// would run with the other job's plaintext. The server refuses args that
// are an envelope, well-formed or not, with 400, on the single and the
// batch endpoint, on a server with keys and without; nothing is stored.
// Plain args are still sealed by a server holding keys.
func TestSubmittedSealedArgsAreRefused(t *testing.T) {
	keys := sealedTestKeys(t)
	for _, withKeys := range []bool{true, false} {
		st := teststores.Memory(t)
		var ccfg core.Config
		if withKeys {
			ccfg.Encryption = &core.Encryption{Keys: keys}
		}
		h := newHarness(t, st, ccfg, Config{Tokens: Tokens{Producer: "p", Admin: "a"}})
		h.token = "p"
		victim := h.submit(map[string]any{"kind": "pay", "args": map[string]any{"to": "victim", "cents": 100}})
		envelope := json.RawMessage(keys.SealArgs("pay", []byte(`{"to":"mallory","cents":100000}`)))
		if withKeys {
			if !contract.IsSealed(victim.Args) {
				t.Fatalf("a server with keys stored plain args %s", victim.Args)
			}
			envelope = victim.Args // what a producer reads back
		}
		for name, args := range map[string]json.RawMessage{
			"replayed":        envelope,
			"no kid, no ct":   json.RawMessage(`{"backlog_enc":"x"}`),
			"ct not base64":   json.RawMessage(`{"backlog_enc":1,"kid":"k1","ct":"!!"}`),
			"ct too short":    json.RawMessage(`{"backlog_enc":1,"kid":"k1","ct":"AAAA"}`),
			"version 2":       json.RawMessage(`{"backlog_enc":2,"kid":"k1","ct":"AAAA"}`),
			"an extra member": json.RawMessage(`{"backlog_enc":1,"kid":"k1","ct":"AAAA","x":1}`),
		} {
			r := h.do("POST", "/v1/jobs", map[string]any{"kind": "pay", "args": args})
			p := wantProblem(t, r, SlugInvalidRequest)
			if !strings.Contains(p.Detail, "backlog_enc") {
				t.Errorf("keys %v, %s: detail %q does not say why", withKeys, name, p.Detail)
			}
			r = h.do("POST", "/v1/jobs/batch", map[string]any{"jobs": []map[string]any{
				{"kind": "pay", "args": map[string]any{"to": "x"}}, {"kind": "pay", "args": args},
			}})
			if p := wantProblem(t, r, SlugInvalidRequest); !strings.Contains(p.Detail, "jobs[1]") {
				t.Errorf("keys %v, %s: batch detail %q does not name the item", withKeys, name, p.Detail)
			}
		}
		if n := len(h.snapshot()); n != 1 {
			t.Fatalf("keys %v: %d jobs stored; want only the first", withKeys, n)
		}
	}
}

// TestAcceptSealedArgs: with Config.AcceptSealedArgs the server takes args
// producers sealed themselves, stored as given, but still refuses
// malformed envelopes, and on a server with keys envelopes that do not open
// for the job's kind.
func TestAcceptSealedArgs(t *testing.T) {
	keys := sealedTestKeys(t)
	other, err := core.NewKeyring("k9", map[string][]byte{"k9": bytes.Repeat([]byte{9}, core.KeySize)})
	if err != nil {
		t.Fatal(err)
	}
	for _, withKeys := range []bool{true, false} {
		st := teststores.Memory(t)
		var ccfg core.Config
		if withKeys {
			ccfg.Encryption = &core.Encryption{Keys: keys}
		}
		h := newHarness(t, st, ccfg, Config{AcceptSealedArgs: true})
		sealed := keys.SealArgs("pay", []byte(`{"to":"bob"}`))
		j := h.submit(map[string]any{"kind": "pay", "args": json.RawMessage(sealed)})
		if stored, err := st.Get(t.Context(), j.ID); err != nil || string(stored.Args) != string(sealed) {
			t.Fatalf("keys %v: stored %s (%v); want the envelope as given", withKeys, stored.Args, err)
		}
		wantProblem(t, h.do("POST", "/v1/jobs", map[string]any{"kind": "pay", "args": json.RawMessage(`{"backlog_enc":"x"}`)}), SlugInvalidRequest)
		wrongKind := h.do("POST", "/v1/jobs", map[string]any{"kind": "refund", "args": json.RawMessage(sealed)})
		unknownKey := h.do("POST", "/v1/jobs", map[string]any{"kind": "pay", "args": json.RawMessage(other.SealArgs("pay", []byte(`{}`)))})
		if withKeys {
			wantProblem(t, wrongKind, SlugInvalidRequest)
			wantProblem(t, unknownKey, SlugInvalidRequest)
		} else if wrongKind.status != http.StatusCreated || unknownKey.status != http.StatusCreated {
			t.Fatalf("a server without keys cannot check what an envelope opens to: %d %s, %d %s", wrongKind.status, wrongKind.body, unknownKey.status, unknownKey.body)
		}
	}
}
