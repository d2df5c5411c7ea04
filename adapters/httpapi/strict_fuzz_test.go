package httpapi

import (
	"bytes"
	"errors"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/go-json-experiment/json/jsontext"
)

// FuzzStrictDecode: decodeBody never panics on any body, and never
// accepts one in which an object names a member twice (compared as
// encoding/json compares them: after unescaping, invalid UTF-8 as U+FFFD)
// or in which a field of the request is named in another case.
func FuzzStrictDecode(f *testing.F) {
	for _, s := range []string{
		`{"kind":"a"}`,
		`{"kind":"y10k","run_at":"9999-12-31T23:59:59-14:00"}`,
		`{"kind":"a","kind":"b"}`,
		`{"kind":"a","\u006bind":"b"}`,
		`{"Kind":"a"}`,
		`{"\u212aind":"a"}`,
		`{"kind":"a","args":{"x":[{"y":1,"y":2}]}}`,
		`{"kind":"a","metadata":{"\ud800":"1","\udc00":"2"}}`,
		"{\"kind\":\"a\",\"metadata\":{\"\xff\":\"1\",\"\xfe\":\"2\"}}",
		`{"jobs":[{"kind":"a"},{"kind":"b","queue":"q","queue":"r"}]}`,
		`{"jobs":[{"kind":"a","RUN_AT":"2030-01-01T00:00:00Z"}]}`,
		`{"kind":"a"} {"kind":"b"}`,
		`{"kind":`,
		`[{"kind":"a"}]`,
		`{"kind":"a","tags":["x","x"],"priority":1e400}`,
	} {
		f.Add([]byte(s))
	}
	s := &Server{cfg: Config{MaxBodyBytes: 1 << 20, BodyReadTimeout: DefaultBodyReadTimeout}}
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, dst := range []any{&SubmitRequest{}, &BatchRequest{}} {
			r := httptest.NewRequest("POST", "/v1/jobs", bytes.NewReader(body))
			r.Header.Set("Content-Type", "application/json")
			err := s.decodeBody(httptest.NewRecorder(), r, dst, true)
			if err == nil {
				if name, at := firstDuplicate(body); name != "" {
					t.Fatalf("accepted %q into %T with duplicate key %q at %s", body, dst, name, at)
				}
				if name := wrongCase(body, reflect.TypeOf(dst).Elem()); name != "" {
					t.Fatalf("accepted %q into %T with field %q in the wrong case", body, dst, name)
				}
				continue
			}
			var p *problem
			if !errors.As(err, &p) || problems[p.slug].status != 400 && problems[p.slug].status != 413 {
				t.Fatalf("body %q: error %v; want a 400 or 413 problem", body, err)
			}
		}
	})
}

// firstDuplicate finds a member name given twice in one object of body,
// independently of checkStrict: every name of every open object is kept.
func firstDuplicate(body []byte) (name, at string) {
	dec := jsontext.NewDecoder(bytes.NewReader(body), jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))
	var names []map[string]bool // per open object; nil for an array
	for {
		tok, err := dec.ReadToken()
		if err != nil {
			return "", ""
		}
		switch tok.Kind() {
		case '{':
			names = append(names, map[string]bool{})
		case '[':
			names = append(names, nil)
		case '}', ']':
			names = names[:len(names)-1]
		case '"':
			if kind, n := dec.StackIndex(dec.StackDepth()); kind == '{' && n%2 == 1 { // a name
				m, n := names[len(names)-1], tok.String()
				if m[n] {
					return n, string(dec.StackPointer())
				}
				m[n] = true
			}
		}
	}
}

// TestFuzzOracles: the fuzz target's own checks find what they look for.
func TestFuzzOracles(t *testing.T) {
	for body, want := range map[string]string{
		`{"a":1,"a":2}`:                     "a",
		`{"a":{"b":1},"c":[{"b":2,"b":3}]}`: "b",
		`{"a":"a","b":"a"}`:                 "",
		`[{"a":1},{"a":1}]`:                 "",
		"{\"\xff\":1,\"\xfe\":2}":           "\ufffd",
	} {
		if got, _ := firstDuplicate([]byte(body)); got != want {
			t.Errorf("firstDuplicate(%s) = %q; want %q", body, got, want)
		}
	}
	if got := wrongCase([]byte(`{"jobs":[{"kind":"a","Queue":"q"}]}`), reflect.TypeFor[BatchRequest]()); got != "Queue" {
		t.Errorf("wrongCase in a batch = %q", got)
	}
	if got := wrongCase([]byte(`{"KIND":"a","args":{"Queue":1}}`), reflect.TypeFor[SubmitRequest]()); got != "KIND" {
		t.Errorf("wrongCase = %q", got)
	}
}

// wrongCase returns a top-level field name of body (or of a job of a
// batch) that matches a field of t only case-insensitively.
func wrongCase(body []byte, t reflect.Type) string {
	var keys []string
	dec := jsontext.NewDecoder(bytes.NewReader(body), jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))
	depthWanted := 1
	if t == reflect.TypeFor[BatchRequest]() {
		t, depthWanted = reflect.TypeFor[SubmitRequest](), 3 // {"jobs":[{…}]}
	}
	for {
		tok, err := dec.ReadToken()
		if err != nil {
			break
		}
		if tok.Kind() == '"' && dec.StackDepth() == depthWanted {
			if k, n := dec.StackIndex(depthWanted); k == '{' && n%2 == 1 { // a name, not a value
				keys = append(keys, tok.String())
			}
		}
	}
	fields := map[string]reflect.Type{}
	collectFields(t, fields, map[reflect.Type]bool{})
	for _, k := range keys {
		if _, ok := fields[k]; ok {
			continue
		}
		for f := range fields {
			if strings.EqualFold(f, k) {
				return k
			}
		}
	}
	return ""
}
