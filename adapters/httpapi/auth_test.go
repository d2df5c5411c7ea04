package httpapi

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/core/contract"
	"github.com/backlogq/backlog/internal/teststores"
)

func TestAuthRoles(t *testing.T) {
	teststores.Run(t, func(t *testing.T, st contract.Store) {
		h := newHarness(t, st, periodicConfig(nil), Config{Tokens: Tokens{Producer: "prod-token", Worker: "work-token", Admin: "admin-token"}})
		h.token = "admin-token"
		h.register("w", map[string]any{"queues": []string{"default"}})
		running := h.claimOne("w", map[string]any{"kind": "k"})
		final := h.submit(map[string]any{"kind": "k"})
		h.must(http.StatusOK, "POST", "/v1/jobs/"+itoa(final.ID)+"/cancel", nil, nil)
		id := itoa(final.ID)

		type call struct {
			method, path, body string
			roles              role // besides admin
		}
		// Each call succeeds (2xx) with an allowed token and gets 403 with
		// the others. The calls are chosen so that succeeding twice (once
		// for the role, once for admin) is fine.
		calls := []call{
			{"POST", "/v1/jobs", `{"kind":"k","delay_seconds":3600}`, roleProducer},
			{"POST", "/v1/jobs/batch", `{"jobs":[{"kind":"k","delay_seconds":3600}]}`, roleProducer},
			{"GET", "/v1/jobs", "", roleProducer},
			{"GET", "/v1/jobs/" + id, "", roleProducer | roleWorker},
			{"GET", "/v1/queues", "", roleProducer},
			{"POST", "/v1/jobs/" + id + "/retry", "", 0},
			{"POST", "/v1/jobs/" + id + "/cancel", "", 0},
			{"POST", "/v1/queues/paused/pause?create=true", "", 0},
			{"POST", "/v1/queues/paused/resume", "", 0},
			{"GET", "/v1/queues/limited/limits", "", roleProducer},
			{"PUT", "/v1/queues/limited/limits", `{"max_running":3}`, 0},
			{"GET", "/v1/periodic", "", roleProducer},
			{"POST", "/v1/periodic/hourly/pause", "", 0},
			{"POST", "/v1/periodic/hourly/resume", "", 0},
			{"POST", "/v1/periodic/hourly/run", "", 0},
			{"GET", "/v1/workers", "", 0},
			{"PUT", "/v1/workers/w", `{"queues":["default"]}`, roleWorker},
			{"POST", "/v1/workers/w/heartbeat", `{"leases":["` + running.LeaseToken + `"]}`, roleWorker},
			{"POST", "/v1/workers/w/claim", `{}`, roleWorker},
			{"POST", "/v1/jobs/" + itoa(running.ID) + "/lease", `{"lease_token":"` + running.LeaseToken + `"}`, roleWorker},
			{"POST", "/v1/workers/w/outcomes", `{"outcomes":[{"job_id":1,"lease_token":"garbage","type":"complete"}]}`, roleWorker},
			{"PUT", "/v1/workers/gone", `{"queues":["default"]}`, roleWorker},
			{"DELETE", "/v1/workers/gone", "", roleWorker},
		}
		tokens := map[role]string{roleProducer: "prod-token", roleWorker: "work-token", roleAdmin: "admin-token"}
		for _, c := range calls {
			for r, tok := range tokens {
				allowed := r == roleAdmin || c.roles&r != 0
				var body any
				if c.body != "" {
					body = c.body
				}
				before := h.state()
				res := h.send(req{method: c.method, path: c.path, body: body, token: &tok})
				if allowed {
					if res.status >= 300 {
						t.Fatalf("%s %s with %s: %d %s", c.method, c.path, tok, res.status, res.body)
					}
					continue
				}
				wantProblem(t, res, SlugForbidden)
				if after := h.state(); after != before {
					t.Fatalf("forbidden %s %s changed the store", c.method, c.path)
				}
			}
		}
		// Outcomes: worker and admin only.
		prod := "prod-token"
		wantProblem(t, h.send(req{method: "POST", path: outcomePath(running, "complete"), body: map[string]any{"lease_token": running.LeaseToken}, token: &prod}), SlugForbidden)
		wantProblem(t, h.send(req{method: "DELETE", path: "/v1/jobs/" + id, token: &prod}), SlugForbidden)
		work := "work-token"
		r := h.send(req{method: "POST", path: outcomePath(running, "complete"), body: map[string]any{"lease_token": running.LeaseToken}, token: &work})
		if r.status != http.StatusOK {
			t.Fatalf("worker complete: %d %s", r.status, r.body)
		}
		wantProblem(t, h.send(req{method: "DELETE", path: "/v1/jobs/" + id, token: &work}), SlugForbidden)
		if r := h.do("DELETE", "/v1/jobs/"+id, nil); r.status != http.StatusNoContent {
			t.Fatalf("admin delete: %d %s", r.status, r.body)
		}

		// Missing, malformed and unknown tokens: 401 with a challenge.
		empty, wrong := "", "nope"
		for _, q := range []req{
			{method: "GET", path: "/v1/jobs", token: &empty},
			{method: "GET", path: "/v1/jobs", token: &wrong},
			{method: "GET", path: "/v1/jobs", token: &empty, header: map[string]string{"Authorization": "Basic YTpi"}},
			{method: "GET", path: "/v1/jobs", token: &empty, header: map[string]string{"Authorization": "Bearer"}},
			{method: "GET", path: "/v1/jobs", token: &empty, header: map[string]string{"Authorization": "Bearer prod-token-and-more"}},
			{method: "POST", path: "/v1/jobs", body: map[string]any{"kind": "k"}, token: &wrong},
		} {
			before := h.state()
			r := h.send(q)
			wantProblem(t, r, SlugUnauthorized)
			if !strings.HasPrefix(r.header.Get("WWW-Authenticate"), "Bearer") {
				t.Fatalf("401 without a Bearer challenge: %v", r.header)
			}
			if h.state() != before {
				t.Fatal("an unauthorized request changed the store")
			}
		}
		// The scheme is case-insensitive.
		if r := h.send(req{method: "GET", path: "/v1/queues", token: &empty, header: map[string]string{"Authorization": "bearer prod-token"}}); r.status != http.StatusOK {
			t.Fatalf("lower-case scheme: %d", r.status)
		}
		// Health and the OpenAPI document need no token.
		if r := h.send(req{method: "GET", path: "/healthz", token: &empty}); r.status != http.StatusOK || strings.TrimSpace(string(r.body)) != `{"status":"ok"}` {
			t.Fatalf("healthz: %d %s", r.status, r.body)
		}
		if r := h.send(req{method: "GET", path: "/v1/openapi.json", token: &empty}); r.status != http.StatusOK {
			t.Fatalf("openapi: %d", r.status)
		}
	})
}

func TestOpenWhenNoTokens(t *testing.T) {
	h := newHarness(t, teststores.Memory(t), core.Config{}, Config{})
	j := h.submit(map[string]any{"kind": "k"})
	for _, q := range []req{
		{method: "GET", path: "/v1/jobs"},
		{method: "GET", path: "/v1/workers"},
		{method: "POST", path: "/v1/jobs/" + itoa(j.ID) + "/cancel"},
		{method: "GET", path: "/v1/jobs", header: map[string]string{"Authorization": "Bearer anything"}},
	} {
		if r := h.send(q); r.status != http.StatusOK {
			t.Fatalf("%s %s on an open server: %d %s", q.method, q.path, r.status, r.body)
		}
	}
}

func TestOnlyAdminToken(t *testing.T) {
	// With only an admin token, nobody else gets in.
	h := newHarness(t, teststores.Memory(t), core.Config{}, Config{Tokens: Tokens{Admin: "a"}})
	empty := ""
	wantProblem(t, h.send(req{method: "GET", path: "/v1/jobs", token: &empty}), SlugUnauthorized)
	h.token = "a"
	h.must(http.StatusOK, "GET", "/v1/jobs", nil, nil)
}

func TestStoreGoneIsUnavailable(t *testing.T) {
	teststores.Run(t, func(t *testing.T, st contract.Store) {
		h := newHarness(t, st, core.Config{}, Config{})
		h.register("w", map[string]any{"queues": []string{"default"}})
		j := h.claimOne("w", map[string]any{"kind": "k"})
		if err := st.Close(); err != nil {
			t.Fatal(err)
		}
		for _, q := range []req{
			{method: "GET", path: "/healthz"},
			{method: "POST", path: "/v1/jobs", body: map[string]any{"kind": "k"}},
			{method: "POST", path: "/v1/jobs/batch", body: map[string]any{"jobs": []map[string]any{{"kind": "k"}}}},
			{method: "GET", path: "/v1/jobs"},
			{method: "GET", path: "/v1/jobs/1"},
			{method: "GET", path: "/v1/queues"},
			{method: "POST", path: "/v1/queues/default/pause"},
			{method: "GET", path: "/v1/workers"},
			{method: "PUT", path: "/v1/workers/w2", body: map[string]any{"queues": []string{"default"}}},
			{method: "POST", path: "/v1/workers/w/heartbeat", body: map[string]any{"leases": []string{j.LeaseToken}}},
			{method: "POST", path: "/v1/workers/w/claim", body: map[string]any{"wait_seconds": 1}},
			{method: "POST", path: outcomePath(j, "complete"), body: map[string]any{"lease_token": j.LeaseToken}},
			{method: "POST", path: "/v1/workers/w/outcomes", body: map[string]any{"outcomes": []any{map[string]any{"job_id": j.ID, "lease_token": j.LeaseToken, "type": "complete"}}}},
			{method: "POST", path: "/v1/workers/w/outcomes", body: map[string]any{"outcomes": []any{map[string]any{"job_id": j.ID, "lease_token": j.LeaseToken, "type": "fail", "error": "x"}}}},
			{method: "POST", path: "/v1/jobs/1/cancel"},
			{method: "DELETE", path: "/v1/jobs/1"},
		} {
			r := h.send(q)
			p := wantProblem(t, r, SlugUnavailable)
			if strings.Contains(p.Detail, "closed") {
				t.Fatalf("detail leaks the store error: %q", p.Detail)
			}
		}
	})
}

func TestOpenAPIDocument(t *testing.T) {
	var doc struct {
		OpenAPI    string                               `json:"openapi"`
		Paths      map[string]map[string]map[string]any `json:"paths"`
		Components struct {
			Schemas         map[string]any `json:"schemas"`
			SecuritySchemes map[string]struct {
				Type   string `json:"type"`
				Scheme string `json:"scheme"`
			} `json:"securitySchemes"`
		} `json:"components"`
	}
	if err := json.Unmarshal(openapiDoc, &doc); err != nil {
		t.Fatalf("openapi.json does not parse: %v", err)
	}
	if !strings.HasPrefix(doc.OpenAPI, "3.1.") {
		t.Fatalf("openapi %q, want 3.1.x", doc.OpenAPI)
	}
	for _, rt := range routes {
		ops, ok := doc.Paths[rt.path]
		if !ok {
			t.Errorf("route %s %s missing from openapi.json", rt.method, rt.path)
			continue
		}
		op, ok := ops[strings.ToLower(rt.method)]
		if !ok {
			t.Errorf("method %s of %s missing from openapi.json", rt.method, rt.path)
			continue
		}
		if op["responses"] == nil || op["operationId"] == nil {
			t.Errorf("%s %s lacks responses or operationId", rt.method, rt.path)
		}
	}
	// And nothing documented that the server does not serve.
	served := map[string]bool{}
	for _, rt := range routes {
		served[strings.ToLower(rt.method)+" "+rt.path] = true
	}
	for p, ops := range doc.Paths {
		for m := range ops {
			if m == "parameters" {
				continue
			}
			if !served[m+" "+p] {
				t.Errorf("openapi.json documents %s %s, which the server does not serve", m, p)
			}
		}
	}
	for _, s := range []string{"Problem", "Job", "SubmitRequest", "Worker"} {
		if doc.Components.Schemas[s] == nil {
			t.Errorf("schema %s missing", s)
		}
	}
	if b := doc.Components.SecuritySchemes["bearer"]; b.Type != "http" || b.Scheme != "bearer" {
		t.Errorf("bearer security scheme: %+v", b)
	}
	// Served as is.
	h := newHarness(t, teststores.Memory(t), core.Config{}, Config{})
	r := h.do("GET", "/v1/openapi.json", nil)
	if r.status != http.StatusOK || string(r.body) != string(openapiDoc) || !strings.HasPrefix(r.header.Get("Content-Type"), "application/json") {
		t.Fatalf("GET /v1/openapi.json: %d %s", r.status, r.header)
	}
}
