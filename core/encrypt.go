package core

import (
	"crypto/aes"
	"crypto/cipher"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/backlogq/backlog/core/contract"
)

// Encryption at rest: a job's args (always), and optionally its result and
// its error text, are sealed with AES-256-GCM before they reach a store and
// opened only in processes that hold the keys. See docs/security.md for the
// threat model.
//
// Sealed forms (version 1):
//
//	args, results: {"backlog_enc":1,"kid":"<key id>","ct":"<base64 nonce‖ciphertext‖tag>"}
//	error text:    backlog-enc:1:<key id>:<base64 nonce‖ciphertext‖tag>
//
// The JSON form keeps args valid JSON for every store's JSON column. The
// additional authenticated data binds a ciphertext to its field and key id
// and, for args and results, to the job's kind, so a ciphertext moved to
// another field or another kind's job does not open.

// Errors of opening sealed data. A *DecryptError wraps ErrDecrypt and, when
// the key id is not in the keyring, ErrUnknownKey; compare with errors.Is.
var (
	// ErrDecrypt means sealed data could not be opened: its key id is not
	// in the keyring, it was altered, it belongs to another field or kind,
	// or it is malformed.
	ErrDecrypt = errors.New("backlog: cannot decrypt")
	// ErrUnknownKey means the key id a value was sealed with is not in the
	// keyring (or there is no keyring). Errors that wrap it also wrap
	// ErrDecrypt.
	ErrUnknownKey = errors.New("backlog: key id not in the keyring")
)

// CauseDecrypt is the AttemptError.Cause of an attempt that failed because
// the job's args could not be decrypted on the node that claimed it.
const CauseDecrypt = "decrypt_failed"

// Sealed fields, as bound into each ciphertext's additional data.
const (
	FieldArgs   = "args"   // Job.Args
	FieldResult = "result" // Job.Result
	FieldError  = "error"  // AttemptError.Error
	FieldTrace  = "trace"  // AttemptError.Trace
)

// DecryptError reports a value that could not be opened. It unwraps to
// ErrDecrypt and to Err (ErrUnknownKey for a missing key id).
type DecryptError struct {
	Field string // FieldArgs, FieldResult, FieldError or FieldTrace
	Kind  string // the job kind the value was opened for ("" for error text)
	KeyID string // the key id named by the value ("" when malformed)
	Err   error  // why: ErrUnknownKey, or a description of the failure
}

func (e *DecryptError) Error() string {
	s := "backlog: cannot decrypt " + e.Field
	if e.Kind != "" {
		s += fmt.Sprintf(" of kind %q", e.Kind)
	}
	if e.KeyID != "" {
		s += fmt.Sprintf(" (key id %q)", e.KeyID)
	}
	if errors.Is(e.Err, ErrUnknownKey) {
		return s + ": key id not in this process's keyring"
	}
	return s + ": " + errString(e.Err)
}

// Unwrap returns ErrDecrypt and the cause, so errors.Is matches both.
func (e *DecryptError) Unwrap() []error { return []error{ErrDecrypt, e.Err} }

var errAuth = errors.New("authentication failed (wrong key, altered data, or sealed for another field or kind)")

// KeySize is the length in bytes of every key: AES-256.
const KeySize = 32

// Keyring holds AES-256-GCM keys by id, one of them current. New values are
// sealed with the current key; every key in the ring opens values sealed
// with it. A Keyring is immutable and safe for concurrent use. It does not
// print its keys (String shows only the ids).
type Keyring struct {
	current string
	aeads   map[string]cipher.AEAD
}

// NewKeyring builds a keyring from keys (id → 32-byte key) whose current
// key is keys[current]. Key ids are 1..64 bytes of letters, digits and
// "_-.". It returns an error when current is not among the keys, a key is
// not 32 bytes, or an id is invalid. The key bytes are not retained.
func NewKeyring(current string, keys map[string][]byte) (*Keyring, error) {
	if _, ok := keys[current]; !ok {
		return nil, fmt.Errorf("backlog: keyring: current key id %q is not among the keys", current)
	}
	k := &Keyring{current: current, aeads: make(map[string]cipher.AEAD, len(keys))}
	for id, key := range keys {
		if err := contract.ValidKeyID(id); err != nil {
			return nil, err
		}
		if len(key) != KeySize {
			return nil, fmt.Errorf("backlog: keyring: key %q is %d bytes; AES-256 needs %d", id, len(key), KeySize)
		}
		block, err := aes.NewCipher(key)
		if err != nil {
			return nil, fmt.Errorf("backlog: keyring: key %q: %w", id, err)
		}
		aead, err := cipher.NewGCMWithRandomNonce(block)
		if err != nil {
			return nil, fmt.Errorf("backlog: keyring: key %q: %w", id, err)
		}
		k.aeads[id] = aead
	}
	return k, nil
}

// ParseKeyring parses the textual form of a keyring:
//
//	id=base64key[,id2=base64key2...]
//
// The first entry is the current key (put the newest key first; keep the
// older ones after it for as long as stored values may use them). Keys are
// 32 bytes in standard or URL-safe base64, padded or not, for example from
// `openssl rand -base64 32`. Spaces around entries are ignored. Errors name
// the entry's id, never its key.
func ParseKeyring(spec string) (*Keyring, error) {
	keys := map[string][]byte{}
	current := ""
	for i, entry := range strings.Split(spec, ",") {
		entry = strings.TrimSpace(entry)
		id, b64, ok := strings.Cut(entry, "=")
		id, b64 = strings.TrimSpace(id), strings.TrimSpace(b64)
		if !ok || id == "" || b64 == "" {
			return nil, fmt.Errorf("backlog: keyring: entry %d is not id=base64key", i+1)
		}
		if _, dup := keys[id]; dup {
			return nil, fmt.Errorf("backlog: keyring: key id %q appears twice", id)
		}
		key, err := decodeKey(b64)
		if err != nil {
			return nil, fmt.Errorf("backlog: keyring: key %q: %w", id, err)
		}
		keys[id] = key
		if i == 0 {
			current = id
		}
	}
	return NewKeyring(current, keys)
}

func decodeKey(s string) ([]byte, error) {
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(s); err == nil {
			return b, nil
		}
	}
	return nil, errors.New("not valid base64")
}

// Current returns the id of the key new values are sealed with.
func (k *Keyring) Current() string { return k.current }

// IDs returns the ids of every key in the ring, sorted.
func (k *Keyring) IDs() []string {
	ids := make([]string, 0, len(k.aeads))
	for id := range k.aeads {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// String describes the keyring by its ids only.
func (k *Keyring) String() string {
	if k == nil {
		return "Keyring(nil)"
	}
	return fmt.Sprintf("Keyring(current=%s, ids=%v)", k.current, k.IDs())
}

// GoString is String, so %#v prints no key material either.
func (k *Keyring) GoString() string { return k.String() }

// Encryption configures encryption at rest for a Client (Config.Encryption).
// Args are always sealed when it is set; results and error text when asked.
type Encryption struct {
	// Keys seals new values with its current key and opens values sealed
	// with any of its keys. Required.
	Keys *Keyring
	// Results seals job results (RecordResult) before they are stored.
	Results bool
	// Errors seals the text of error entries the engine writes for failed
	// attempts (AttemptError.Error and .Trace); Attempt, At and Cause stay
	// in clear. With it the engine also leaves error text out of its logs.
	Errors bool
	// RequireSealed makes workers refuse jobs whose args are plain (not
	// sealed): their attempts fail with ErrDecrypt. Leave it off while
	// jobs enqueued before encryption was turned on may still run; turn it
	// on afterwards, so a writer to the database cannot slip in plain args.
	RequireSealed bool
}

// aad returns the additional authenticated data of one sealed value.
func aad(field, kid, kind string) []byte {
	b := make([]byte, 0, 16+len(field)+len(kid)+len(kind))
	b = append(b, "backlog-enc:1\x00"...)
	b = append(b, field...)
	b = append(b, 0)
	b = append(b, kid...)
	b = append(b, 0)
	return append(b, kind...)
}

func (k *Keyring) seal(field, kind string, plain []byte) (kid string, ct []byte) {
	kid = k.current
	return kid, k.aeads[kid].Seal(nil, nil, plain, aad(field, kid, kind))
}

func (k *Keyring) open(field, kind, kid string, ct []byte) ([]byte, error) {
	if k == nil {
		return nil, &DecryptError{Field: field, Kind: kind, KeyID: kid, Err: ErrUnknownKey}
	}
	aead, ok := k.aeads[kid]
	if !ok {
		return nil, &DecryptError{Field: field, Kind: kind, KeyID: kid, Err: ErrUnknownKey}
	}
	plain, err := aead.Open(nil, nil, ct, aad(field, kid, kind))
	if err != nil {
		return nil, &DecryptError{Field: field, Kind: kind, KeyID: kid, Err: errAuth}
	}
	return plain, nil
}

func (k *Keyring) sealJSON(field, kind string, plain []byte) []byte {
	kid, ct := k.seal(field, kind, plain)
	out := make([]byte, 0, 40+len(kid)+base64.StdEncoding.EncodedLen(len(ct)))
	out = append(out, `{"backlog_enc":1,"kid":"`...)
	out = append(out, kid...)
	out = append(out, `","ct":"`...)
	out = base64.StdEncoding.AppendEncode(out, ct)
	return append(out, `"}`...)
}

func (k *Keyring) openJSON(field, kind string, b []byte) ([]byte, error) {
	env, sealed, err := contract.ParseEnvelope(b)
	if err != nil {
		return nil, &DecryptError{Field: field, Kind: kind, KeyID: env.KeyID, Err: err}
	}
	if !sealed {
		return b, nil
	}
	return k.open(field, kind, env.KeyID, env.Ciphertext)
}

// SealedKeyID returns the key id a sealed value (args, result or error
// text) names, and false for plain or malformed values.
func SealedKeyID(b []byte) (string, bool) {
	if env, sealed, err := contract.ParseEnvelope(b); sealed && err == nil {
		return env.KeyID, true
	}
	return textKeyID(string(b))
}

// textKeyID returns the key id sealed error text names.
func textKeyID(s string) (string, bool) {
	if !contract.IsSealedText(s) {
		return "", false
	}
	kid, _, ok := strings.Cut(s[len(textPrefix):], ":")
	return kid, ok && contract.ValidKeyID(kid) == nil
}

// SealArgs seals a job's JSON args for kind with the current key and
// returns the JSON envelope. Args already sealed are returned as they are.
// Sealing cannot fail: the ring always holds its current key, and
// crypto/rand never returns an error.
func (k *Keyring) SealArgs(kind string, args []byte) []byte {
	if contract.IsSealed(args) {
		return args
	}
	return k.sealJSON(FieldArgs, kind, args)
}

// OpenArgs returns the plaintext of args sealed for kind. Plain (never
// sealed) args are returned as they are, so tables that mix both keep
// working. The error is a *DecryptError wrapping ErrDecrypt (and
// ErrUnknownKey when the key id is not in the ring). A nil *Keyring opens
// plain args and fails on sealed ones.
func (k *Keyring) OpenArgs(kind string, args []byte) ([]byte, error) {
	return k.openJSON(FieldArgs, kind, args)
}

// SealResult seals a job's result bytes for kind into the JSON envelope
// (stores keep results as bytes; the envelope is also valid JSON). Results
// already sealed are returned as they are; nil stays nil.
func (k *Keyring) SealResult(kind string, result []byte) []byte {
	if result == nil || contract.IsSealed(result) {
		return result
	}
	return k.sealJSON(FieldResult, kind, result)
}

// OpenResult is OpenArgs for a result sealed by SealResult.
func (k *Keyring) OpenResult(kind string, result []byte) ([]byte, error) {
	return k.openJSON(FieldResult, kind, result)
}

const textPrefix = "backlog-enc:1:"

func (k *Keyring) sealText(field, s string) string {
	if s == "" || contract.IsSealedText(s) {
		return s
	}
	kid, ct := k.seal(field, "", []byte(s))
	return textPrefix + kid + ":" + base64.StdEncoding.EncodeToString(ct)
}

func (k *Keyring) openText(field, s string) (string, error) {
	if !contract.IsSealedText(s) {
		return s, nil
	}
	kid, b64, ok := strings.Cut(s[len(textPrefix):], ":")
	if !ok || contract.ValidKeyID(kid) != nil {
		return "", &DecryptError{Field: field, Err: errors.New("malformed sealed text")}
	}
	ct, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return "", &DecryptError{Field: field, KeyID: kid, Err: errors.New("malformed sealed text: not base64")}
	}
	plain, err := k.open(field, "", kid, ct)
	return string(plain), err
}

// SealAttemptError returns e with its Error and Trace text sealed (empty
// text stays empty); Attempt, At and Cause are kept in clear. Error text is
// bound to its field but not to the job's kind: one job's error history
// spans the kinds of its continued steps.
func (k *Keyring) SealAttemptError(e AttemptError) AttemptError {
	e.Error = k.sealText(FieldError, e.Error)
	e.Trace = k.sealText(FieldTrace, e.Trace)
	return e
}

// OpenAttemptError returns e with its Error and Trace opened; plain text is
// kept as it is. The error is a *DecryptError (see OpenArgs).
func (k *Keyring) OpenAttemptError(e AttemptError) (AttemptError, error) {
	var err error
	if e.Error, err = k.openText(FieldError, e.Error); err != nil {
		return e, err
	}
	if e.Trace, err = k.openText(FieldTrace, e.Trace); err != nil {
		return e, err
	}
	return e, nil
}

// OpenJob returns a copy of j with its args, result and error texts opened
// (plain values are kept as they are), for tools that show jobs to people
// holding the keys. On failure it returns the first *DecryptError and a
// copy in which every value that did open is opened and the others are
// left sealed.
func (k *Keyring) OpenJob(j *Job) (*Job, error) {
	out := *j
	var first error
	keep := func(err error) {
		if first == nil {
			first = err
		}
	}
	if args, err := k.OpenArgs(j.Kind, j.Args); err != nil {
		keep(err)
	} else {
		out.Args = args
	}
	if res, err := k.OpenResult(j.Kind, j.Result); err != nil {
		keep(err)
	} else {
		out.Result = res
	}
	if len(j.Errors) > 0 {
		out.Errors = make([]AttemptError, len(j.Errors))
		for i, e := range j.Errors {
			o, err := k.OpenAttemptError(e)
			if err != nil {
				keep(err)
				o = e
			}
			out.Errors[i] = o
		}
	}
	return &out, first
}

// ResealArgs opens args sealed for kind with any key of the ring and seals
// them again with the current key; changed reports whether it did. Args
// already under the current key are returned unchanged, and plain args are
// sealed. It is the step a re-encryption after a key rotation (`backlog
// keys rotate`, through a store's SealedRewriter) applies to each stored
// job's args.
func (k *Keyring) ResealArgs(kind string, args []byte) (out []byte, changed bool, err error) {
	return k.resealJSON(FieldArgs, kind, args)
}

// ResealResult is ResealArgs for a result sealed by SealResult: a result
// sealed with another key of the ring is opened and sealed again with the
// current key (changed true); one already under the current key is
// returned unchanged; a plain result is sealed; nil stays nil. The error
// is a *DecryptError (see OpenArgs), and out is nil with it.
func (k *Keyring) ResealResult(kind string, result []byte) (out []byte, changed bool, err error) {
	if result == nil {
		return nil, false, nil
	}
	return k.resealJSON(FieldResult, kind, result)
}

// ResealAttemptError is ResealArgs for the text of an error entry: its
// Error and Trace, each sealed with another key of the ring, are opened
// and sealed again with the current key; text already under the current
// key is kept; plain text is sealed; empty text stays empty. Attempt, At
// and Cause are kept. changed reports whether either text changed. The
// error is the first *DecryptError, returned with e as it was.
func (k *Keyring) ResealAttemptError(e AttemptError) (out AttemptError, changed bool, err error) {
	msg, c1, err := k.resealText(FieldError, e.Error)
	if err != nil {
		return e, false, err
	}
	trace, c2, err := k.resealText(FieldTrace, e.Trace)
	if err != nil {
		return e, false, err
	}
	out = e
	out.Error, out.Trace = msg, trace
	return out, c1 || c2, nil
}

// resealJSON is ResealArgs for any JSON-enveloped field.
func (k *Keyring) resealJSON(field, kind string, b []byte) ([]byte, bool, error) {
	env, sealed, err := contract.ParseEnvelope(b)
	if err != nil {
		return nil, false, &DecryptError{Field: field, Kind: kind, KeyID: env.KeyID, Err: err}
	}
	if sealed && env.KeyID == k.current {
		return b, false, nil
	}
	plain, err := k.openJSON(field, kind, b)
	if err != nil {
		return nil, false, err
	}
	return k.sealJSON(field, kind, plain), true, nil
}

// resealText is resealJSON for error text.
func (k *Keyring) resealText(field, s string) (string, bool, error) {
	if s == "" {
		return s, false, nil
	}
	if kid, ok := textKeyID(s); ok && kid == k.current {
		return s, false, nil
	}
	plain, err := k.openText(field, s)
	if err != nil {
		return "", false, err
	}
	// Not sealText: plain text that itself starts like sealed text must
	// be sealed too.
	kid, ct := k.seal(field, "", []byte(plain))
	return textPrefix + kid + ":" + base64.StdEncoding.EncodeToString(ct), true, nil
}
