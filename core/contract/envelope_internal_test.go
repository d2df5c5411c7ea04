package contract

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"testing"
)

// The forms the built-in stores return sealed args in take the fast path.
func TestExactEnvelopeForms(t *testing.T) {
	ct := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{7}, 40))
	for _, form := range []string{
		`{"backlog_enc":1,"kid":"k2","ct":"` + ct + `"}`,      // as sealed (memory, SQLite)
		`{"ct": "` + ct + `", "kid": "k2", "backlog_enc": 1}`, // PostgreSQL jsonb, MySQL JSON
	} {
		kid, got, ok := exactEnvelope([]byte(form))
		if !ok || kid != "k2" || got != ct {
			t.Errorf("exactEnvelope(%s) = %q, %q, %v", form, kid, got, ok)
		}
	}
	for _, form := range []string{
		`{"backlog_enc":1,"kid":"k2","ct":"` + ct + `","x":1}`,
		`{"backlog_enc":1,"kid":"k\"2","ct":"` + ct + `"}`,
		`{"ct": "` + ct + `", "kid": "k2", "backlog_enc": 2}`,
		`{"backlog_enc":1,"kid":"k2","ct":"a\u0041"}`,
	} {
		if _, _, ok := exactEnvelope([]byte(form)); ok {
			t.Errorf("exactEnvelope(%s) accepted a form that is not exactly an envelope", form)
		}
	}
}

// FuzzParseEnvelope: parsing never panics, and whenever the fast path
// accepts an input, encoding/json reads the same envelope from it.
// (core's FuzzOpenArgs checks that opening any input never panics.)
func FuzzParseEnvelope(f *testing.F) {
	ct := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{9}, 40))
	f.Add([]byte(`{"backlog_enc":1,"kid":"k1","ct":"` + ct + `"}`))
	f.Add([]byte(`{"ct": "AAAA", "kid": "k1", "backlog_enc": 1}`))
	f.Add([]byte(`{"backlog_enc":1,"kid":"k1","ct":"AAAA"} `))
	f.Add([]byte(`{"backlog_enc":"1"}`))
	f.Add([]byte(`{"a":"backlog_enc"}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		_, isSealed, _ := ParseEnvelope(b)
		kid, ct, ok := exactEnvelope(bytes.TrimLeft(b, " \t\r\n"))
		if !ok {
			return
		}
		if !isSealed {
			t.Fatalf("fast path accepted %q but ParseEnvelope says plain", b)
		}
		var m map[string]any
		if json.Unmarshal(b, &m) != nil || len(m) != 3 || m["backlog_enc"] != float64(1) || m["kid"] != kid || m["ct"] != ct {
			t.Fatalf("fast path read kid %q ct %q from %q; encoding/json reads %v", kid, ct, b, m)
		}
	})
}
