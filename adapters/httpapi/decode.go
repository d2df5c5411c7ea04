package httpapi

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"os"
	"strings"
	"time"
	"unicode/utf8"
)

// decodeBody reads r's JSON body into dst. It enforces MaxBodyBytes, the
// application/json content type, unknown-field rejection, the absence of
// trailing data, and (checkStrict) exact-case field names and objects
// without duplicate keys. When required is false an empty body leaves dst
// as it is. The returned error is a *problem.
func (s *Server) decodeBody(w http.ResponseWriter, r *http.Request, dst any, required bool) error {
	body := http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes)
	br := bufio.NewReader(body)
	if _, err := br.Peek(1); err != nil {
		var mbe *http.MaxBytesError
		switch {
		case errors.As(err, &mbe):
			return tooLarge(s.cfg.MaxBodyBytes)
		case errors.Is(err, io.EOF):
			if required {
				return newProblem(SlugInvalidRequest, "a JSON request body is required")
			}
			return nil
		case isTimeout(err):
			return s.bodyTimeout()
		default:
			return newProblem(SlugInvalidRequest, "reading the request body: "+err.Error())
		}
	}
	if err := checkContentType(r); err != nil {
		return err
	}
	// The whole body is read first (encoding/json's decoder would buffer
	// it whole as well): checkStrict and the decoder both go over it.
	var buf bytes.Buffer
	if n := r.ContentLength; n > 0 && n <= s.cfg.MaxBodyBytes {
		buf.Grow(int(n) + bytes.MinRead)
	}
	_, err := buf.ReadFrom(br)
	data := buf.Bytes()
	if err != nil {
		var mbe *http.MaxBytesError
		switch {
		case errors.As(err, &mbe):
			return tooLarge(s.cfg.MaxBodyBytes)
		case isTimeout(err):
			return s.bodyTimeout()
		}
		return newProblem(SlugInvalidRequest, "reading the request body: "+err.Error())
	}
	if p := checkStrict(data, dst); p != nil {
		return p
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		if isTimeout(err) {
			return s.bodyTimeout()
		}
		return decodeProblem(err, s.cfg.MaxBodyBytes)
	}
	var extra json.RawMessage
	switch err := dec.Decode(&extra); {
	case errors.Is(err, io.EOF):
		return nil
	case err == nil:
		return newProblem(SlugInvalidJSON, "trailing data after the JSON value")
	default:
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return tooLarge(s.cfg.MaxBodyBytes)
		}
		return newProblem(SlugInvalidJSON, "trailing data after the JSON value")
	}
}

// isTimeout reports whether err is a read deadline passing.
func isTimeout(err error) bool {
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// bodyTimeout is the answer to a body that did not arrive within
// Config.BodyReadTimeout. The connection is closed after it.
func (s *Server) bodyTimeout() *problem {
	return newProblem(SlugInvalidRequest, fmt.Sprintf("the request body did not arrive within %s", s.cfg.BodyReadTimeout))
}

func tooLarge(limit int64) *problem {
	return newProblem(SlugBodyTooLarge, fmt.Sprintf("the request body is over the limit of %d bytes", limit))
}

// checkContentType accepts application/json with any parameters.
func checkContentType(r *http.Request) error {
	ct := r.Header.Get("Content-Type")
	if ct == "" {
		return newProblem(SlugUnsupportedMediaType, "the request body needs Content-Type: application/json")
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil || mt != "application/json" {
		return newProblem(SlugUnsupportedMediaType, fmt.Sprintf("content type %q is not application/json", ct))
	}
	return nil
}

// decodeProblem maps a json.Decoder error to a problem.
func decodeProblem(err error, limit int64) *problem {
	var (
		mbe *http.MaxBytesError
		se  *json.SyntaxError
		ute *json.UnmarshalTypeError
		tpe *time.ParseError
	)
	switch {
	case errors.As(err, &mbe):
		return tooLarge(limit)
	case errors.As(err, &se):
		return newProblem(SlugInvalidJSON, fmt.Sprintf("invalid JSON at byte %d: %v", se.Offset, se))
	case errors.Is(err, io.ErrUnexpectedEOF):
		return newProblem(SlugInvalidJSON, "the JSON body ends early")
	case errors.As(err, &ute):
		field := ute.Field
		if field == "" {
			return newProblem(SlugInvalidRequest, fmt.Sprintf("the body must be a JSON object, not %s", ute.Value))
		}
		return newProblem(SlugInvalidRequest, fmt.Sprintf("field %q must be %s, not %s", field, jsonTypeName(ute.Type.String()), ute.Value))
	case errors.As(err, &tpe):
		return newProblem(SlugInvalidRequest, fmt.Sprintf("a time is not RFC 3339 (like 2030-01-02T03:04:05Z): %v", err))
	}
	msg := err.Error()
	if f, ok := strings.CutPrefix(msg, "json: unknown field "); ok {
		return newProblem(SlugInvalidRequest, "unknown field "+f)
	}
	return newProblem(SlugInvalidRequest, strings.TrimPrefix(msg, "json: "))
}

// jsonTypeName names a Go type the way a JSON user thinks of it.
func jsonTypeName(goType string) string {
	switch {
	case strings.HasPrefix(goType, "int"), strings.HasPrefix(goType, "uint"), strings.HasPrefix(goType, "*int"):
		return "an integer"
	case strings.HasPrefix(goType, "float"), strings.HasPrefix(goType, "*float"):
		return "a number"
	case goType == "string", goType == "*string":
		return "a string"
	case goType == "bool", goType == "*bool":
		return "a boolean"
	case strings.HasPrefix(goType, "[]"):
		return "an array"
	case strings.HasPrefix(goType, "map["):
		return "an object"
	case strings.Contains(goType, "time.Time"):
		return "an RFC 3339 time string"
	}
	return "of type " + goType
}

// parseDecimal parses s as an integer from lo to hi written in canonical
// decimal: digits only, no sign, no leading zero (but "0" itself), so
// that one number has one spelling ("+1", "01" and " 1" are refused).
func parseDecimal(s string, lo, hi int64) (int64, bool) {
	if s == "" || len(s) > 19 || s[0] == '0' && len(s) > 1 {
		return 0, false
	}
	var n int64
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
		if n < 0 { // overflow
			return 0, false
		}
	}
	if n < lo || n > hi {
		return 0, false
	}
	return n, true
}

// clip bounds user input quoted in an error message: at most 64 bytes,
// then how many more there were.
func clip(s string) string {
	const max = 64
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%s… (%d bytes)", s[:cut], len(s))
}
