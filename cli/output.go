package cli

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/backlogq/backlog/adapters/httpapi/apitypes"
	"github.com/backlogq/backlog/core"
)

// enqueuedJob is what enqueue -o json prints: the job as the HTTP API
// shows it (apitypes.Job, which jobs get and jobs list print too), with
// "duplicate": true when the unique key was held by a live job and
// nothing was inserted (the API gives that beside the job instead).
type enqueuedJob struct {
	*apitypes.Job
	Duplicate bool `json:"duplicate,omitempty"`
}

// writeJSON writes v as indented JSON followed by a newline.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// table writes aligned columns; call flush when done.
type table struct{ tw *tabwriter.Writer }

func newTable(w io.Writer, header ...string) *table {
	t := &table{tw: tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)}
	t.row(header...)
	return t
}

func (t *table) row(cells ...string) {
	for i, c := range cells {
		cells[i] = oneLine(c)
	}
	fmt.Fprintln(t.tw, strings.Join(cells, "\t"))
}

func (t *table) flush() error { return t.tw.Flush() }

// oneLine replaces tabs and line breaks so a cell stays in its column,
// and escapes every other control character (see printable).
func oneLine(s string) string {
	if strings.ContainsAny(s, "\t\n") {
		s = strings.NewReplacer("\t", " ", "\r\n", " ⏎ ", "\n", " ⏎ ").Replace(s)
	}
	return printable(s, "")
}

// printable returns s safe to print on a terminal: the characters a
// terminal would act on instead of showing are written as Go escapes, so
// that a kind, queue, error or result stored by anyone cannot move the
// cursor, recolour or retitle the terminal, or overwrite what was printed
// before it (a carriage return). Escaped are the C0 controls and DEL
// (\r, \n, \t, \xNN), except those in keep; the C1 controls U+0080 to
// U+009F and the Unicode bidirectional formatting characters (\uNNNN),
// which can make text display in another order than it is stored; and
// bytes that are not UTF-8 (\xNN). Everything else, other scripts and
// emoji included, is kept.
func printable(s, keep string) string {
	i := 0
	for i < len(s) {
		r, size := utf8.DecodeRuneInString(s[i:])
		if needsEscape(r, size, keep) {
			break
		}
		i += size
	}
	if i == len(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	b.WriteString(s[:i])
	for i < len(s) {
		r, size := utf8.DecodeRuneInString(s[i:])
		if !needsEscape(r, size, keep) {
			b.WriteString(s[i : i+size])
			i += size
			continue
		}
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x80:
			fmt.Fprintf(&b, `\x%02x`, r)
		default:
			fmt.Fprintf(&b, `\u%04x`, r)
		}
		i += size
	}
	return b.String()
}

// needsEscape reports whether the rune r, of size bytes, must be escaped
// by printable.
func needsEscape(r rune, size int, keep string) bool {
	switch {
	case r == utf8.RuneError && size == 1: // not UTF-8
		return true
	case r < 0x20 || r == 0x7f:
		return !strings.ContainsRune(keep, r)
	case r >= 0x80 && r <= 0x9f: // C1 controls (CSI is U+009B)
		return true
	case r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069, r == 0x200e, r == 0x200f, r == 0x061c:
		// bidirectional embeddings, overrides, isolates and marks
		return true
	}
	return false
}

// truncate keeps at most n runes of s, marking a cut with "…".
func truncate(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

// fmtTime prints a time in UTC, RFC 3339 with seconds, or "-" when unset.
func fmtTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

// fmtAge prints how long ago t was, rounded for humans ("3s", "4m10s").
func fmtAge(now, t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	d := now.Sub(t)
	if d < 0 {
		return "in " + roundDur(-d).String()
	}
	return roundDur(d).String()
}

func roundDur(d time.Duration) time.Duration {
	switch {
	case d < time.Second:
		return d.Round(time.Millisecond)
	case d < time.Hour:
		return d.Round(time.Second)
	default:
		return d.Round(time.Minute)
	}
}

// lastError is the message of a job's newest error entry, or "".
func lastError(j *core.Job) string {
	if len(j.Errors) == 0 {
		return ""
	}
	return j.Errors[len(j.Errors)-1].Error
}

// printJob prints one job in full as "field: value" lines, then its errors
// history and result.
func printJob(w io.Writer, j *core.Job) error {
	tw := tabwriter.NewWriter(w, 0, 0, 1, ' ', 0)
	kv := func(k, v string) { fmt.Fprintf(tw, "%s:\t%s\n", k, oneLine(v)) }
	kv("id", fmt.Sprint(j.ID))
	kv("queue", j.Queue)
	kv("kind", j.Kind)
	kv("state", string(j.State))
	kv("args", string(j.Args))
	kv("priority", fmt.Sprint(j.Priority))
	kv("attempt", fmt.Sprintf("%d/%d", j.Attempt, j.MaxAttempts))
	kv("run_at", fmtTime(j.RunAt))
	if !j.Deadline.IsZero() {
		kv("deadline", fmtTime(j.Deadline))
	}
	if j.PartitionKey != "" {
		kv("partition_key", j.PartitionKey)
	}
	if j.UniqueKey != "" {
		kv("unique_key", j.UniqueKey)
	}
	if len(j.Tags) > 0 {
		kv("tags", strings.Join(j.Tags, ","))
	}
	if len(j.Metadata) > 0 {
		keys := make([]string, 0, len(j.Metadata))
		for k := range j.Metadata {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		parts := make([]string, 0, len(keys))
		for _, k := range keys {
			parts = append(parts, k+"="+j.Metadata[k])
		}
		kv("metadata", strings.Join(parts, " "))
	}
	kv("created_at", fmtTime(j.CreatedAt))
	kv("attempted_at", fmtTime(j.AttemptedAt))
	kv("finished_at", fmtTime(j.FinishedAt))
	if j.WorkerID != "" {
		kv("worker_id", j.WorkerID)
	}
	if !j.LeaseUntil.IsZero() {
		kv("lease_until", fmtTime(j.LeaseUntil))
	}
	if p := j.Progress; p != nil {
		text := strconv.FormatFloat(p.Percent, 'f', -1, 64) + "%"
		if p.Message != "" {
			text += " " + p.Message
		}
		kv("progress", text+" (at "+fmtTime(p.At)+")")
	}
	if j.Checkpoint != nil {
		kv("checkpoint", string(j.Checkpoint))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(j.Errors) > 0 {
		fmt.Fprintf(w, "errors (%d, oldest first):\n", len(j.Errors))
		for _, e := range j.Errors {
			fmt.Fprintf(w, "  attempt %d at %s: %s\n", e.Attempt, fmtTime(e.At), oneLine(e.Error))
			if e.Trace != "" {
				for _, line := range strings.Split(strings.TrimRight(e.Trace, "\n"), "\n") {
					fmt.Fprintf(w, "    | %s\n", printable(line, "\t"))
				}
			}
		}
	}
	if j.Result != nil {
		if utf8.Valid(j.Result) {
			fmt.Fprintf(w, "result (%d bytes):\n%s", len(j.Result), printable(string(j.Result), "\n\t"))
			if len(j.Result) > 0 && j.Result[len(j.Result)-1] != '\n' {
				fmt.Fprintln(w)
			}
		} else {
			fmt.Fprintf(w, "result (%d bytes, base64):\n%s\n", len(j.Result), base64.StdEncoding.EncodeToString(j.Result))
		}
	}
	return nil
}
