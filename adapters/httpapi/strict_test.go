package httpapi

import (
	"strings"
	"testing"

	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/internal/teststores"
)

// TestDuplicateKeysAndWrongCaseAreRefused: a body naming a key twice, at
// any depth (args and metadata included), or a field in another case than
// documented, is refused with a 400 naming the key and where it is, and
// nothing is inserted. encoding/json alone took the last duplicate and
// matched field names case-insensitively.
func TestDuplicateKeysAndWrongCaseAreRefused(t *testing.T) {
	h := newHarness(t, teststores.Memory(t), core.Config{}, Config{})
	for _, tc := range []struct {
		name, path, body, want string
	}{
		{"top-level duplicate", "/v1/jobs", `{"kind":"a","kind":"b"}`, `duplicate key "kind" at /kind`},
		{"escaped duplicate", "/v1/jobs", `{"kind":"a","\u006bind":"b"}`, `duplicate key "kind" at /kind`},
		{"duplicate in args", "/v1/jobs", `{"kind":"a","args":{"x":{"y":1,"y":2}}}`, `duplicate key "y" at /args/x/y`},
		{"duplicate in metadata", "/v1/jobs", `{"kind":"a","metadata":{"m":"1","m":"2"}}`, `duplicate key "m" at /metadata/m`},
		{"duplicate in a batch", "/v1/jobs/batch", `{"jobs":[{"kind":"a"},{"kind":"b","queue":"q","queue":"r"}]}`, `duplicate key "queue" at /jobs/1/queue`},
		{"capitalised field", "/v1/jobs", `{"Kind":"a"}`, `unknown field "Kind" at /Kind: field names are case-sensitive (did you mean "kind"?)`},
		{"upper-case field", "/v1/jobs", `{"kind":"a","QUEUE":"q"}`, `did you mean "queue"?`},
		{"Kelvin sign folds to k", "/v1/jobs", `{"\u212aind":"a"}`, `did you mean "kind"?`},
		{"case duplicate", "/v1/jobs", `{"kind":"a","Kind":"b"}`, `did you mean "kind"?`},
		{"nested wrong case", "/v1/jobs/batch", `{"jobs":[{"kind":"a","Run_At":"2030-01-01T00:00:00Z"}]}`, `unknown field "Run_At" at /jobs/0/Run_At`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := h.send(req{method: "POST", path: tc.path, body: tc.body})
			p := wantProblem(t, r, SlugInvalidRequest)
			if !strings.Contains(p.Detail, tc.want) {
				t.Fatalf("detail %q; want it to say %q", p.Detail, tc.want)
			}
		})
	}
	if jobs := h.snapshot(); len(jobs) != 0 {
		t.Fatalf("%d jobs inserted from refused bodies", len(jobs))
	}
	// Exact names, and the same key in different objects, are fine; so is
	// a key that differs from a field only in case inside args (free-form).
	h.must(201, "POST", "/v1/jobs", map[string]any{"kind": "a", "args": map[string]any{"Kind": 1, "kind": 2, "x": map[string]any{"kind": 3}}}, nil)
}

// TestCheckStrictUnknownAndSyntaxErrorsKeepTheirMessages: bodies that are
// not JSON, and unknown fields, are reported by encoding/json as before.
func TestCheckStrictUnknownAndSyntaxErrorsKeepTheirMessages(t *testing.T) {
	for _, body := range []string{`{"kind":`, `{"kind" 1}`, `{"nope":1}`, `[1,2`, `{"kind":"a"} {}`, `{"kind":"a",}`, ``, `"x"`} {
		if p := checkStrict([]byte(body), &SubmitRequest{}); p != nil {
			t.Errorf("checkStrict(%s) = %v; want nil (left to encoding/json)", body, p.detail)
		}
	}
}
