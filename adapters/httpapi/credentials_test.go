package httpapi

import (
	"net/http"
	"strings"
	"testing"

	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/core/contract"
	"github.com/backlogq/backlog/internal/teststores"
)

// credentialTokens configures the role tokens and two per-worker tokens.
var credentialTokens = Config{
	Tokens:       Tokens{Producer: "prod-token", Worker: "shared-token", Admin: "admin-token"},
	WorkerTokens: map[string]string{"team-a": "a-token", "team-b": "b-token"},
}

// TestWorkerIDsAreBoundToTheirCredential: a worker id registered with one
// per-worker token cannot be registered, heartbeated, claimed under,
// completed, failed, snoozed, extended, batched or deregistered with
// another per-worker token or with the shared worker token (403
// forbidden, nothing changed), even with the worker's real lease token,
// and through another server on the same store. Its own token and the
// admin token can.
func TestWorkerIDsAreBoundToTheirCredential(t *testing.T) {
	teststores.Run(t, func(t *testing.T, st contract.Store) {
		h := newHarness(t, st, core.Config{}, credentialTokens)
		other := newHarness(t, st, core.Config{}, credentialTokens) // a second server on the store
		a, admin := "a-token", "admin-token"
		h.token = a
		reg := h.register("wa", map[string]any{"queues": []string{"default"}})
		if got := reg.Worker.Metadata[WorkerCredentialKey]; got != "team-a" {
			t.Fatalf("registration metadata %v; want %s=team-a", reg.Worker.Metadata, WorkerCredentialKey)
		}
		h.token = admin
		h.submit(map[string]any{"kind": "k"})
		h.submit(map[string]any{"kind": "k"})
		h.token = a
		j := h.claim("wa", nil)[0] // a's real token, as if stolen

		before := h.state()
		for _, srv := range []*harness{h, other} {
			for _, tok := range []string{"b-token", "shared-token"} {
				for _, c := range []struct {
					method, path string
					body         any
				}{
					{"PUT", "/v1/workers/wa", map[string]any{"queues": []string{"default"}}},
					{"POST", "/v1/workers/wa/heartbeat", map[string]any{"leases": []string{}}},
					{"POST", "/v1/workers/wa/claim", map[string]any{}},
					{"DELETE", "/v1/workers/wa", nil},
					{"POST", outcomePath(j, "complete"), map[string]any{"lease_token": j.LeaseToken}},
					{"POST", outcomePath(j, "fail"), map[string]any{"lease_token": j.LeaseToken, "error": "x", "action": "discard"}},
					{"POST", outcomePath(j, "snooze"), map[string]any{"lease_token": j.LeaseToken}},
					{"POST", outcomePath(j, "lease"), map[string]any{"lease_token": j.LeaseToken}},
				} {
					tok := tok
					wantProblem(t, srv.send(req{method: c.method, path: c.path, body: c.body, token: &tok}), SlugForbidden)
				}
				var out OutcomesResponse
				tok := tok
				r := srv.send(req{method: "POST", path: "/v1/workers/wa/outcomes", token: &tok, body: map[string]any{"outcomes": []map[string]any{
					{"job_id": j.ID, "lease_token": j.LeaseToken, "type": "complete"},
				}}})
				r.decode(t, &out)
				if r.status != http.StatusOK || out.Results[0].Applied || out.Results[0].Problem == nil || !strings.HasSuffix(out.Results[0].Problem.Type, "/"+SlugForbidden) {
					t.Fatalf("batch with %s: %d %s", tok, r.status, r.body)
				}
			}
		}
		if after := h.state(); after != before {
			t.Fatalf("refused calls changed the store:\n%s\nthen\n%s", before, after)
		}

		// Its own token, through either server, and the admin token may.
		other.token = a
		if hb := other.heartbeat("wa", j.LeaseToken); hb.LeasesExtended != 1 {
			t.Fatalf("heartbeat with the worker's own token: %+v", hb)
		}
		other.token = admin
		adminReg := other.register("wa", map[string]any{"queues": []string{"default"}})
		if got := adminReg.Worker.Metadata[WorkerCredentialKey]; got != "team-a" {
			t.Fatalf("registration by the admin token changed the binding to %q", got)
		}
		other.must(http.StatusOK, "POST", outcomePath(j, "lease"), map[string]any{"lease_token": j.LeaseToken}, nil)
		h.token = a
		h.must(http.StatusOK, "POST", outcomePath(j, "complete"), map[string]any{"lease_token": j.LeaseToken}, nil)
		h.must(http.StatusNoContent, "DELETE", "/v1/workers/wa", nil, nil)

		// Once its record is gone, the id is free for another credential.
		h.token = "b-token"
		if reg := h.register("wa", map[string]any{"queues": []string{"default"}}); reg.Worker.Metadata[WorkerCredentialKey] != "team-b" {
			t.Fatalf("re-registration after deregistering: %v", reg.Worker.Metadata)
		}
	})
}

// TestUnboundWorkerIsBoundOnFirstUse: a record registered without a
// binding (by the admin token, or by a server before bindings) is bound to
// the first worker credential that heartbeats or claims under it.
func TestUnboundWorkerIsBoundOnFirstUse(t *testing.T) {
	st := teststores.Memory(t)
	h := newHarness(t, st, core.Config{}, credentialTokens)
	h.token = "admin-token"
	if reg := h.register("w", map[string]any{"queues": []string{"default"}}); reg.Worker.Metadata[WorkerCredentialKey] != "" {
		t.Fatalf("the admin token bound the worker: %v", reg.Worker.Metadata)
	}
	h.token = "a-token"
	h.heartbeat("w")
	got, err := st.Worker(t.Context(), "w")
	if err != nil || got.Metadata[WorkerCredentialKey] != "team-a" {
		t.Fatalf("record after the first heartbeat: %+v %v", got, err)
	}
	b := "b-token"
	wantProblem(t, h.send(req{method: "POST", path: "/v1/workers/w/claim", token: &b, body: map[string]any{}}), SlugForbidden)

	// Claiming binds too.
	h.token = "admin-token"
	h.register("w2", map[string]any{"queues": []string{"default"}})
	h.token = "b-token"
	h.claim("w2", nil)
	if got, err := st.Worker(t.Context(), "w2"); err != nil || got.Metadata[WorkerCredentialKey] != "team-b" {
		t.Fatalf("record after the first claim: %+v %v", got, err)
	}
}

// TestCredentialMetadataIsReserved: a registration cannot bind itself.
func TestCredentialMetadataIsReserved(t *testing.T) {
	h := newHarness(t, teststores.Memory(t), core.Config{}, credentialTokens)
	h.token = "a-token"
	p := wantProblem(t, h.do("PUT", "/v1/workers/w", map[string]any{"queues": []string{"default"}, "metadata": map[string]string{WorkerCredentialKey: "team-b"}}), SlugInvalidRequest)
	if !strings.Contains(p.Detail, "reserved") {
		t.Fatalf("detail %q", p.Detail)
	}
}

// TestWorkerTokensAreChecked: per-worker token names and tokens are
// checked when the server is made.
func TestWorkerTokensAreChecked(t *testing.T) {
	c, err := core.NewClient(teststores.Memory(t), core.Config{Logger: quietLogger(), MaintenanceInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	for name, cfg := range map[string]Config{
		"role name":            {WorkerTokens: map[string]string{"admin": "x"}},
		"bad name":             {WorkerTokens: map[string]string{"team a": "x"}},
		"empty name":           {WorkerTokens: map[string]string{"": "x"}},
		"long name":            {WorkerTokens: map[string]string{strings.Repeat("n", MaxCredentialName+1): "x"}},
		"empty token":          {WorkerTokens: map[string]string{"a": ""}},
		"same token twice":     {WorkerTokens: map[string]string{"a": "x", "b": "x"}},
		"same as a role token": {Tokens: Tokens{Admin: "x"}, WorkerTokens: map[string]string{"a": "x"}},
	} {
		if _, err := New(c, cfg); err == nil {
			t.Errorf("%s: New accepted it", name)
		}
	}
	// Per-worker tokens alone close the API.
	h := newHarness(t, teststores.Memory(t), core.Config{}, Config{WorkerTokens: map[string]string{"a": "a-token"}})
	wantProblem(t, h.do("GET", "/v1/jobs", nil), SlugUnauthorized)
	h.token = "a-token"
	wantProblem(t, h.do("GET", "/v1/jobs", nil), SlugForbidden)
	h.register("w", map[string]any{"queues": []string{"default"}})
}
