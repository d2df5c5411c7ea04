package core

import (
	"bytes"
	"testing"
)

// FuzzOpenArgs: opening any input as sealed args never panics.
func FuzzOpenArgs(f *testing.F) {
	k, err := NewKeyring("k1", map[string][]byte{"k1": bytes.Repeat([]byte{1}, KeySize)})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(k.SealArgs("kind", []byte(`{"a":1}`)))
	f.Add([]byte(`{"ct": "AAAA", "kid": "k1", "backlog_enc": 1}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _ = k.OpenArgs("kind", b)
	})
}
