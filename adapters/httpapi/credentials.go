package httpapi

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/backlogq/backlog/core"
)

// Credential names of the role tokens. A request's credential is the name
// of the token it presented: one of these, or the name of a per-worker
// token (Config.WorkerTokens), which may not be one of these.
const (
	CredentialAdmin    = "admin"
	CredentialWorker   = "worker" // the shared Tokens.Worker
	CredentialProducer = "producer"
)

// WorkerCredentialKey is the metadata key of a worker's registry record
// that names the credential its id is bound to: the credential (other
// than the admin token) that registered it, or that first heartbeated or
// claimed under it when it was registered unbound (GET /v1/workers shows
// it). While the record lives, only that credential, or the admin token,
// may register, heartbeat, claim, report outcomes or deregister under
// that id. A registration may not set it.
const WorkerCredentialKey = "backlog.credential"

// MaxCredentialName is the longest name of a per-worker token, in bytes.
const MaxCredentialName = 64

// validCredName accepts 1..MaxCredentialName bytes of ASCII letters,
// digits, '.', '_' and '-'.
func validCredName(n string) bool {
	if n == "" || len(n) > MaxCredentialName {
		return false
	}
	for i := 0; i < len(n); i++ {
		c := n[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// tokenHash is one configured bearer token: its SHA-256, the role it
// grants and its credential name.
type tokenHash struct {
	hash [sha256.Size]byte
	role role
	name string
}

// buildTokens checks the role and per-worker tokens of cfg and returns
// them hashed, role tokens first. Per-worker tokens need valid names
// other than the role names and tokens of their own. (One token may serve
// several roles; it grants all of them and is the credential of the last
// of producer, worker, admin.)
func buildTokens(cfg Config) ([]tokenHash, error) {
	var out []tokenHash
	for _, t := range []struct {
		tok  string
		name string
		r    role
	}{{cfg.Tokens.Producer, CredentialProducer, roleProducer}, {cfg.Tokens.Worker, CredentialWorker, roleWorker}, {cfg.Tokens.Admin, CredentialAdmin, roleAdmin}} {
		if t.tok != "" {
			out = append(out, tokenHash{hash: sha256.Sum256([]byte(t.tok)), role: t.r, name: t.name})
		}
	}
	add := func(tok, name string, r role) error {
		h := sha256.Sum256([]byte(tok))
		for _, t := range out {
			if t.hash == h {
				return fmt.Errorf("httpapi: the tokens of %q and %q are the same; every per-worker credential needs a token of its own", t.name, name)
			}
		}
		out = append(out, tokenHash{hash: h, role: r, name: name})
		return nil
	}
	for _, name := range slices.Sorted(maps.Keys(cfg.WorkerTokens)) {
		tok := cfg.WorkerTokens[name]
		switch {
		case name == CredentialAdmin || name == CredentialWorker || name == CredentialProducer:
			return nil, fmt.Errorf("httpapi: WorkerTokens: %q is the name of a role token; pick another name", name)
		case !validCredName(name):
			return nil, fmt.Errorf("httpapi: WorkerTokens: name %q must be 1..%d bytes of letters, digits, '.', '_' and '-'", name, MaxCredentialName)
		case tok == "":
			return nil, fmt.Errorf("httpapi: WorkerTokens: %q has an empty token", name)
		}
		if err := add(tok, name, roleWorker); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// authenticate compares tok's hash with every configured token in
// constant time (all are compared whatever matches) and returns the roles
// and the credential name it grants (0 and "" for none).
func (s *Server) authenticate(tok string) (role, string) {
	sum := sha256.Sum256([]byte(tok))
	var (
		granted role
		name    string
	)
	for _, t := range s.tokens {
		if subtle.ConstantTimeCompare(sum[:], t.hash[:]) == 1 {
			granted |= t.role
			name = t.name
		}
	}
	return granted, name
}

// mayActFor reports whether the request whose context is ctx may act for
// a worker bound to credential owner: always on an open API and for
// unbound workers (owner ""), otherwise with that credential or the admin
// token.
func (s *Server) mayActFor(ctx context.Context, owner string) bool {
	if s.open || owner == "" {
		return true
	}
	c := reqFrom(ctx).cred
	return c == owner || c == CredentialAdmin
}

func forbiddenWorker(id string) error {
	return newProblem(SlugForbidden, fmt.Sprintf("worker %q is registered with another credential; only that credential (or the admin token) may act for it", id))
}

// ownerOf is the credential w's id is bound to ("" for none).
func ownerOf(w core.WorkerInfo) string { return w.Metadata[WorkerCredentialKey] }

// withOwner returns w bound to owner (a copy; "" removes the binding).
func withOwner(w core.WorkerInfo, owner string) core.WorkerInfo {
	md := maps.Clone(w.Metadata)
	if owner == "" {
		delete(md, WorkerCredentialKey)
	} else {
		if md == nil {
			md = map[string]string{}
		}
		md[WorkerCredentialKey] = owner
	}
	w.Metadata = md
	return w
}

// actFor checks that the request may act for the live worker w (403
// forbidden otherwise) and returns w bound to the request's credential
// when it was not bound yet (a record registered with the admin token, by
// a server before bindings, or by one without tokens), with changed true:
// the caller writes it. The admin token binds nothing.
func (s *Server) actFor(ctx context.Context, w core.WorkerInfo) (core.WorkerInfo, bool, error) {
	owner := ownerOf(w)
	if !s.mayActFor(ctx, owner) {
		return w, false, forbiddenWorker(w.ID)
	}
	if c := reqFrom(ctx).cred; owner == "" && c != "" && c != CredentialAdmin {
		return withOwner(w, c), true, nil
	}
	return w, false, nil
}

// errReservedMetadata refuses a registration that sets
// WorkerCredentialKey itself.
var errReservedMetadata = errors.New("metadata key " + WorkerCredentialKey + " is reserved: the server sets it to the credential that registered the worker")
