package httpapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/core/contract"
	"github.com/backlogq/backlog/internal/teststores"
)

// state captures everything a request could change: every job and every
// worker record.
func (h *harness) state() string {
	h.t.Helper()
	jobs := h.snapshot()
	ws, err := h.st.Workers(h.t.Context())
	if err != nil {
		h.t.Fatal(err)
	}
	b, err := json.Marshal(struct {
		Jobs    []*core.Job
		Workers []core.WorkerInfo
	}{jobs, ws})
	if err != nil {
		h.t.Fatal(err)
	}
	return string(b)
}

func TestMalformedRequestsChangeNothing(t *testing.T) {
	teststores.Run(t, func(t *testing.T, st contract.Store) {
		h := newHarness(t, st, core.Config{}, Config{MaxBodyBytes: 4096})
		h.register("w", map[string]any{"queues": []string{"default"}})
		running := h.claimOne("w", map[string]any{"kind": "k"})
		waiting := h.submit(map[string]any{"kind": "k"})
		other := running.LeaseToken // a valid token of another job than `waiting`
		text := "text/plain"
		none := ""

		jobs := "/v1/jobs"
		complete := outcomePath(running, "complete")
		cases := []struct {
			name string
			req  req
			slug string
		}{
			{"bad JSON", req{method: "POST", path: jobs, body: `{"kind":`}, SlugInvalidJSON},
			{"not JSON", req{method: "POST", path: jobs, body: `hello`}, SlugInvalidJSON},
			{"trailing garbage", req{method: "POST", path: jobs, body: `{"kind":"a"} x`}, SlugInvalidJSON},
			{"two values", req{method: "POST", path: jobs, body: `{"kind":"a"}{"kind":"b"}`}, SlugInvalidJSON},
			{"wrong type", req{method: "POST", path: jobs, body: `{"kind":"a","priority":"high"}`}, SlugInvalidRequest},
			{"fractional priority", req{method: "POST", path: jobs, body: `{"kind":"a","priority":2.5}`}, SlugInvalidRequest},
			{"unknown field", req{method: "POST", path: jobs, body: `{"kind":"a","prio":1}`}, SlugInvalidRequest},
			{"metadata not strings", req{method: "POST", path: jobs, body: `{"kind":"a","metadata":{"n":1}}`}, SlugInvalidRequest},
			{"body an array", req{method: "POST", path: jobs, body: `[]`}, SlugInvalidRequest},
			{"empty body", req{method: "POST", path: jobs, body: ``}, SlugInvalidRequest},
			{"huge body", req{method: "POST", path: jobs, body: `{"kind":"a","args":"` + strings.Repeat("x", 5000) + `"}`}, SlugBodyTooLarge},
			{"huge trailing data", req{method: "POST", path: jobs, body: `{"kind":"a"}` + strings.Repeat(" ", 5000)}, SlugBodyTooLarge},
			{"wrong content type", req{method: "POST", path: jobs, body: `{"kind":"a"}`, contentType: &text}, SlugUnsupportedMediaType},
			{"no content type", req{method: "POST", path: jobs, body: `{"kind":"a"}`, contentType: &none}, SlugUnsupportedMediaType},
			{"missing kind", req{method: "POST", path: jobs, body: `{"args":{}}`}, SlugInvalidJob},
			{"priority 11", req{method: "POST", path: jobs, body: `{"kind":"a","priority":11}`}, SlugInvalidJob},
			{"priority 0", req{method: "POST", path: jobs, body: `{"kind":"a","priority":0}`}, SlugInvalidJob},
			{"max_attempts 0", req{method: "POST", path: jobs, body: `{"kind":"a","max_attempts":0}`}, SlugInvalidJob},
			{"bad queue", req{method: "POST", path: jobs, body: `{"kind":"a","queue":"a b"}`}, SlugInvalidJob},
			{"too many tags", req{method: "POST", path: jobs, body: fmt.Sprintf(`{"kind":"a","tags":[%s"x"]}`, strings.Repeat(`"t",`, contract.MaxTags))}, SlugInvalidJob},
			{"deadline before run_at", req{method: "POST", path: jobs, body: `{"kind":"a","run_at":"2030-01-02T00:00:00Z","deadline":"2030-01-01T00:00:00Z"}`}, SlugInvalidJob},
			{"run_at and delay", req{method: "POST", path: jobs, body: `{"kind":"a","run_at":"2030-01-02T00:00:00Z","delay_seconds":5}`}, SlugInvalidRequest},
			{"negative delay", req{method: "POST", path: jobs, body: `{"kind":"a","delay_seconds":-1}`}, SlugInvalidRequest},
			{"run_at not RFC 3339", req{method: "POST", path: jobs, body: `{"kind":"a","run_at":"tomorrow"}`}, SlugInvalidRequest},
			{"batch item wrong type", req{method: "POST", path: "/v1/jobs/batch", body: `{"jobs":[{"kind":"a"},{"kind":7}]}`}, SlugInvalidRequest},
			{"batch item invalid", req{method: "POST", path: "/v1/jobs/batch", body: `{"jobs":[{"kind":"a"},{"kind":"b","priority":99}]}`}, SlugInvalidJob},
			{"batch not a list", req{method: "POST", path: "/v1/jobs/batch", body: `{"jobs":{"kind":"a"}}`}, SlugInvalidRequest},

			{"unknown job", req{method: "GET", path: "/v1/jobs/987654321"}, SlugJobNotFound},
			{"non-numeric id", req{method: "GET", path: "/v1/jobs/abc"}, SlugInvalidRequest},
			{"id zero", req{method: "GET", path: "/v1/jobs/0"}, SlugInvalidRequest},
			{"cancel non-numeric", req{method: "POST", path: "/v1/jobs/x/cancel"}, SlugInvalidRequest},
			{"list limit 0", req{method: "GET", path: "/v1/jobs?limit=0"}, SlugInvalidRequest},
			{"list limit 1001", req{method: "GET", path: "/v1/jobs?limit=1001"}, SlugInvalidRequest},
			{"list limit x", req{method: "GET", path: "/v1/jobs?limit=x"}, SlugInvalidRequest},
			{"list bad state", req{method: "GET", path: "/v1/jobs?state=bogus"}, SlugInvalidRequest},
			{"list bad order", req{method: "GET", path: "/v1/jobs?order=sideways"}, SlugInvalidRequest},
			{"list bad after", req{method: "GET", path: "/v1/jobs?after=-1"}, SlugInvalidRequest},

			{"garbage lease token", req{method: "POST", path: complete, body: `{"lease_token":"garbage"}`}, SlugInvalidLeaseToken},
			{"missing lease token", req{method: "POST", path: complete, body: `{}`}, SlugInvalidLeaseToken},
			{"token of another job", req{method: "POST", path: outcomePath(waiting, "complete"), body: `{"lease_token":"` + other + `"}`}, SlugInvalidLeaseToken},
			{"stale lease token", req{method: "POST", path: complete, body: `{"lease_token":"` + h.tokenFor(&core.Job{ID: running.ID, ClaimSeq: 1, Attempt: 1}, "someone-else") + `"}`}, SlugLeaseLost},
			{"token of a job not running", req{method: "POST", path: outcomePath(waiting, "complete"), body: `{"lease_token":"` + h.tokenFor(&core.Job{ID: waiting.ID, ClaimSeq: 1, Attempt: 1}, "w") + `"}`}, SlugLeaseLost},
			{"complete unknown field", req{method: "POST", path: complete, body: `{"lease_token":"` + other + `","reslt":1}`}, SlugInvalidRequest},
			{"fail without error", req{method: "POST", path: outcomePath(running, "fail"), body: `{"lease_token":"` + other + `"}`}, SlugInvalidRequest},
			{"fail bad action", req{method: "POST", path: outcomePath(running, "fail"), body: `{"lease_token":"` + other + `","error":"x","action":"explode"}`}, SlugInvalidRequest},
			{"fail negative retry", req{method: "POST", path: outcomePath(running, "fail"), body: `{"lease_token":"` + other + `","error":"x","retry_in_seconds":-3}`}, SlugInvalidRequest},
			{"snooze negative", req{method: "POST", path: outcomePath(running, "snooze"), body: `{"lease_token":"` + other + `","delay_seconds":-1}`}, SlugInvalidRequest},
			{"snooze wrong type", req{method: "POST", path: outcomePath(running, "snooze"), body: `{"lease_token":"` + other + `","delay_seconds":"soon"}`}, SlugInvalidRequest},
			{"lease too long", req{method: "POST", path: outcomePath(running, "lease"), body: `{"lease_token":"` + other + `","extend_seconds":7200}`}, SlugInvalidRequest},

			{"claim limit 0", req{method: "POST", path: "/v1/workers/w/claim", body: `{"limit":0}`}, SlugInvalidRequest},
			{"claim limit 1001", req{method: "POST", path: "/v1/workers/w/claim", body: `{"limit":1001}`}, SlugInvalidRequest},
			{"claim wait 61", req{method: "POST", path: "/v1/workers/w/claim", body: `{"wait_seconds":61}`}, SlugInvalidRequest},
			{"claim wait negative", req{method: "POST", path: "/v1/workers/w/claim", body: `{"wait_seconds":-1}`}, SlugInvalidRequest},
			{"claim foreign queue", req{method: "POST", path: "/v1/workers/w/claim", body: `{"queues":["elsewhere"]}`}, SlugInvalidRequest},
			{"claim unknown field", req{method: "POST", path: "/v1/workers/w/claim", body: `{"max":3}`}, SlugInvalidRequest},
			{"claim unregistered", req{method: "POST", path: "/v1/workers/ghost/claim", body: `{}`}, SlugWorkerNotRegistered},
			{"heartbeat unknown field", req{method: "POST", path: "/v1/workers/w/heartbeat", body: `{"x":1}`}, SlugInvalidRequest},
			{"heartbeat unregistered", req{method: "POST", path: "/v1/workers/ghost/heartbeat", body: `{"leases":[]}`}, SlugWorkerNotRegistered},
			{"heartbeat without body", req{method: "POST", path: "/v1/workers/w/heartbeat"}, SlugInvalidRequest},
			{"heartbeat without leases", req{method: "POST", path: "/v1/workers/w/heartbeat", body: `{}`}, SlugInvalidRequest},
			{"heartbeat leases null", req{method: "POST", path: "/v1/workers/w/heartbeat", body: `{"leases":null}`}, SlugInvalidRequest},
			{"heartbeat leases not a list", req{method: "POST", path: "/v1/workers/w/heartbeat", body: `{"leases":"` + other + `"}`}, SlugInvalidRequest},
			{"heartbeat garbage lease", req{method: "POST", path: "/v1/workers/w/heartbeat", body: `{"leases":["garbage"]}`}, SlugInvalidLeaseToken},
			{"heartbeat v1 lease", req{method: "POST", path: "/v1/workers/w/heartbeat", body: `{"leases":["v1.` + itoa(running.ID) + `.1.dw"]}`}, SlugInvalidLeaseToken},
			{"heartbeat another worker's lease", req{method: "POST", path: "/v1/workers/w/heartbeat", body: `{"leases":["` + h.tokenFor(&core.Job{ID: running.ID, ClaimSeq: 1, Attempt: 1}, "w2") + `"]}`}, SlugInvalidLeaseToken},
			{"v1 lease token", req{method: "POST", path: complete, body: `{"lease_token":"v1.` + itoa(running.ID) + `.1.dw"}`}, SlugInvalidLeaseToken},
			{"register without queues", req{method: "PUT", path: "/v1/workers/w2", body: `{"name":"x"}`}, SlugInvalidRequest},
			{"register bad queue", req{method: "PUT", path: "/v1/workers/w2", body: `{"queues":["a b"]}`}, SlugInvalidRequest},
			{"register empty tag", req{method: "PUT", path: "/v1/workers/w2", body: `{"queues":["a"],"tags":[""]}`}, SlugInvalidRequest},
			{"register long id", req{method: "PUT", path: "/v1/workers/" + strings.Repeat("i", 256), body: `{"queues":["a"]}`}, SlugInvalidRequest},
			{"register wrong type", req{method: "PUT", path: "/v1/workers/w2", body: `{"queues":"default"}`}, SlugInvalidRequest},
			{"pause bad name", req{method: "POST", path: "/v1/queues/a%20b/pause"}, SlugInvalidRequest},

			{"unknown route", req{method: "GET", path: "/v1/nothing"}, SlugNotFound},
			{"outside /v1", req{method: "GET", path: "/"}, SlugNotFound},
			{"wrong method", req{method: "PATCH", path: "/v1/jobs"}, SlugMethodNotAllowed},
			{"wrong method on a job", req{method: "PUT", path: "/v1/jobs/1"}, SlugMethodNotAllowed},
		}
		before := h.state()
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				h := h.sub(t)
				if c.req.body != nil && c.req.body.(string) == "" {
					c.req.body = []byte{}
				}
				r := h.send(c.req)
				p := wantProblem(t, r, c.slug)
				if p.Detail == "" {
					t.Fatalf("problem without detail: %s", r.body)
				}
				if c.slug == SlugMethodNotAllowed && r.header.Get("Allow") == "" {
					t.Fatalf("405 without Allow")
				}
				if after := h.state(); after != before {
					t.Fatalf("%s changed the store:\nbefore %s\nafter  %s", c.name, before, after)
				}
			})
		}
		// The detail of a type error names the field.
		p := wantProblem(t, h.do("POST", jobs, `{"kind":"a","priority":"high"}`), SlugInvalidRequest)
		if !strings.Contains(p.Detail, `"priority"`) {
			t.Fatalf("detail %q does not name the field", p.Detail)
		}
		p = wantProblem(t, h.do("POST", jobs, `{"kind":"a","prio":1}`), SlugInvalidRequest)
		if !strings.Contains(p.Detail, `"prio"`) {
			t.Fatalf("detail %q does not name the field", p.Detail)
		}
		if !reflect.DeepEqual(h.get(running.ID).State, core.StateRunning) {
			t.Fatal("running job changed")
		}
	})
}

func TestArgsAnyJSON(t *testing.T) {
	h := newHarness(t, teststores.Memory(t), core.Config{}, Config{})
	for _, args := range []string{`"text"`, `42`, `[1,2]`, `true`, `{"a":{"b":[1]}}`} {
		var out SubmitResponse
		h.must(http.StatusCreated, "POST", "/v1/jobs", `{"kind":"k","args":`+args+`}`, &out)
		if string(out.Job.Args) != args {
			t.Fatalf("args %s came back as %s", args, out.Job.Args)
		}
	}
	var out SubmitResponse
	h.must(http.StatusCreated, "POST", "/v1/jobs", `{"kind":"k","args":null}`, &out)
	if string(out.Job.Args) != `{}` {
		t.Fatalf("null args came back as %s", out.Job.Args)
	}
	// Args over the client's limit are an invalid job.
	h2 := newHarness(t, teststores.Memory(t), core.Config{MaxArgsBytes: 10}, Config{})
	wantProblem(t, h2.do("POST", "/v1/jobs", `{"kind":"k","args":"0123456789abc"}`), SlugInvalidJob)
	// And a client limit above the default is honoured.
	h3 := newHarness(t, teststores.Memory(t), core.Config{MaxArgsBytes: 2 << 20}, Config{})
	big := `"` + strings.Repeat("x", core.DefaultMaxArgsBytes+10) + `"`
	h3.must(http.StatusCreated, "POST", "/v1/jobs", `{"kind":"k","args":`+big+`}`, &out)
	if len(out.Job.Args) != len(big) {
		t.Fatalf("big args: %d bytes back", len(out.Job.Args))
	}
}
