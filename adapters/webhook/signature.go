package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// The headers of a webhook request besides Content-Type and User-Agent.
const (
	// HeaderTimestamp is when the request was signed: Unix seconds, UTC,
	// in decimal.
	HeaderTimestamp = "Backlog-Timestamp"
	// HeaderSignature is Sign(secret, timestamp, body): the lower-case hex
	// HMAC-SHA256 of the timestamp header's value, ".", and the body.
	HeaderSignature = "Backlog-Signature"
	// HeaderJobID and HeaderAttempt repeat the body's id and attempt
	// (decimal), for logs and routing without reading the body. A
	// receiver that must not act twice on one job deduplicates by the job
	// id: every attempt of a job is a new request.
	HeaderJobID   = "Backlog-Job-Id"
	HeaderAttempt = "Backlog-Attempt"
)

// DefaultReplayWindow is how old (or how far in the future) Verify lets a
// request's timestamp be: a captured request replayed later is refused.
const DefaultReplayWindow = 5 * time.Minute

// MinSecretLen is the shortest secret Config.Secret may be, in bytes.
const MinSecretLen = 16

// Errors of Verify.
var (
	// ErrBadSignature: the signature header is missing, not hex, or not
	// the body's signature under the secret.
	ErrBadSignature = errors.New("webhook: bad signature")
	// ErrStale: the timestamp header is missing, not Unix seconds, or
	// outside the replay window around now.
	ErrStale = errors.New("webhook: timestamp outside the replay window")
)

// Sign returns the signature of body sent at timestamp (the decimal Unix
// seconds of HeaderTimestamp): the lower-case hex HMAC-SHA256 under secret
// of timestamp + "." + body. The scheme is Stripe's webhook signature
// (its "t" and "v1" values), with plain headers.
func Sign(secret []byte, timestamp string, body []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(timestamp))
	m.Write([]byte{'.'})
	m.Write(body)
	return hex.EncodeToString(m.Sum(nil))
}

// Verify checks a received webhook request: header holds HeaderTimestamp
// and HeaderSignature, body is the request body exactly as received. It
// returns nil when the signature is body's under secret (compared in
// constant time) and the timestamp lies within window of now (a window <=
// 0 means DefaultReplayWindow); otherwise an error wrapping
// ErrBadSignature or ErrStale. During a rotation of the secret, a
// receiver calls it with each secret it accepts.
func Verify(secret []byte, header http.Header, body []byte, now time.Time, window time.Duration) error {
	if window <= 0 {
		window = DefaultReplayWindow
	}
	ts := header.Get(HeaderTimestamp)
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return fmt.Errorf("%w: %s %q is not Unix seconds", ErrStale, HeaderTimestamp, ts)
	}
	if d := now.Sub(time.Unix(sec, 0)); d > window || d < -window {
		return fmt.Errorf("%w: signed %s ago, window %s", ErrStale, d.Round(time.Second), window)
	}
	got, err := hex.DecodeString(header.Get(HeaderSignature))
	if err != nil || len(got) != sha256.Size {
		return fmt.Errorf("%w: %s is not %d hex digits", ErrBadSignature, HeaderSignature, 2*sha256.Size)
	}
	want, _ := hex.DecodeString(Sign(secret, ts, body))
	if !hmac.Equal(got, want) {
		return ErrBadSignature
	}
	return nil
}
