package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/core/contract"
	"github.com/backlogq/backlog/store/memory"
)

// fuzzKey is the lease secret of the fuzzed servers: fixed, so the one
// token they issue (job 1, claim 1, attempt 1, worker "w") is the same in
// every run and the seed corpus can hold it.
var fuzzKey = []byte("fuzzing secret, exactly 32 bytes")

// fuzzToken is the token a fuzzed server issues for its one claim.
var fuzzToken = signToken([][]byte{fuzzKey}, &core.Job{ID: 1, ClaimSeq: 1, Attempt: 1}, "w", "")

// FuzzLeaseToken: decoding never panics; a token that verifies is exactly
// the text the server signs for its fields (one spelling per execution);
// nothing verifies under a key that did not sign it.
func FuzzLeaseToken(f *testing.F) {
	keys := [][]byte{fuzzKey}
	for _, s := range []string{
		fuzzToken, "", "v1.1.1.dw", "v2.1.1.1.dw", "v3.1.1.1.dw..", strings.Replace(fuzzToken, "v3.1.", "v3.01.", 1),
		signToken(keys, &core.Job{ID: 1 << 62, ClaimSeq: 1 << 62, Attempt: 1 << 30}, strings.Repeat("ü", 127), "team-a"),
		signToken(keys, &core.Job{ID: 7, ClaimSeq: 3}, "host-1-ab", "worker"),
	} {
		f.Add(s)
	}
	l := &leaseSigner{keys: keys}
	other := &leaseSigner{keys: [][]byte{[]byte("another fuzzing secret, 32 bytes")}}
	ctx := context.Background()
	f.Fuzz(func(t *testing.T, s string) {
		tok, err := decodeLeaseToken(s)
		if err != nil {
			var p *problem
			if !errors.As(err, &p) || p.slug != SlugInvalidLeaseToken {
				t.Fatalf("%q: error %v is not invalid-lease-token", s, err)
			}
			return
		}
		ok, err := l.verify(ctx, tok)
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			want := signToken(keys, &core.Job{ID: tok.jobID, ClaimSeq: tok.claimSeq, Attempt: tok.attempt}, tok.workerID, tok.cred)
			if s != want {
				t.Fatalf("%q verifies but the server signs those fields as %q", s, want)
			}
		}
		if ok, _ := other.verify(ctx, tok); ok {
			t.Fatalf("%q verifies under a key that did not sign it", s)
		}
	})
}

// Routes FuzzOutcomeBodies sends its bodies to.
var fuzzRoutes = []string{
	"/v1/jobs/1/complete", "/v1/jobs/1/fail", "/v1/jobs/1/snooze", "/v1/jobs/1/lease",
	"/v1/workers/w/outcomes", "/v1/workers/w/heartbeat",
}

// leaseFuzzServer is a server on a fresh memory store with worker "w"
// registered and job 1 claimed by it (token fuzzToken).
func leaseFuzzServer(t *testing.T) (*Server, contract.Store) {
	st := memory.New()
	t.Cleanup(func() { st.Close() })
	c, err := core.NewClient(st, core.Config{Logger: quietLogger(), MaintenanceInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(c, Config{LeaseSecret: fuzzKey, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	for _, r := range []struct{ method, path, body string }{
		{"PUT", "/v1/workers/w", `{"queues":["default"]}`},
		{"POST", "/v1/jobs", `{"kind":"k","max_attempts":3}`},
		{"POST", "/v1/workers/w/claim", `{}`},
	} {
		if rec := serveBody(s, r.method, r.path, []byte(r.body)); rec.Code >= 300 {
			t.Fatalf("%s %s: %d %s", r.method, r.path, rec.Code, rec.Body)
		} else if strings.HasSuffix(r.path, "/claim") && !strings.Contains(rec.Body.String(), fuzzToken) {
			t.Fatalf("the claim did not issue the expected token %q: %s", fuzzToken, rec.Body)
		}
	}
	return s, st
}

func serveBody(s *Server, method, path string, body []byte) *httptest.ResponseRecorder {
	r := httptest.NewRequest(method, path, bytes.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, r)
	return rec
}

// FuzzOutcomeBodies sends arbitrary bodies to the outcome, lease,
// batched-outcome and heartbeat routes of a server holding one claimed
// job: it never answers 500 and never panics, and nothing succeeds for
// the job (an applied outcome, an extended lease) unless the body carried
// the one token the server issued.
func FuzzOutcomeBodies(f *testing.F) {
	v2 := "v2.1.1.1.dw"
	for i, body := range []string{
		`{"lease_token":"` + fuzzToken + `","result":{"ok":true}}`,
		`{"lease_token":"` + fuzzToken + `","error":"boom","action":"discard"}`,
		`{"lease_token":"` + fuzzToken + `","delay_seconds":5}`,
		`{"lease_token":"` + fuzzToken + `","extend_seconds":60}`,
		`{"outcomes":[{"job_id":1,"lease_token":"` + fuzzToken + `","type":"complete","result":1}]}`,
		`{"leases":["` + fuzzToken + `"]}`,
	} {
		f.Add(uint8(i), []byte(body))
		f.Add(uint8(i), []byte(strings.ReplaceAll(body, fuzzToken, v2)))
	}
	f.Add(uint8(4), []byte(`{"outcomes":[{"job_id":1,"lease_token":"`+fuzzToken+`","type":"fail","error":"x","retry_in_seconds":1e308}]}`))
	f.Add(uint8(0), []byte(`{"lease_token":"\u0076`+fuzzToken[1:]+`"}`))
	f.Add(uint8(5), []byte(`{"leases":null}`))
	f.Fuzz(func(t *testing.T, route uint8, body []byte) {
		s, st := leaseFuzzServer(t)
		before, err := st.Get(context.Background(), 1)
		if err != nil {
			t.Fatal(err)
		}
		path := fuzzRoutes[int(route)%len(fuzzRoutes)]
		rec := serveBody(s, "POST", path, body)
		if rec.Code >= 500 {
			t.Fatalf("POST %s %q: %d %s", path, body, rec.Code, rec.Body)
		}
		after, err := st.Get(context.Background(), 1)
		if err != nil && !strings.HasSuffix(path, "/complete") && !strings.HasSuffix(path, "/outcomes") {
			t.Fatal(err)
		}
		changed := err != nil || after.State != before.State || !after.LeaseUntil.Equal(before.LeaseUntil) || after.Attempt != before.Attempt
		if !changed {
			return
		}
		if !carries(body, fuzzToken) {
			t.Fatalf("POST %s %q changed job 1 (%s → %v) without the token the server issued: %d %s", path, body, before.State, after, rec.Code, rec.Body)
		}
		if rec.Code >= 300 {
			t.Fatalf("POST %s %q changed job 1 but answered %d %s", path, body, rec.Code, rec.Body)
		}
	})
}

// carries reports whether the JSON body, as the server decodes it, holds
// tok as a lease token (lease_token, or an item of leases or outcomes).
func carries(body []byte, tok string) bool {
	var v struct {
		LeaseToken string   `json:"lease_token"`
		Leases     []string `json:"leases"`
		Outcomes   []struct {
			LeaseToken string `json:"lease_token"`
		} `json:"outcomes"`
	}
	if json.Unmarshal(body, &v) != nil {
		return false
	}
	if v.LeaseToken == tok {
		return true
	}
	for _, l := range v.Leases {
		if l == tok {
			return true
		}
	}
	for _, o := range v.Outcomes {
		if o.LeaseToken == tok {
			return true
		}
	}
	return false
}

// TestOutcomeFuzzServerTakesItsToken keeps FuzzOutcomeBodies meaningful:
// on its server, each route succeeds with the token it issued.
func TestOutcomeFuzzServerTakesItsToken(t *testing.T) {
	for i, body := range []string{
		`{"lease_token":"` + fuzzToken + `"}`,
		`{"lease_token":"` + fuzzToken + `","error":"boom"}`,
		`{"lease_token":"` + fuzzToken + `"}`,
		`{"lease_token":"` + fuzzToken + `"}`,
		`{"outcomes":[{"job_id":1,"lease_token":"` + fuzzToken + `","type":"complete"}]}`,
		`{"leases":["` + fuzzToken + `"]}`,
	} {
		s, _ := leaseFuzzServer(t)
		rec := serveBody(s, "POST", fuzzRoutes[i], []byte(body))
		if rec.Code != 200 || strings.Contains(rec.Body.String(), `"applied":false`) || strings.Contains(rec.Body.String(), `"leases_extended":0`) {
			t.Fatalf("POST %s with the issued token: %d %s", fuzzRoutes[i], rec.Code, rec.Body)
		}
	}
}
