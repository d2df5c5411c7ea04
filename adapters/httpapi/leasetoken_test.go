package httpapi

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/backlogq/backlog/core"
)

// tokenFor returns a token of j for workerID signed as the server signs
// (bound to no credential).
func (h *harness) tokenFor(j *core.Job, workerID string) string {
	h.t.Helper()
	return h.tokenAs(j, workerID, "")
}

// tokenAs returns a token of j for workerID bound to credential cred,
// signed as the server signs.
func (h *harness) tokenAs(j *core.Job, workerID, cred string) string {
	h.t.Helper()
	keys, err := h.srv.lease.resolve(context.Background())
	if err != nil {
		h.t.Fatal(err)
	}
	return signToken(keys, j, workerID, cred)
}

// testKey is a lease secret for tests.
var testKey = []byte("0123456789abcdef0123456789abcdef")

func TestLeaseTokenCodec(t *testing.T) {
	keys := [][]byte{testKey}
	for _, w := range []string{"w", "host-12-ab", "ünïcode.worker/with.dots", strings.Repeat("x", 255)} {
		for _, cred := range []string{"", "worker", "team-a.worker_1"} {
			tok := signToken(keys, &core.Job{ID: 42, ClaimSeq: 7, Attempt: 3}, w, cred)
			if !strings.HasPrefix(tok, "v3.42.7.3.") {
				t.Fatalf("token %q", tok)
			}
			got, err := decodeLeaseToken(tok)
			if err != nil || got.jobID != 42 || got.claimSeq != 7 || got.attempt != 3 || got.workerID != w || got.cred != cred || len(got.mac) != leaseMACBytes {
				t.Fatalf("%q: %+v %v", tok, got, err)
			}
			if got.format() != tok {
				t.Fatalf("%q formats back as %q", tok, got.format())
			}
		}
	}
	// A continuation resets the attempt: a claim at attempt 0 is not one.
	if got, err := decodeLeaseToken(signToken(keys, &core.Job{ID: 1, ClaimSeq: 9}, "w", "")); err != nil || got.attempt != 0 || got.claimSeq != 9 {
		t.Fatalf("attempt 0: %+v %v", got, err)
	}
	good := signToken(keys, &core.Job{ID: 1, ClaimSeq: 1, Attempt: 1}, "w", "")
	parts := strings.Split(good, ".")
	mac := parts[6]
	for _, bad := range []string{"", "v2", "v2.1.1.1", "v3.1.1.1.dw", "v2.x.1.1.dw", "v2.1.x.1.dw", "v2.1.1.x.dw", "v2.0.1.1.dw",
		"v2.1.0.1.dw", "v2.1.-1.1.dw", "v2.1.1.-1.dw", "v2.1.1.1.!!", "v2.1.1.1.", "v2.1.1.1.dw.extra",
		"v3.1.1.1.dw..", "v3.1.1.1.dw.." + mac[:len(mac)-1], "v3.1.1.1.dw.." + mac + "A", "v3.1.1.1.dw.!!." + mac,
		"v3.01.1.1.dw.." + mac, "v3.+1.1.1.dw.." + mac, "v3.1.1.1.dw==.." + mac, "v3.1.1.1.dw.." + mac + ".x",
		"v4.1.1.1.dw.." + mac, strings.Repeat("v3.", 400)} {
		if _, err := decodeLeaseToken(bad); err == nil {
			t.Fatalf("%q decoded", bad)
		}
	}
	// A v1 token is refused with a message that says why and what to do.
	_, err := decodeLeaseToken("v1.1.1.dw")
	var p *problem
	if !errors.As(err, &p) || p.slug != SlugInvalidLeaseToken || !strings.Contains(p.detail, "v1") || !strings.Contains(p.detail, "up-to-date worker") {
		t.Fatalf("v1 token: %v", err)
	}
	// A v2 token parses, unsigned, for its caller to refuse.
	if got, err := decodeLeaseToken("v2.1.1.1.dw"); err != nil || !got.unsigned() || got.workerID != "w" {
		t.Fatalf("v2 token: %+v %v", got, err)
	}
}

// TestLeaseMACCoversEveryField: changing any field of a signed token, or
// signing with another key, makes it fail to verify.
func TestLeaseMACCoversEveryField(t *testing.T) {
	l := &leaseSigner{keys: [][]byte{testKey}}
	ctx := context.Background()
	base := leaseToken{jobID: 5, claimSeq: 2, attempt: 1, workerID: "a", cred: "team-a"}
	base.mac = string(leaseMAC(testKey, base))
	if ok, err := l.verify(ctx, base); !ok || err != nil {
		t.Fatalf("the signed token does not verify: %v", err)
	}
	other := []byte("another secret, 32 bytes long...")
	for name, f := range map[string]func(t *leaseToken){
		"job":         func(t *leaseToken) { t.jobID++ },
		"claim":       func(t *leaseToken) { t.claimSeq++ },
		"attempt":     func(t *leaseToken) { t.attempt++ },
		"worker":      func(t *leaseToken) { t.workerID = "b" },
		"credential":  func(t *leaseToken) { t.cred = "team-b" },
		"no cred":     func(t *leaseToken) { t.cred = "" },
		"shifted":     func(t *leaseToken) { t.workerID, t.cred = "ateam-", "a" },
		"other key":   func(t *leaseToken) { t.mac = string(leaseMAC(other, *t)) },
		"flipped bit": func(t *leaseToken) { b := []byte(t.mac); b[0] ^= 1; t.mac = string(b) },
		"unsigned":    func(t *leaseToken) { t.mac = "" },
	} {
		tok := base
		f(&tok)
		if ok, err := l.verify(ctx, tok); ok || err != nil {
			t.Errorf("%s: a changed token verifies (%v)", name, err)
		}
	}
	// A previous key still verifies, and signs nothing.
	rotated := &leaseSigner{keys: [][]byte{other, testKey}}
	if ok, _ := rotated.verify(ctx, base); !ok {
		t.Fatal("a token of the previous key does not verify after rotation")
	}
	if tok, _ := decodeLeaseToken(signToken(rotated.keys, &core.Job{ID: 5, ClaimSeq: 2, Attempt: 1}, "a", "team-a")); tok.mac == base.mac {
		t.Fatal("the rotated signer signs with the previous key")
	}
}

// BenchmarkLeaseToken measures signing a token (once per claimed job)
// and decoding and verifying one (once per outcome, lease extension and
// heartbeat lease).
func BenchmarkLeaseToken(b *testing.B) {
	l := &leaseSigner{keys: [][]byte{testKey}}
	j := &core.Job{ID: 123456, ClaimSeq: 3, Attempt: 2}
	b.Run("sign", func(b *testing.B) {
		for b.Loop() {
			signToken(l.keys, j, "host-4711-0a1b2c3d", "team-a")
		}
	})
	tok := signToken(l.keys, j, "host-4711-0a1b2c3d", "team-a")
	b.Run("verify", func(b *testing.B) {
		for b.Loop() {
			t, err := decodeLeaseToken(tok)
			if err != nil {
				b.Fatal(err)
			}
			if ok, _ := l.verify(context.Background(), t); !ok {
				b.Fatal("does not verify")
			}
		}
	})
}
