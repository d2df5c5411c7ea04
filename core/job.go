package core

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/backlogq/backlog/core/contract"
)

// Options are the per-job settings of an enqueue. The zero value means
// queue "default", priority 5, 20 attempts, due now.
type Options struct {
	Queue       string        // "" = DefaultQueue
	Priority    int           // 1 (first) … 10 (last); 0 = PriorityDefault
	RunAt       time.Time     // due time; zero = now (or now+Delay)
	Delay       time.Duration // used when RunAt is zero
	MaxAttempts int           // 0 = DefaultMaxAttempts
	UniqueKey   string        // duplicate while a job holds it returns that job
	// UniqueByArgs makes the unique key ArgsUniqueKey(kind, args): a job
	// is a duplicate while another of the same kind with the same args
	// (in canonical JSON: see CanonicalJSON) holds it, within UniqueScope
	// and for UniqueFor as with any key. The key is computed from the
	// args as given, before Config.Encryption seals them, so sealed args
	// still compare by their plaintext, and it holds only a hash of them.
	// Setting UniqueKey too is an error wrapping ErrInvalidJob.
	UniqueByArgs bool
	UniqueScope  UniqueScope   // where UniqueKey is unique: global (zero), per queue or per kind
	UniqueFor    time.Duration // key held this long after the job is final (0 = freed then; ≤ MaxUniqueFor)
	// PartitionKey puts the job in a partition of its queue, such as a
	// tenant or customer id, which QueueLimits.MaxRunningPerPartition
	// bounds ("" = none; ≤ MaxPartitionKeyLen bytes of UTF-8).
	PartitionKey string
	Tags         []string          // capabilities a worker needs to run it (routing: see Store.Claim); none = any worker
	Metadata     map[string]string // free-form key/values (correlation ids, …)
	Deadline     time.Time         // discard if not finished by then; zero = none
	// DependsOn names jobs, by id, that this job waits for: it is
	// inserted waiting (StateWaiting) and becomes due once every one of
	// them completed (see contract.Dependencies; at most
	// MaxDependencies). Needs a store with dependencies, else
	// ErrUnsupported. Jobs of one workflow name each other by step
	// instead (Workflow).
	DependsOn []int64
	// OnDependencyFailure is what a dependency that ends cancelled,
	// discarded or deleted does to this job: DependencyCancel (the
	// default) cancels it, DependencyRun runs it all the same.
	OnDependencyFailure DependencyPolicy
}

// Args is implemented by typed job arguments. Kind names the handler, and
// must be stable across deploys. The value is stored as its JSON encoding.
type Args interface {
	Kind() string
}

// limits carries the configurable size limits into validation.
type limits struct {
	maxArgs int
	// kinds gives a kind's default attempts (Client.MaxAttempts); nil:
	// DefaultMaxAttempts.
	kinds *Handlers
}

// buildInsert validates one job and fills its defaults. now is UTC.
func buildInsert(kind string, args []byte, opts *Options, now time.Time, lim limits) (InsertParams, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	p := InsertParams{
		Queue:        o.Queue,
		Kind:         kind,
		Args:         args,
		Priority:     o.Priority,
		MaxAttempts:  o.MaxAttempts,
		RunAt:        o.RunAt,
		Deadline:     o.Deadline,
		UniqueKey:    o.UniqueKey,
		UniqueScope:  o.UniqueScope,
		UniqueFor:    o.UniqueFor,
		PartitionKey: o.PartitionKey,
		Tags:         o.Tags,
		Metadata:     o.Metadata,
		DependsOn:    o.DependsOn,

		OnDependencyFailure: o.OnDependencyFailure,
	}
	if p.Queue == "" {
		p.Queue = DefaultQueue
	}
	if p.Priority == 0 {
		p.Priority = PriorityDefault
	}
	if p.MaxAttempts == 0 {
		p.MaxAttempts = lim.kinds.maxAttempts(kind)
	}
	if len(p.Args) == 0 {
		p.Args = json.RawMessage("{}")
	}
	if o.UniqueByArgs {
		if o.UniqueKey != "" {
			return p, invalid("kind %q: UniqueByArgs and UniqueKey are both set: the key comes from the args, or is given, not both", kind)
		}
		key, err := ArgsUniqueKey(kind, p.Args)
		if err != nil {
			return p, err
		}
		p.UniqueKey = key
	}
	if p.RunAt.IsZero() {
		p.RunAt = now.Add(o.Delay)
	}
	p.RunAt = contract.UTC(p.RunAt)
	p.Deadline = contract.UTC(p.Deadline)
	return p, validateInsert(&p, lim)
}

func invalid(format string, a ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalidJob}, a...)...)
}

func validateInsert(p *InsertParams, lim limits) error {
	switch {
	case p.Kind == "":
		return invalid("kind is empty")
	case len(p.Kind) > contract.MaxKindLen:
		return invalid("kind is %d bytes, over the limit of %d", len(p.Kind), contract.MaxKindLen)
	case !utf8.ValidString(p.Kind):
		return invalid("kind is not valid UTF-8")
	}
	if err := contract.ValidateQueueName(p.Queue); err != nil {
		return err
	}
	if p.Priority < PriorityHighest || p.Priority > PriorityLowest {
		return invalid("kind %q: priority %d is outside %d..%d", p.Kind, p.Priority, PriorityHighest, PriorityLowest)
	}
	if p.MaxAttempts < 1 {
		return invalid("kind %q: max attempts %d is below 1", p.Kind, p.MaxAttempts)
	}
	if lim.maxArgs > 0 && len(p.Args) > lim.maxArgs {
		return invalid("kind %q: args are %d bytes, over the limit of %d", p.Kind, len(p.Args), lim.maxArgs)
	}
	if !json.Valid(p.Args) {
		return invalid("kind %q: args are not valid JSON", p.Kind)
	}
	if !utf8.Valid(p.Args) {
		return invalid("kind %q: args are not valid UTF-8 (JSON text must be UTF-8)", p.Kind)
	}
	if msg := timeOutOfRange("run_at", p.RunAt); msg != "" {
		return invalid("kind %q: %s", p.Kind, msg)
	}
	if msg := timeOutOfRange("deadline", p.Deadline); msg != "" {
		return invalid("kind %q: %s", p.Kind, msg)
	}
	if len(p.UniqueKey) > contract.MaxUniqueKeyLen {
		return invalid("kind %q: unique key is %d bytes, over the limit of %d", p.Kind, len(p.UniqueKey), contract.MaxUniqueKeyLen)
	}
	if !utf8.ValidString(p.UniqueKey) {
		return invalid("kind %q: unique key is not valid UTF-8", p.Kind)
	}
	if len(p.PartitionKey) > contract.MaxPartitionKeyLen {
		return invalid("kind %q: partition key is %d bytes, over the limit of %d", p.Kind, len(p.PartitionKey), contract.MaxPartitionKeyLen)
	}
	if !utf8.ValidString(p.PartitionKey) {
		return invalid("kind %q: partition key is not valid UTF-8", p.Kind)
	}
	if err := checkFingerprint(p); err != nil {
		return err
	}
	if !p.UniqueScope.Valid() {
		return invalid("kind %q: unknown unique scope %d", p.Kind, uint8(p.UniqueScope))
	}
	if p.UniqueFor < 0 || p.UniqueFor > contract.MaxUniqueFor {
		return invalid("kind %q: unique for %s is outside 0..%s", p.Kind, p.UniqueFor, contract.MaxUniqueFor)
	}
	if len(p.Tags) > contract.MaxTags {
		return invalid("kind %q: %d tags, over the limit of %d", p.Kind, len(p.Tags), contract.MaxTags)
	}
	for _, t := range p.Tags {
		if t == "" || len(t) > contract.MaxTagLen || !utf8.ValidString(t) {
			return invalid("kind %q: tag %q must be 1..%d bytes of UTF-8", p.Kind, t, contract.MaxTagLen)
		}
	}
	n := 0
	for k, v := range p.Metadata {
		if !utf8.ValidString(k) || !utf8.ValidString(v) {
			return invalid("kind %q: metadata must be UTF-8", p.Kind)
		}
		n += len(k) + len(v)
	}
	if n > contract.MaxMetadataBytes {
		return invalid("kind %q: metadata is %d bytes, over the limit of %d", p.Kind, n, contract.MaxMetadataBytes)
	}
	if !p.Deadline.IsZero() && p.Deadline.Before(p.RunAt) {
		return invalid("kind %q: deadline %s is before run_at %s", p.Kind, p.Deadline.Format(time.RFC3339), p.RunAt.Format(time.RFC3339))
	}
	return nil
}

// argsKeyPrefix starts every key ArgsUniqueKey returns, so that such keys
// never meet keys an application chose by chance, and a later change of
// what is hashed never matches an older hash.
const argsKeyPrefix = "args:v1:"

// ArgsUniqueKey returns the unique key Options.UniqueByArgs gives a job of
// kind with args (JSON; empty means {}): "args:v1:" and the lower-case hex
// SHA-256 of the kind's length in decimal, ':', the kind, and the args in
// canonical JSON (CanonicalJSON), 72 bytes in all. Two jobs get one key
// when their kinds are equal and their args the same JSON value written
// alike (keys in any order, any insignificant space; numbers as written,
// so 1 and 1.0 differ). Args that are not valid JSON return an error
// wrapping ErrInvalidJob.
func ArgsUniqueKey(kind string, args []byte) (string, error) {
	canon, err := CanonicalJSON(args)
	if err != nil {
		return "", invalid("kind %q: unique by args: args are %v", kind, err)
	}
	h := sha256.New()
	fmt.Fprintf(h, "%d:", len(kind))
	h.Write([]byte(kind))
	h.Write(canon)
	return argsKeyPrefix + hex.EncodeToString(h.Sum(nil)), nil
}

// CanonicalJSON returns the canonical form of the JSON value b (empty b
// means {}): object keys sorted by their UTF-8 bytes, no insignificant
// space, strings re-encoded as encoding/json writes them (<, > and & as
// \u003c, \u003e and \u0026), numbers kept exactly as written. Two
// encodings of one value that differ only in key order and spacing give
// the same bytes. b that is not one valid JSON value returns an error.
func CanonicalJSON(b []byte) ([]byte, error) {
	if len(bytes.TrimSpace(b)) == 0 {
		return []byte("{}"), nil
	}
	if !json.Valid(b) {
		return nil, errors.New("not valid JSON")
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, fmt.Errorf("not valid JSON: %v", err)
	}
	return json.Marshal(v)
}
