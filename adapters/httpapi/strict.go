package httpapi

import (
	"bytes"
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"strings"
	"time"

	"github.com/go-json-experiment/json/jsontext"
)

// Request bodies are read strictly, beyond what encoding/json does on its
// own (unknown fields and trailing data are already refused there):
//
//   - an object, anywhere in the body (inside args and metadata too), may
//     not name a member twice: encoding/json would silently keep the last,
//     while other parsers keep the first, so two readers of the same
//     body could see different jobs;
//   - field names match exactly: encoding/json accepts "Kind" or "KIND"
//     for "kind" (and any Unicode case folding of it).
//   - every string, anywhere in the body (names and values, inside args
//     and metadata too), is valid UTF-8 without lone surrogate escapes
//     (\ud800): encoding/json would silently rewrite either to U+FFFD, so
//     two different unique keys, kinds, tags or metadata keys could become
//     one. Such a body is refused with 400 invalid-json naming where.
//
// checkStrict runs over the body before it is decoded and answers with the
// problem to send, or nil. Bodies it cannot tokenise are left to
// encoding/json, which reports the syntax error as before.

// checkStrict reports the first duplicate member name or wrong-case field
// name in data, which is about to be decoded into dst (a pointer).
func checkStrict(data []byte, dst any) *problem {
	dec := jsontext.NewDecoder(bytes.NewReader(data),
		jsontext.AllowDuplicateNames(false),
		jsontext.AllowInvalidUTF8(false), // refused below: encoding/json would rewrite it to U+FFFD
	)
	w := strictWalker{dec: dec, structs: map[reflect.Type]map[string]reflect.Type{}}
	t := reflect.TypeOf(dst)
	if t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return w.value(t)
}

// strictWalker walks one JSON value token by token alongside the Go type
// it decodes into (nil: any, no field names to check).
type strictWalker struct {
	dec     *jsontext.Decoder
	structs map[reflect.Type]map[string]reflect.Type // field names per struct type, for this body
	failed  bool                                     // a token could not be read: the walk is over
}

var (
	timeType        = reflect.TypeFor[time.Time]()
	jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// derefType returns t without pointers (nil for nil).
func derefType(t reflect.Type) reflect.Type {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}

// rfc3339Shape is the shape strictTime accepts: RFC 3339's date-time, the
// fraction and the offset captured.
var rfc3339Shape = regexp.MustCompile(`^[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt][0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?([Zz]|[+-]([0-9]{2}):([0-9]{2}))$`)

// strictTime checks what time.Time's decoding lets through but RFC 3339
// and Go's times do not hold: an offset outside -23:59..+23:59 (+24:00
// is not an offset) and more than six fractional digits: every store
// keeps microseconds, so a finer time would be stored as another time
// than the one sent (and time.Parse drops what lies beyond nanoseconds
// without a word). Go's encoder writes nanoseconds: the Go client sends
// its times to the microsecond. The rest of the syntax is left to
// time.Parse.
func strictTime(s string) error {
	m := rfc3339Shape.FindStringSubmatch(s)
	if m == nil {
		_, err := time.Parse(time.RFC3339Nano, s)
		if err == nil {
			err = errors.New("not in RFC 3339's shape")
		}
		return fmt.Errorf("a time is not RFC 3339 (like 2030-01-02T03:04:05Z): %q: %v", clip(s), err)
	}
	if len(m[1]) > 7 { // the dot and more than six digits
		return fmt.Errorf("time %q has %d fractional digits: at most 6 (microseconds, what the store keeps)", clip(s), len(m[1])-1)
	}
	if m[3] != "" && (m[3] > "23" || m[4] > "59") {
		return fmt.Errorf("time %q has offset %s: offsets run from -23:59 to +23:59", clip(s), m[2])
	}
	return nil
}

// parseTime parses a time of a query string (RFC 3339, as strictTime
// accepts), returning it in UTC.
func parseTime(s string) (time.Time, error) {
	if err := strictTime(s); err != nil {
		return time.Time{}, err
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, err
	}
	return t.UTC(), nil
}

// schema returns the type whose field names apply to a JSON value decoded
// into t: t without pointers, or nil when t decodes itself (its
// UnmarshalJSON or UnmarshalText sees the raw value) or takes any JSON.
func schema(t reflect.Type) reflect.Type {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || t.Kind() == reflect.Interface {
		return nil
	}
	if p := reflect.PointerTo(t); p.Implements(jsonUnmarshaler) || p.Implements(textUnmarshaler) {
		return nil
	}
	return t
}

// value walks one value decoded into t. It returns nil also when the
// tokens end in an error other than a duplicate name (encoding/json then
// reports it); the walk stops at the first error.
func (w *strictWalker) value(t reflect.Type) *problem {
	isTime := derefType(t) == timeType
	t = schema(t)
	tok, ok, p := w.read()
	if !ok {
		return p
	}
	if isTime && tok.Kind() == '"' {
		if err := strictTime(tok.String()); err != nil {
			return newProblem(SlugInvalidRequest, fmt.Sprintf("%s: %v", "/"+strings.TrimPrefix(string(w.dec.StackPointer()), "/"), err))
		}
		return nil
	}
	switch tok.Kind() {
	case '{':
		var fields map[string]reflect.Type
		var elem reflect.Type
		if t != nil {
			switch t.Kind() {
			case reflect.Struct:
				fields = w.fields(t)
			case reflect.Map:
				elem = t.Elem()
			}
		}
		for {
			tok, ok, p := w.read() // a member name or the end
			if !ok {
				return p
			}
			if tok.Kind() == '}' {
				return nil
			}
			name := tok.String()
			next := elem
			if fields != nil {
				ft, ok := fields[name]
				if !ok {
					for known := range fields {
						if strings.EqualFold(known, name) {
							return newProblem(SlugInvalidRequest, fmt.Sprintf("unknown field %q at %s: field names are case-sensitive (did you mean %q?)", name, pointerOf(w.dec, name), known))
						}
					}
				}
				next = ft // nil for an unknown field: encoding/json refuses it
			}
			if p := w.value(next); p != nil || w.failed {
				return p
			}
		}
	case '[':
		var elem reflect.Type
		if t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) {
			elem = t.Elem()
		}
		for {
			if w.dec.PeekKind() == ']' {
				_, _, p := w.read()
				return p
			}
			if p := w.value(elem); p != nil || w.failed {
				return p
			}
		}
	}
	return nil
}

// read reads the next token. ok is false when there is none (the body is
// malformed or cut short): the walk ends, with p set when the reason is a
// duplicate name.
func (w *strictWalker) read() (tok jsontext.Token, ok bool, p *problem) {
	tok, err := w.dec.ReadToken()
	if err != nil {
		w.failed = true
		if p := utf8Problem(err); p != nil {
			return tok, false, p
		}
		return tok, false, duplicateProblem(err)
	}
	return tok, true, nil
}

// pointerOf is the JSON Pointer of member name of the object being read.
func pointerOf(dec *jsontext.Decoder, name string) string {
	p := dec.StackPointer()
	if p.LastToken() != name {
		p = p.AppendToken(name)
	}
	return "/" + strings.TrimPrefix(string(p), "/")
}

// utf8Problem turns an error reading a string that is not valid UTF-8,
// or holds a lone surrogate escape, into its problem; any other error (and
// nil) gives nil. (jsontext does not export its sentinel for these: its
// messages are matched, and TestStrictRefusesInvalidUTF8 pins them.)
func utf8Problem(err error) *problem {
	var se *jsontext.SyntacticError
	if err == nil || !errors.As(err, &se) || se.Err == nil {
		return nil
	}
	msg := se.Err.Error()
	if !strings.Contains(msg, "invalid UTF-8") && !strings.Contains(msg, "surrogate") {
		return nil
	}
	at := ""
	if se.JSONPointer != "" {
		at = " at " + string(se.JSONPointer)
	}
	return newProblem(SlugInvalidJSON, fmt.Sprintf("a string%s (byte %d) is not valid UTF-8 or holds a lone surrogate escape: JSON text must be UTF-8, and nothing is rewritten to U+FFFD", at, se.ByteOffset))
}

// duplicateProblem turns a duplicate-name error into its problem; any other
// error (and nil) gives nil.
func duplicateProblem(err error) *problem {
	var se *jsontext.SyntacticError
	if err == nil || !errors.As(err, &se) || !errors.Is(se.Err, jsontext.ErrDuplicateName) {
		return nil
	}
	return newProblem(SlugInvalidRequest, fmt.Sprintf("duplicate key %q at %s: every key may appear once per object", se.JSONPointer.LastToken(), "/"+strings.TrimPrefix(string(se.JSONPointer), "/")))
}

// fields returns the JSON names of struct type t's fields, as
// encoding/json sees them (tags, embedded structs promoted), with the type
// each decodes into.
func (w *strictWalker) fields(t reflect.Type) map[string]reflect.Type {
	if f, ok := w.structs[t]; ok {
		return f
	}
	f := map[string]reflect.Type{}
	w.structs[t] = f
	collectFields(t, f, map[reflect.Type]bool{})
	return f
}

func collectFields(t reflect.Type, out map[string]reflect.Type, seen map[reflect.Type]bool) {
	if seen[t] {
		return
	}
	seen[t] = true
	var embedded []reflect.Type
	for i := range t.NumField() {
		sf := t.Field(i)
		tag := sf.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if sf.Anonymous && name == "" {
			et := sf.Type
			if et.Kind() == reflect.Pointer {
				et = et.Elem()
			}
			if et.Kind() == reflect.Struct {
				embedded = append(embedded, et)
				continue
			}
		}
		if !sf.IsExported() {
			continue
		}
		if name == "" {
			name = sf.Name
		}
		out[name] = sf.Type
	}
	// Fields of embedded structs are promoted unless a shallower field
	// has the name.
	for _, et := range embedded {
		inner := map[string]reflect.Type{}
		collectFields(et, inner, seen)
		for name, ft := range inner {
			if _, ok := out[name]; !ok {
				out[name] = ft
			}
		}
	}
}
