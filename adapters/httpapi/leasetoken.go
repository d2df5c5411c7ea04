package httpapi

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"hash"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/core/contract"
)

// Lease-token signing.
const (
	// MinLeaseSecretBytes is the shortest accepted Config.LeaseSecret (and
	// PreviousLeaseSecrets entry): 32 bytes, the size of the HMAC-SHA256
	// output.
	MinLeaseSecretBytes = 32

	// LeaseSecretSetting is the contract.Settings key under which the servers
	// sharing a store keep the lease-token secret when none is configured.
	LeaseSecretSetting = "httpapi.lease-token-secret"

	// leaseMACBytes is the length of a token's MAC (HMAC-SHA256, untruncated).
	leaseMACBytes = sha256.Size
)

// leaseToken is the fence of one claimed execution: the job, the claim
// (core.Job.ClaimSeq) and the worker that holds it, plus the attempt the
// claim started (for error entries), the credential the worker's id was
// bound to when it was claimed, and the MAC over all of them.
type leaseToken struct {
	jobID    int64
	claimSeq int64
	attempt  int
	workerID string
	cred     string // credential name the worker id was bound to; "" for none
	mac      string // raw MAC bytes; "" for an unsigned (v2) token
}

// unsigned reports whether t came from an older server that did not sign
// its tokens (v2).
func (t leaseToken) unsigned() bool { return t.mac == "" }

// leaseMAC computes the MAC of t's fields (not t.mac) under key:
// HMAC-SHA256 over a domain string, the three numbers as 8 bytes each and
// the two strings each with its length, so no two field tuples share an
// input.
func leaseMAC(key []byte, t leaseToken) []byte {
	h := hmac.New(sha256.New, key)
	h.Write([]byte("backlog lease token v3\x00"))
	var b [8]byte
	for _, n := range []uint64{uint64(t.jobID), uint64(t.claimSeq), uint64(t.attempt)} {
		binary.BigEndian.PutUint64(b[:], n)
		h.Write(b[:])
	}
	writeString(h, t.workerID)
	writeString(h, t.cred)
	return h.Sum(nil)
}

func writeString(h hash.Hash, s string) {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], uint32(len(s)))
	h.Write(b[:])
	h.Write([]byte(s))
}

// format returns the text of t:
// "v3.<id>.<claim_seq>.<attempt>.<b64(worker id)>.<b64(credential)>.<b64(mac)>",
// base64url without padding.
func (t leaseToken) format() string {
	enc := base64.RawURLEncoding
	return "v3." + strconv.FormatInt(t.jobID, 10) + "." + strconv.FormatInt(t.claimSeq, 10) + "." + strconv.Itoa(t.attempt) + "." +
		enc.EncodeToString([]byte(t.workerID)) + "." + enc.EncodeToString([]byte(t.cred)) + "." + enc.EncodeToString([]byte(t.mac))
}

// decodeLeaseToken parses a token. A malformed one, one from a v1 server,
// and one that is not in its one canonical spelling are
// invalid-lease-token. An unsigned v2 token parses (t.unsigned()), for
// its callers to refuse as lease-lost. Parsing proves nothing: callers
// verify the MAC with leaseSigner.verify.
func decodeLeaseToken(s string) (leaseToken, error) {
	bad := func(why string) (leaseToken, error) {
		return leaseToken{}, newProblem(SlugInvalidLeaseToken, "lease_token "+why)
	}
	if s == "" {
		return bad("is required")
	}
	if len(s) > 1024 {
		return bad("is too long to be a token issued by this API")
	}
	parts := strings.Split(s, ".")
	if len(parts) == 4 && parts[0] == "v1" {
		// v1 tokens named the attempt, which a snooze gives back: they
		// could fence the wrong execution, so they are no longer taken.
		return bad("is a v1 token from an older server; v1 tokens are no longer accepted (they could not tell two executions at one attempt apart): claim the job again with an up-to-date worker")
	}
	var t leaseToken
	switch {
	case len(parts) == 5 && parts[0] == "v2":
	case len(parts) == 7 && parts[0] == "v3":
	default:
		return bad("is not a token issued by this API")
	}
	var err error
	if t.jobID, err = strconv.ParseInt(parts[1], 10, 64); err != nil || t.jobID < 1 {
		return bad("has a bad job id")
	}
	if t.claimSeq, err = strconv.ParseInt(parts[2], 10, 64); err != nil || t.claimSeq < 1 {
		return bad("has a bad claim sequence")
	}
	if t.attempt, err = strconv.Atoi(parts[3]); err != nil || t.attempt < 0 || t.attempt > 1<<31-1 {
		return bad("has a bad attempt")
	}
	enc := base64.RawURLEncoding.Strict()
	wid, err := enc.DecodeString(parts[4])
	if err != nil || len(wid) == 0 || len(wid) > 255 || !utf8.Valid(wid) {
		return bad("has a bad worker id")
	}
	t.workerID = string(wid)
	if parts[0] == "v2" {
		return t, nil
	}
	cred, err := enc.DecodeString(parts[5])
	if err != nil || (len(cred) > 0 && !validCredName(string(cred))) {
		return bad("has a bad credential")
	}
	t.cred = string(cred)
	mac, err := enc.DecodeString(parts[6])
	if err != nil || len(mac) != leaseMACBytes {
		return bad("has a bad signature")
	}
	t.mac = string(mac)
	if t.format() != s {
		// Numbers with signs or leading zeros: one token, one spelling.
		return bad("is not in its canonical form")
	}
	return t, nil
}

// leaseSigner signs lease tokens and verifies them. Its keys come from
// Config.LeaseSecret, from the store (contract.Settings, created once by the
// first server and read by every other), or are made for this process.
type leaseSigner struct {
	mu       sync.Mutex
	keys     [][]byte          // keys[0] signs; every one verifies; nil until resolved
	previous [][]byte          // Config.PreviousLeaseSecrets, appended to a stored secret
	store    contract.Settings // where the secret is when none was configured
	log      *slog.Logger
}

// newLeaseSigner checks cfg's secrets and picks the source of the signing
// key. It does no I/O: a secret kept in the store is read (or created) by
// the first request that needs it.
func newLeaseSigner(st contract.Store, cfg Config, log *slog.Logger) (*leaseSigner, error) {
	for i, k := range cfg.PreviousLeaseSecrets {
		if len(k) < MinLeaseSecretBytes {
			return nil, fmt.Errorf("httpapi: PreviousLeaseSecrets[%d] is %d bytes; want at least %d", i, len(k), MinLeaseSecretBytes)
		}
	}
	l := &leaseSigner{previous: cloneKeys(cfg.PreviousLeaseSecrets), log: log}
	switch settings, ok := st.(contract.Settings); {
	case cfg.LeaseSecret != nil:
		if len(cfg.LeaseSecret) < MinLeaseSecretBytes {
			return nil, fmt.Errorf("httpapi: LeaseSecret is %d bytes; want at least %d", len(cfg.LeaseSecret), MinLeaseSecretBytes)
		}
		l.keys = append(cloneKeys([][]byte{cfg.LeaseSecret}), l.previous...)
	case ok:
		l.store = settings
	default:
		key := make([]byte, MinLeaseSecretBytes)
		_, _ = rand.Read(key) // never fails (crypto/rand)
		l.keys = append([][]byte{key}, l.previous...)
		log.Warn("backlog http: the store keeps no settings and no lease secret is configured: lease tokens are signed with a secret of this process; " +
			"they are refused after a restart and by other servers on the same store (set a lease secret shared by every server)")
	}
	return l, nil
}

func cloneKeys(keys [][]byte) [][]byte {
	out := make([][]byte, len(keys))
	for i, k := range keys {
		out[i] = append([]byte(nil), k...)
	}
	return out
}

// resolve returns the keys, reading or creating the secret in the store
// on first use. A store failure is returned (the request fails with 503)
// and the next call tries again.
func (l *leaseSigner) resolve(ctx context.Context) ([][]byte, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.keys != nil {
		return l.keys, nil
	}
	fresh := make([]byte, MinLeaseSecretBytes)
	_, _ = rand.Read(fresh)
	secret, created, err := l.store.GetOrCreateSetting(ctx, LeaseSecretSetting, fresh)
	if err != nil {
		return nil, fmt.Errorf("httpapi: reading the lease-token secret from the store: %w", err)
	}
	if len(secret) < MinLeaseSecretBytes {
		return nil, fmt.Errorf("httpapi: the lease-token secret in the store (%s) is %d bytes; want at least %d", LeaseSecretSetting, len(secret), MinLeaseSecretBytes)
	}
	if created {
		l.log.Info("backlog http: created the lease-token secret in the store; every server on this store signs with it", "setting", LeaseSecretSetting)
	}
	l.keys = append([][]byte{secret}, l.previous...)
	return l.keys, nil
}

// signToken returns the token of j claimed by workerID, whose id is bound to
// credential cred, signed with the first of keys (from resolve).
func signToken(keys [][]byte, j *core.Job, workerID, cred string) string {
	t := leaseToken{jobID: j.ID, claimSeq: j.ClaimSeq, attempt: j.Attempt, workerID: workerID, cred: cred}
	t.mac = string(leaseMAC(keys[0], t))
	return t.format()
}

// verify reports whether t carries a MAC made by one of the keys
// (compared in constant time). Unsigned tokens never verify.
func (l *leaseSigner) verify(ctx context.Context, t leaseToken) (bool, error) {
	if t.unsigned() {
		return false, nil
	}
	keys, err := l.resolve(ctx)
	if err != nil {
		return false, err
	}
	ok := false
	for _, k := range keys {
		if hmac.Equal(leaseMAC(k, t), []byte(t.mac)) {
			ok = true
		}
	}
	return ok, nil
}

// tokenNotHeld is the refusal of a token the server did not sign: the
// same problem (lease-lost, nothing changed) as a token whose execution
// has ended.
func tokenNotHeld(t leaseToken) error {
	if t.unsigned() {
		return newProblem(SlugLeaseLost, fmt.Sprintf("the lease token of job %d is an unsigned token from an older server; it no longer holds the job and nothing changed "+
			"(the job comes back to its queue when its lease runs out or the worker's next heartbeat hands it back): stop working on it and claim again", t.jobID))
	}
	return newProblem(SlugLeaseLost, fmt.Sprintf("job %d is not held under this lease token (its signature does not verify: altered, or signed with a secret this server no longer accepts); nothing changed", t.jobID))
}

// checkToken verifies tok and that the request's credential may use it:
// a token the server did not sign is lease-lost (nothing changed), a token
// of a worker bound to another credential is forbidden.
func (s *Server) checkToken(ctx context.Context, tok leaseToken) error {
	ok, err := s.lease.verify(ctx, tok)
	if err != nil {
		return err
	}
	if !ok {
		return tokenNotHeld(tok)
	}
	if !s.mayActFor(ctx, tok.cred) {
		return forbiddenWorker(tok.workerID)
	}
	return nil
}
