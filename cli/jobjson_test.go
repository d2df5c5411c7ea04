package cli

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"testing"
)

// canonicalJSON is s decoded and encoded again: object keys sorted,
// whitespace gone, numbers as written.
func canonicalJSON(t *testing.T, s string) string {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader([]byte(s)))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("decode %q: %v", s, err)
	}
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// jobs get -o json and jobs list -o json print a job as the HTTP API
// shows it (results as JSON values, claim_seq included), field for field.
func TestJobJSONIsTheAPIShape(t *testing.T) {
	t.Parallel()
	db := tempDB(t)
	fillDB(t, db)
	url := serveDB(t, db, "", remoteTokens)
	for id := 1; id <= 6; id++ {
		code, body := call(t, "GET", url+"/v1/jobs/"+strconv.Itoa(id), "atok", "")
		if code != http.StatusOK {
			t.Fatalf("GET job %d: %d %s", id, code, body)
		}
		var api struct{ Job json.RawMessage }
		if err := json.Unmarshal([]byte(body), &api); err != nil {
			t.Fatal(err)
		}
		got := mustCLI(t, db, "-o", "json", "jobs", "get", strconv.Itoa(id)).stdout
		if g, w := canonicalJSON(t, got), canonicalJSON(t, string(api.Job)); g != w {
			t.Errorf("jobs get %d -o json:\n%s\nthe API's job:\n%s", id, g, w)
		}
	}
	code, body := call(t, "GET", url+"/v1/jobs", "atok", "")
	if code != http.StatusOK {
		t.Fatalf("GET jobs: %d %s", code, body)
	}
	var page struct{ Jobs json.RawMessage }
	if err := json.Unmarshal([]byte(body), &page); err != nil {
		t.Fatal(err)
	}
	got := mustCLI(t, db, "-o", "json", "jobs", "list", "--order", "asc").stdout
	if g, w := canonicalJSON(t, got), canonicalJSON(t, string(page.Jobs)); g != w {
		t.Errorf("jobs list -o json:\n%s\nthe API's jobs:\n%s", g, w)
	}

	// The result of job 1 is JSON and stays JSON; job 2's text is a
	// JSON string of it.
	j1 := decodeJSON[map[string]json.RawMessage](t, mustCLI(t, db, "-o", "json", "jobs", "get", "1").stdout)
	j2 := decodeJSON[map[string]json.RawMessage](t, mustCLI(t, db, "-o", "json", "jobs", "get", "2").stdout)
	if canonicalJSON(t, string(j1["result"])) != `{"ok":true}` || string(j2["result"]) != `"hello Ann\n"` {
		t.Errorf("results %s and %s; want {\"ok\":true} and \"hello Ann\\n\"", j1["result"], j2["result"])
	}
	if string(j1["claim_seq"]) != "1" {
		t.Errorf("claim_seq %s; want 1", j1["claim_seq"])
	}
}
