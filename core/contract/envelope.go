package contract

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// MaxKeyIDLen is the longest key id, in bytes.
const MaxKeyIDLen = 64

// ValidKeyID returns nil when id can name a key: 1 to MaxKeyIDLen bytes of
// ASCII letters, digits, '_', '-' and '.'; otherwise an error that says why.
func ValidKeyID(id string) error {
	if id == "" || len(id) > MaxKeyIDLen {
		return fmt.Errorf("backlog: keyring: key id %q must be 1..%d bytes", id, MaxKeyIDLen)
	}
	for _, r := range id {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' || r == '.'
		if !ok {
			return fmt.Errorf("backlog: keyring: key id %q may hold only letters, digits and _-.", id)
		}
	}
	return nil
}

const envelopeKey = `"backlog_enc"`

// Envelope is the parsed JSON form of a sealed value: the id of the key
// that sealed it and the ciphertext (nonce, sealed bytes and tag).
type Envelope struct {
	KeyID      string
	Ciphertext []byte
}

// ParseEnvelope reports whether b is a version-1 JSON envelope: an object
// with exactly the keys backlog_enc (1), kid (a valid key id) and ct
// (base64), in any order and spacing (stores may normalise JSON). err is
// set for an object that claims to be an envelope but is malformed.
func ParseEnvelope(b []byte) (env Envelope, sealed bool, err error) {
	t := bytes.TrimLeft(b, " \t\r\n")
	if len(t) == 0 || t[0] != '{' || !bytes.Contains(t, []byte(envelopeKey)) {
		return env, false, nil
	}
	if kid, ct, ok := exactEnvelope(t); ok {
		raw, derr := base64.StdEncoding.DecodeString(ct)
		if derr != nil {
			return env, true, malformed("ct is not base64")
		}
		return Envelope{KeyID: kid, Ciphertext: raw}, true, nil
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(b, &m) != nil {
		return env, false, nil
	}
	v, ok := m["backlog_enc"]
	if !ok {
		return env, false, nil
	}
	var ver int
	var kid, ct string
	if len(m) != 3 || json.Unmarshal(v, &ver) != nil || json.Unmarshal(m["kid"], &kid) != nil || json.Unmarshal(m["ct"], &ct) != nil {
		return env, true, malformed("want exactly the members backlog_enc (a number), kid and ct (strings)")
	}
	if ver != 1 {
		return env, true, malformed(fmt.Sprintf("envelope version %d is not supported", ver))
	}
	if ValidKeyID(kid) != nil {
		return env, true, malformed("invalid key id")
	}
	raw, derr := base64.StdEncoding.DecodeString(ct)
	if derr != nil {
		return env, true, malformed("ct is not base64")
	}
	return Envelope{KeyID: kid, Ciphertext: raw}, true, nil
}

// The envelope as sealJSON writes it, and as PostgreSQL's jsonb and MySQL's
// JSON type return it (keys ordered by length, ": " and ", " separators).
var envelopeForms = [][3]string{
	{`{"backlog_enc":1,"kid":"`, `","ct":"`, `"}`},
	{`{"ct": "`, `", "kid": "`, `", "backlog_enc": 1}`},
}

// exactEnvelope recognises the envelope in one of envelopeForms without a
// JSON decoder (opening args is on every execution's path). Neither a key
// id nor base64 contains a quote or a backslash, so a match is exactly that
// JSON object; anything else is left to encoding/json.
func exactEnvelope(b []byte) (kid, ct string, ok bool) {
	for i, f := range envelopeForms {
		rest, found := bytes.CutPrefix(b, []byte(f[0]))
		if !found {
			continue
		}
		first, rest, found := bytes.Cut(rest, []byte(f[1]))
		if !found {
			return "", "", false
		}
		second, found := bytes.CutSuffix(bytes.TrimRight(rest, " \t\r\n"), []byte(f[2]))
		if !found {
			return "", "", false
		}
		kid, ct = string(first), string(second)
		if i == 1 {
			kid, ct = ct, kid
		}
		if ValidKeyID(kid) != nil || !isBase64Std(ct) {
			return "", "", false
		}
		return kid, ct, true
	}
	return "", "", false
}

func isBase64Std(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '+' || c == '/' || c == '=') {
			return false
		}
	}
	return true
}

// IsSealed reports whether b (args or a result) is in the sealed JSON form:
// a JSON object with a top-level "backlog_enc" member (a reserved name). A
// malformed envelope counts as sealed: it must not be run as plain data.
func IsSealed(b []byte) bool {
	_, sealed, _ := ParseEnvelope(b)
	return sealed
}

// ErrMalformedEnvelope is returned by CheckSealed for a value that claims
// to be sealed (a JSON object with a top-level "backlog_enc" member) but is
// not a well-formed envelope. The *DecryptError of opening such a value
// matches it too (errors.Is).
var ErrMalformedEnvelope = errors.New("backlog: malformed sealed envelope")

// malformedError is a value that claims to be sealed but is not a
// well-formed envelope; it matches ErrMalformedEnvelope.
type malformedError string

func malformed(why string) error { return malformedError(why) }

func (e malformedError) Error() string { return "malformed envelope: " + string(e) }

func (e malformedError) Is(target error) bool { return target == ErrMalformedEnvelope }

// CheckSealed reports whether b (args or a result) claims to be sealed —
// a JSON object with a top-level "backlog_enc" member — and, if it does,
// whether it has the envelope's shape without opening it (no key is
// needed): exactly the members backlog_enc (1), kid (a valid key id) and ct
// (standard base64 of at least the 28 bytes of nonce and tag). A malformed
// one returns sealed true and an error matching ErrMalformedEnvelope
// (errors.Is) whose text says what is wrong without quoting b. Whether the ciphertext opens
// (right key, kind and field, not altered) is left to OpenArgs.
func CheckSealed(b []byte) (sealed bool, err error) {
	env, sealed, err := ParseEnvelope(b)
	switch {
	case !sealed:
		return false, nil
	case err != nil:
		return true, err
	case len(env.Ciphertext) < gcmOverhead:
		return true, malformed(fmt.Sprintf("ct holds %d bytes, fewer than the %d of nonce and tag", len(env.Ciphertext), gcmOverhead))
	}
	return true, nil
}

// IsSealedText reports whether s (error text) is in the sealed text form.
func IsSealedText(s string) bool { return strings.HasPrefix(s, textPrefix) }

const (
	textPrefix = "backlog-enc:1:"
)
