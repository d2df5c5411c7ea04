package httpapi

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/internal/teststores"
)

// TestStrictRefusesInvalidUTF8: a string that is not UTF-8, or holds a lone
// surrogate escape, is refused with 400 wherever it is in a body (kind,
// unique_key, tags, metadata, args, a registration), instead of being
// rewritten to U+FFFD; nothing is stored.
func TestStrictRefusesInvalidUTF8(t *testing.T) {
	h := newHarness(t, teststores.Memory(t), core.Config{}, Config{})
	for _, tc := range []struct{ path, method, body, at string }{
		{"/v1/jobs", "POST", "{\"kind\":\"k\xff\"}", "/kind"},
		{"/v1/jobs", "POST", `{"kind":"k\ud800"}`, "/kind"},
		{"/v1/jobs", "POST", "{\"kind\":\"k\",\"unique_key\":\"u\xfe\"}", "/unique_key"},
		{"/v1/jobs", "POST", `{"kind":"k","unique_key":"u\udc00"}`, "/unique_key"},
		{"/v1/jobs", "POST", "{\"kind\":\"k\",\"tags\":[\"t\xff\"]}", "/tags/0"},
		{"/v1/jobs", "POST", "{\"kind\":\"k\",\"metadata\":{\"m\xff\":\"v\"}}", ""},
		{"/v1/jobs", "POST", `{"kind":"k","metadata":{"m":"\ud800"}}`, "/metadata/m"},
		{"/v1/jobs", "POST", `{"kind":"k","args":{"s":"\udfff"}}`, "/args/s"},
		{"/v1/jobs", "POST", "{\"kind\":\"k\",\"args\":{\"s\":\"\xff\"}}", "/args/s"},
		{"/v1/jobs/batch", "POST", "{\"jobs\":[{\"kind\":\"k\"},{\"kind\":\"k\",\"partition_key\":\"p\xc0\"}]}", "/jobs/1/partition_key"},
		{"/v1/workers/w1", "PUT", "{\"queues\":[\"default\"],\"tags\":[\"\xff\"]}", "/tags/0"},
	} {
		r := h.send(req{method: tc.method, path: tc.path, body: tc.body})
		p := wantProblem(t, r, SlugInvalidJSON)
		if !strings.Contains(p.Detail, "UTF-8") || !strings.Contains(p.Detail, tc.at) {
			t.Errorf("%s %q: detail %q, want UTF-8 named at %q", tc.path, tc.body, p.Detail, tc.at)
		}
	}
	if n := len(h.snapshot()); n != 0 {
		t.Fatalf("%d jobs stored, want none", n)
	}
	// Valid UTF-8 and surrogate pairs are accepted as they are.
	j := h.submit(map[string]any{"kind": "k", "unique_key": "\U0001F600é", "tags": []string{"ü"}})
	if j.UniqueKey != "\U0001F600é" {
		t.Fatalf("unique key %q", j.UniqueKey)
	}
	h.send(req{method: "POST", path: "/v1/jobs", body: `{"kind":"k2","unique_key":"\ud83d\ude00"}`})
}

// TestHeartbeatNamingAnotherWorkersLeaseIs400: a heartbeat naming a lease
// token of another worker is 400 invalid-lease-token and changes nothing,
// with the shared worker token and with per-worker tokens alike.
func TestHeartbeatNamingAnotherWorkersLeaseIs400(t *testing.T) {
	for _, tc := range []struct{ name, tokA, tokB string }{
		{"shared", "shared-token", "shared-token"},
		{"per-worker", "a-token", "b-token"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, teststores.Memory(t), core.Config{}, credentialTokens)
			h.token = "admin-token"
			h.submit(map[string]any{"kind": "k"})
			h.token = tc.tokA
			h.register("wa", map[string]any{"queues": []string{"default"}})
			j := h.claim("wa", nil)[0]
			h.token = tc.tokB
			h.register("wb", map[string]any{"queues": []string{"default"}})
			before := h.state()
			r := h.do("POST", "/v1/workers/wb/heartbeat", map[string]any{"leases": []string{j.LeaseToken}})
			p := wantProblem(t, r, SlugInvalidLeaseToken)
			if !strings.Contains(p.Detail, "another worker") {
				t.Fatalf("detail %q", p.Detail)
			}
			if after := h.state(); after != before {
				t.Fatalf("the refused heartbeat changed the store:\n%s\nthen\n%s", before, after)
			}
		})
	}
}

// TestProducersMayNotSetReservedMetadata: a submission with the producer
// token may not set a metadata key starting with "backlog." (such as
// core.PeriodicMetadataName); the admin token may. Nothing of a refused
// batch is inserted.
func TestProducersMayNotSetReservedMetadata(t *testing.T) {
	h := newHarness(t, teststores.Memory(t), core.Config{}, credentialTokens)
	h.token = "prod-token"
	for _, key := range []string{core.PeriodicMetadataName, core.PeriodicMetadataAt, "backlog.anything"} {
		p := wantProblem(t, h.do("POST", "/v1/jobs", map[string]any{"kind": "k", "metadata": map[string]string{key: "x"}}), SlugInvalidRequest)
		if !strings.Contains(p.Detail, "reserved") || !strings.Contains(p.Detail, key) {
			t.Fatalf("%s: detail %q", key, p.Detail)
		}
	}
	r := h.do("POST", "/v1/jobs/batch", map[string]any{"jobs": []map[string]any{{"kind": "k"}, {"kind": "k", "metadata": map[string]string{"backlog.periodic": "nightly"}}}})
	if p := wantProblem(t, r, SlugInvalidRequest); !strings.HasPrefix(p.Detail, "jobs[1]: ") {
		t.Fatalf("batch detail %q", p.Detail)
	}
	if n := len(h.snapshot()); n != 0 {
		t.Fatalf("%d jobs stored, want none", n)
	}
	h.submit(map[string]any{"kind": "k", "metadata": map[string]string{"backlogx": "1", "team.backlog.x": "2"}})
	h.token = "admin-token"
	h.submit(map[string]any{"kind": "k", "metadata": map[string]string{"backlog.periodic": "nightly"}})
}

// TestStrictTimesIdsAndQueueNames: times with an offset beyond ±23:59 or
// more than six fractional digits (stores keep microseconds: a finer time
// would be stored as another), integers in paths and query strings
// not in canonical decimal, and the queue names . and .. are refused with
// a 4xx, and nothing is stored.
func TestStrictTimesIdsAndQueueNames(t *testing.T) {
	h := newHarness(t, teststores.Memory(t), core.Config{}, Config{})
	for _, body := range []string{
		`{"kind":"k","run_at":"2030-01-01T00:00:00+24:00"}`,
		`{"kind":"k","run_at":"2030-01-01T00:00:00-24:00"}`,
		`{"kind":"k","run_at":"2030-01-01T00:00:00+00:60"}`,
		`{"kind":"k","run_at":"2030-01-01T00:00:00.1234567891Z"}`,
		`{"kind":"k","run_at":"2030-01-01T00:00:00.1234567Z"}`,
		`{"kind":"k","deadline":"2030-01-01T00:00:00.123456789Z"}`,
		`{"kind":"k","deadline":"2030-01-01T00:00:00.000000000001Z"}`,
	} {
		p := wantProblem(t, h.send(req{method: "POST", path: "/v1/jobs", body: body}), SlugInvalidRequest)
		if !strings.Contains(p.Detail, "/run_at") && !strings.Contains(p.Detail, "/deadline") {
			t.Errorf("%s: detail %q does not say where", body, p.Detail)
		}
	}
	wantProblem(t, h.send(req{method: "POST", path: "/v1/jobs/batch", body: `{"jobs":[{"kind":"k"},{"kind":"k","run_at":"2030-01-01T00:00:00+24:00"}]}`}), SlugInvalidRequest)
	for _, q := range []string{".", ".."} {
		wantProblem(t, h.do("POST", "/v1/jobs", map[string]any{"kind": "k", "queue": q}), SlugInvalidJob)
		wantProblem(t, h.do("PUT", "/v1/workers/w1", map[string]any{"queues": []string{"default", q}}), SlugInvalidRequest)
	}
	if n := len(h.snapshot()); n != 0 {
		t.Fatalf("%d jobs stored, want none", n)
	}

	// Times of up to six fractional digits (what the store keeps) and
	// offsets within ±23:59 are fine, and read back as sent.
	j := h.submit(map[string]any{"kind": "k", "run_at": "2030-01-01T00:00:00.123456+23:59"})
	if want := time.Date(2029, 12, 31, 0, 1, 0, 123456000, time.UTC); !j.RunAt.Equal(want) {
		t.Fatalf("run_at %s, want %s", j.RunAt, want)
	}
	id := itoa(j.ID)
	h.must(http.StatusOK, "GET", "/v1/jobs/"+id, nil, nil)
	for _, path := range []string{
		"/v1/jobs/+" + id, "/v1/jobs/0" + id, "/v1/jobs/%20" + id,
		"/v1/jobs?limit=%2B5", "/v1/jobs?limit=05", "/v1/jobs?after=%2B1", "/v1/jobs?after=00",
		"/v1/jobs?sort=run_at&after=1&after_run_at=" + url.QueryEscape("2030-01-01T00:00:00+24:00"),
		"/v1/queues/default/history?minutes=%2B5", "/v1/queues/default/history?minutes=05",
		"/v1/queues/default/history?since=" + url.QueryEscape("2030-01-01T00:00:00.1234567891Z"),
		"/v1/queues/default/history?since=" + url.QueryEscape("2030-01-01T00:00:00.1234567Z"),
	} {
		r := h.do("GET", path, nil)
		if r.status != http.StatusBadRequest {
			t.Errorf("GET %s: %d, want 400: %.200s", path, r.status, r.body)
		}
	}
	h.must(http.StatusOK, "GET", "/v1/jobs?limit=5&after=0", nil, nil)
}
