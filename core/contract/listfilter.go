package contract

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// ErrInvalidFilter wraps every refusal of a job filter or a bulk request
// (a malformed ListParams.ArgsContains pattern, an unknown bulk action, a
// limit out of range). The message says what is wrong.
var ErrInvalidFilter = errors.New("backlog: invalid filter")

// Bounds of a ListParams.ArgsContains pattern.
const (
	MaxArgsPatternBytes  = 4096 // the pattern's JSON text
	MaxArgsPatternLeaves = 32   // scalar values it names
	MaxArgsPatternDepth  = 8    // nested objects, the top one included
	MaxArgsPatternKey    = 128  // bytes of one object key
)

// ArgsLeaf is one requirement of an args search pattern (see
// ListParams.ArgsContains): the args' value at Path — object keys from
// the top of the args down — must be a JSON scalar equal to Value. Strings
// compare byte for byte, numbers by value (1 equals 1.0), true, false and
// null only equal themselves.
type ArgsLeaf struct {
	Path  []string
	Value json.RawMessage // a JSON string, number, true, false or null, compact
}

// JSONPath returns the leaf's path in the JSON path syntax SQLite and
// MySQL share: $."key"."key2" (keys hold no '"' or '\', see
// ParseArgsPattern).
func (l ArgsLeaf) JSONPath() string {
	var b strings.Builder
	b.WriteString("$")
	for _, k := range l.Path {
		b.WriteString(`."`)
		b.WriteString(k)
		b.WriteString(`"`)
	}
	return b.String()
}

// Type returns the JSON type of the leaf's value: "string", "number",
// "true", "false" or "null".
func (l ArgsLeaf) Type() string {
	switch c := l.Value[0]; {
	case c == '"':
		return "string"
	case c == 't':
		return "true"
	case c == 'f':
		return "false"
	case c == 'n':
		return "null"
	}
	return "number"
}

// String returns the value of a "string" leaf, unquoted ("" for others).
func (l ArgsLeaf) String() string {
	var s string
	if l.Type() == "string" {
		_ = json.Unmarshal(l.Value, &s)
	}
	return s
}

// Number returns the value of a "number" leaf as an int64 when it is an
// integer in its range, else as a float64 (nil for other leaves): the
// form a SQL driver binds.
func (l ArgsLeaf) Number() any {
	if l.Type() != "number" {
		return nil
	}
	f, ok := new(big.Float).SetPrec(200).SetString(string(l.Value))
	if !ok {
		return nil
	}
	if f.IsInt() {
		if n, acc := f.Int64(); acc == big.Exact {
			return n
		}
	}
	v, _ := f.Float64()
	return v
}

// ParseArgsPattern validates an args search pattern and returns what it
// requires, one leaf per scalar, ordered by path. The pattern is a JSON
// object; nested objects narrow to their keys, and every leaf is a
// string, number, true, false or null. The pattern {} (or nil) requires
// nothing and returns no leaves. It returns an error wrapping
// ErrInvalidFilter for anything else: not a JSON object, an array
// anywhere (arrays are not searchable: containment of arrays differs
// between databases), an empty nested object, a key that is empty, longer
// than MaxArgsPatternKey, not UTF-8 or holding '"' or '\', a number out
// of the range of a float64, the top-level
// key "backlog_enc" (reserved for sealed args, see Keyring), or a pattern
// over MaxArgsPatternBytes, MaxArgsPatternLeaves or MaxArgsPatternDepth.
//
// The meaning is PostgreSQL's jsonb containment (args @> pattern)
// restricted to patterns without arrays, which every store can evaluate
// alike.
func ParseArgsPattern(pattern []byte) ([]ArgsLeaf, error) {
	if len(bytes.TrimSpace(pattern)) == 0 {
		return nil, nil
	}
	if len(pattern) > MaxArgsPatternBytes {
		return nil, badFilter("args search: the pattern is %d bytes, over the limit of %d", len(pattern), MaxArgsPatternBytes)
	}
	dec := json.NewDecoder(bytes.NewReader(pattern))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, badFilter("args search: the pattern is not valid JSON: %v", err)
	}
	if dec.More() {
		return nil, badFilter("args search: the pattern must be one JSON object")
	}
	top, ok := v.(map[string]any)
	if !ok {
		return nil, badFilter("args search: the pattern must be a JSON object such as {\"customer\":42}")
	}
	if _, ok := top["backlog_enc"]; ok {
		return nil, badFilter("args search: the key \"backlog_enc\" is reserved for sealed args, which cannot be searched")
	}
	var leaves []ArgsLeaf
	var walk func(m map[string]any, path []string) error
	walk = func(m map[string]any, path []string) error {
		if len(path) >= MaxArgsPatternDepth {
			return badFilter("args search: the pattern nests objects deeper than %d", MaxArgsPatternDepth)
		}
		for k, x := range m {
			if k == "" || len(k) > MaxArgsPatternKey || !utf8.ValidString(k) || strings.ContainsAny(k, "\"\\") {
				return badFilter("args search: key %q must be 1..%d bytes of UTF-8 without '\"' or '\\'", k, MaxArgsPatternKey)
			}
			p := append(slices.Clone(path), k)
			switch x := x.(type) {
			case map[string]any:
				if len(x) == 0 {
					return badFilter("args search: %s is an empty object; name a key inside it or leave it out", ArgsLeaf{Path: p}.JSONPath())
				}
				if err := walk(x, p); err != nil {
					return err
				}
			case []any:
				return badFilter("args search: %s is an array; arrays cannot be searched, only objects, strings, numbers, true, false and null", ArgsLeaf{Path: p}.JSONPath())
			default:
				if n, ok := x.(json.Number); ok {
					if _, err := strconv.ParseFloat(n.String(), 64); err != nil {
						return badFilter("args search: %s: the number %s is out of range", ArgsLeaf{Path: p}.JSONPath(), n)
					}
				}
				b, _ := json.Marshal(x)
				leaves = append(leaves, ArgsLeaf{Path: p, Value: b})
				if len(leaves) > MaxArgsPatternLeaves {
					return badFilter("args search: the pattern names more than %d values", MaxArgsPatternLeaves)
				}
			}
		}
		return nil
	}
	if err := walk(top, nil); err != nil {
		return nil, err
	}
	slices.SortFunc(leaves, func(a, b ArgsLeaf) int { return slices.Compare(a.Path, b.Path) })
	return leaves, nil
}

// ArgsMatch reports whether args (a job's JSON args) hold every leaf. Sealed
// args (IsSealed) never match: their plaintext is not in the store. No
// leaves match every args, sealed or not.
func ArgsMatch(args []byte, leaves []ArgsLeaf) bool {
	if len(leaves) == 0 {
		return true
	}
	if IsSealed(args) {
		return false
	}
	dec := json.NewDecoder(bytes.NewReader(args))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil {
		return false
	}
	for _, l := range leaves {
		cur := v
		for _, k := range l.Path {
			m, ok := cur.(map[string]any)
			if !ok {
				return false
			}
			if cur, ok = m[k]; !ok {
				return false
			}
		}
		if !scalarEqual(cur, l) {
			return false
		}
	}
	return true
}

// scalarEqual compares a decoded JSON value with a leaf's value.
func scalarEqual(v any, l ArgsLeaf) bool {
	switch l.Type() {
	case "string":
		s, ok := v.(string)
		return ok && s == l.String()
	case "true":
		return v == true
	case "false":
		return v == false
	case "null":
		return v == nil
	}
	n, ok := v.(json.Number)
	if !ok {
		return false
	}
	a, ok1 := new(big.Float).SetPrec(200).SetString(n.String())
	b, ok2 := new(big.Float).SetPrec(200).SetString(string(l.Value))
	return ok1 && ok2 && a.Cmp(b) == 0
}

// Matches reports whether j passes the filters of p: Queue, Kind,
// WorkerID, WorkflowID, WorkflowFirst, States and ArgsContains (an invalid pattern matches nothing).
// Paging fields (AfterID, Desc, Limit) are ignored. It is the reference
// meaning of List's filters; the memory store and bulk actions use it.
func (p ListParams) Matches(j *Job) bool {
	switch {
	case p.Queue != "" && j.Queue != p.Queue,
		p.Kind != "" && j.Kind != p.Kind,
		p.WorkerID != "" && j.WorkerID != p.WorkerID,
		p.WorkflowID != 0 && j.WorkflowID != p.WorkflowID,
		p.WorkflowFirst && (j.WorkflowID == 0 || j.WorkflowID != j.ID),
		len(p.States) > 0 && !slices.Contains(p.States, j.State):
		return false
	}
	if len(p.ArgsContains) == 0 {
		return true
	}
	leaves, err := ParseArgsPattern(p.ArgsContains)
	return err == nil && ArgsMatch(j.Args, leaves)
}

func badFilter(format string, a ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalidFilter}, a...)...)
}
