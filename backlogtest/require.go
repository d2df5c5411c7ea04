package backlogtest

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/core/contract"
)

// Lister is what the assertions read jobs through: List as contract.Store
// defines it. Every contract.Store is one (pass c.Store() for a client).
//
// What is visible is what List sees: jobs committed to the store. A job
// enqueued with EnqueueTx in a transaction that is still open is not
// visible through the store's own connections (its own pool on
// PostgreSQL, MySQL and SQLite), and one whose transaction rolled back
// never is; assert after the commit, or after the rollback with
// RequireNotEnqueued. A Lister of your own that lists through the open
// transaction sees its uncommitted jobs.
type Lister interface {
	List(ctx context.Context, p core.ListParams) ([]*core.Job, error)
}

// EnqueuedOpts narrows which jobs count as a match, beyond kind and args.
// Zero fields match anything.
type EnqueuedOpts struct {
	Queue       string       // the job's queue
	Priority    int          // the job's priority (1..10)
	MaxAttempts int          // the job's MaxAttempts
	States      []core.State // the job is in one of these states
	// Tags the job must all have (it may have more).
	Tags []string
	// Metadata entries the job must all have (it may have more).
	Metadata     map[string]string
	UniqueKey    string
	PartitionKey string
	// RunAt the job must be due at, exactly (compared as instants; with
	// a Clock the times are predictable).
	RunAt time.Time
}

// Expect is one expectation of RequireManyEnqueued: a kind, an args
// pattern (see RequireEnqueued) and options.
type Expect struct {
	Kind string
	Args any
	Opts *EnqueuedOpts
}

// maxListed bounds how many jobs of one kind the assertions read.
const maxListed = 10_000

// RequireEnqueued fails t (t.Fatalf) unless st holds a job of kind whose
// args contain args and that matches opts (nil: any), and returns the
// newest such job (highest id).
//
// args is a pattern: nil matches any args; otherwise it is encoded as
// JSON ([]byte and json.RawMessage are taken as JSON already) and must be
// a JSON object whose every scalar is at the same path of the job's args
// with an equal value, the containment of core.ListParams.ArgsContains
// (PostgreSQL's args @> pattern, without arrays). A struct is compared on
// every field it encodes, zero values included: pass a map (or tag the
// fields omitempty) to name only some. Arrays cannot be matched, and
// sealed args (core.Config.Encryption) never match. kind "" takes the
// kind from args when it is a core.Args.
//
// The failure message lists the jobs of kind it found. See Lister for
// what is visible inside a transaction.
func RequireEnqueued(t testing.TB, st Lister, kind string, args any, opts *EnqueuedOpts) *core.Job {
	t.Helper()
	m := newMatcher(t, kind, args, opts)
	jobs := listKind(t, st, m.kind)
	for i := len(jobs) - 1; i >= 0; i-- {
		if m.match(jobs[i]) {
			return jobs[i]
		}
	}
	t.Fatalf("backlogtest: no job of %s%s was enqueued;%s", m, m.optsString(), describe(jobs, "of that kind"))
	return nil
}

// RequireNotEnqueued fails t (t.Fatalf) if st holds a job of kind whose
// args contain args and that matches opts, naming the matches. Its
// arguments mean what they mean for RequireEnqueued.
func RequireNotEnqueued(t testing.TB, st Lister, kind string, args any, opts *EnqueuedOpts) {
	t.Helper()
	m := newMatcher(t, kind, args, opts)
	var found []*core.Job
	for _, j := range listKind(t, st, m.kind) {
		if m.match(j) {
			found = append(found, j)
		}
	}
	if len(found) > 0 {
		t.Fatalf("backlogtest: want no job of %s%s;%s", m, m.optsString(), describe(found, "matching"))
	}
}

// RequireManyEnqueued fails t (t.Fatalf) unless the jobs in st whose kind
// is one of the expectations' kinds are, in the order they were enqueued
// (by id), exactly one per expectation, the i-th matching the i-th
// expectation (its args pattern and options, as in RequireEnqueued).
// Jobs of other kinds are ignored; an extra or missing job of an expected
// kind fails. It returns the matched jobs in order.
func RequireManyEnqueued(t testing.TB, st Lister, expects []Expect) []*core.Job {
	t.Helper()
	if len(expects) == 0 {
		t.Fatalf("backlogtest: RequireManyEnqueued needs at least one expectation")
	}
	ms := make([]*matcher, len(expects))
	var jobs []*core.Job
	for i, e := range expects {
		ms[i] = newMatcher(t, e.Kind, e.Args, e.Opts)
		if !slices.ContainsFunc(ms[:i], func(o *matcher) bool { return o.kind == ms[i].kind }) {
			jobs = append(jobs, listKind(t, st, ms[i].kind)...)
		}
	}
	slices.SortFunc(jobs, func(a, b *core.Job) int { return cmp.Compare(a.ID, b.ID) })
	var problems []string
	if len(jobs) != len(expects) {
		problems = append(problems, fmt.Sprintf("want %d jobs of these kinds, found %d", len(expects), len(jobs)))
	}
	for i, m := range ms {
		switch {
		case i >= len(jobs):
			problems = append(problems, fmt.Sprintf("expectation %d (%s%s): no job", i, m, m.optsString()))
		case !m.match(jobs[i]):
			problems = append(problems, fmt.Sprintf("expectation %d (%s%s): job %d does not match", i, m, m.optsString(), jobs[i].ID))
		}
	}
	if len(problems) > 0 {
		t.Fatalf("backlogtest: %s;%s", strings.Join(problems, "; "), describe(jobs, "of these kinds"))
	}
	return jobs
}

// matcher is one kind, args pattern and options.
type matcher struct {
	kind    string
	pattern []byte
	leaves  []contract.ArgsLeaf
	opts    EnqueuedOpts
}

func newMatcher(t testing.TB, kind string, args any, opts *EnqueuedOpts) *matcher {
	t.Helper()
	if kind == "" {
		if a, ok := args.(core.Args); ok {
			kind = a.Kind()
		}
	}
	if kind == "" {
		t.Fatalf("backlogtest: no kind given (pass one, or args that are a core.Args)")
	}
	m := &matcher{kind: kind}
	if opts != nil {
		m.opts = *opts
	}
	b, err := encodeArgs(args)
	if err != nil {
		t.Fatalf("backlogtest: %s args: %v", kind, err)
	}
	if b != nil {
		if m.leaves, err = contract.ParseArgsPattern(b); err != nil {
			t.Fatalf("backlogtest: %s args %s cannot be a pattern: %v", kind, b, err)
		}
		m.pattern = b
	}
	return m
}

// encodeArgs returns args as JSON: nil for nil, []byte and
// json.RawMessage as they are, anything else through json.Marshal.
func encodeArgs(args any) ([]byte, error) {
	switch a := args.(type) {
	case nil:
		return nil, nil
	case []byte:
		return a, nil
	case json.RawMessage:
		return a, nil
	}
	return json.Marshal(args)
}

func (m *matcher) match(j *core.Job) bool {
	o := &m.opts
	switch {
	case j.Kind != m.kind,
		o.Queue != "" && j.Queue != o.Queue,
		o.Priority != 0 && j.Priority != o.Priority,
		o.MaxAttempts != 0 && j.MaxAttempts != o.MaxAttempts,
		len(o.States) > 0 && !slices.Contains(o.States, j.State),
		o.UniqueKey != "" && j.UniqueKey != o.UniqueKey,
		o.PartitionKey != "" && j.PartitionKey != o.PartitionKey,
		!o.RunAt.IsZero() && !j.RunAt.Equal(o.RunAt):
		return false
	}
	for _, tag := range o.Tags {
		if !slices.Contains(j.Tags, tag) {
			return false
		}
	}
	for k, v := range o.Metadata {
		if got, ok := j.Metadata[k]; !ok || got != v {
			return false
		}
	}
	return contract.ArgsMatch(j.Args, m.leaves)
}

func (m *matcher) String() string {
	if m.pattern == nil {
		return fmt.Sprintf("kind %q", m.kind)
	}
	return fmt.Sprintf("kind %q with args containing %s", m.kind, m.pattern)
}

func (m *matcher) optsString() string {
	o := &m.opts
	var parts []string
	add := func(cond bool, format string, a ...any) {
		if cond {
			parts = append(parts, fmt.Sprintf(format, a...))
		}
	}
	add(o.Queue != "", "queue %q", o.Queue)
	add(o.Priority != 0, "priority %d", o.Priority)
	add(o.MaxAttempts != 0, "max attempts %d", o.MaxAttempts)
	add(len(o.States) > 0, "state in %v", o.States)
	add(len(o.Tags) > 0, "tags %v", o.Tags)
	if len(o.Metadata) > 0 {
		keys := slices.Sorted(maps.Keys(o.Metadata))
		var kv []string
		for _, k := range keys {
			kv = append(kv, k+"="+o.Metadata[k])
		}
		add(true, "metadata %s", strings.Join(kv, ","))
	}
	add(o.UniqueKey != "", "unique key %q", o.UniqueKey)
	add(o.PartitionKey != "", "partition %q", o.PartitionKey)
	add(!o.RunAt.IsZero(), "run at %s", o.RunAt.UTC().Format(time.RFC3339Nano))
	if len(parts) == 0 {
		return ""
	}
	return " (" + strings.Join(parts, ", ") + ")"
}

// listKind returns st's jobs of kind in id order, failing t on a store
// error or beyond maxListed jobs.
func listKind(t testing.TB, st Lister, kind string) []*core.Job {
	t.Helper()
	ctx := t.Context()
	var out []*core.Job
	p := core.ListParams{Kind: kind, Limit: 100}
	for {
		page, err := st.List(ctx, p)
		if err != nil {
			t.Fatalf("backlogtest: list %q jobs: %v", kind, err)
		}
		out = append(out, page...)
		if len(page) < p.Limit {
			return out
		}
		if len(out) >= maxListed {
			t.Fatalf("backlogtest: over %d %q jobs; the assertions read at most that many", maxListed, kind)
		}
		p.AfterID = page[len(page)-1].ID
	}
}

// describe lists jobs for a failure message, at most 20 of them; what
// says which jobs they are.
func describe(jobs []*core.Job, what string) string {
	if len(jobs) == 0 {
		return " found no jobs " + what
	}
	var b strings.Builder
	fmt.Fprintf(&b, " found %d job(s) %s:", len(jobs), what)
	for i, j := range jobs {
		if i == 20 {
			fmt.Fprintf(&b, "\n\t… and %d more", len(jobs)-i)
			break
		}
		args := string(j.Args)
		if len(args) > 200 {
			cut := 200
			for cut > 0 && !utf8.RuneStart(args[cut]) {
				cut--
			}
			args = args[:cut] + "…"
		}
		fmt.Fprintf(&b, "\n\tid %d kind %q queue %q state %s priority %d", j.ID, j.Kind, j.Queue, j.State, j.Priority)
		if len(j.Tags) > 0 {
			fmt.Fprintf(&b, " tags %v", j.Tags)
		}
		fmt.Fprintf(&b, " run_at %s args %s", j.RunAt.Format(time.RFC3339Nano), args)
	}
	return b.String()
}
