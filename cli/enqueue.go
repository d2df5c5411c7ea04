package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/backlogq/backlog/core/contract"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"

	"github.com/backlogq/backlog/adapters/httpapi"
	"github.com/backlogq/backlog/adapters/httpapi/apitypes"
	"github.com/backlogq/backlog/core"
)

// enqueueFlags are the per-job settings given on the command line. In bulk
// mode they are the defaults of every line.
type enqueueFlags struct {
	queue       string
	priority    int
	runAt       string
	in          time.Duration
	uniqueKey   string
	uniqueScope string
	uniqueFor   time.Duration
	partition   string
	maxAttempts int
	tags        []string
	meta        []string
	deadline    string

	from      string
	batchSize int
	progress  bool
	migrate   bool
	keys      keyFlags
	// allowUnknown accepts kinds no live worker announced (--db only;
	// a job server applies its own --allow-unknown-kinds).
	allowUnknown bool

	wait    bool          // wait until the job is final (jobs wait's exit codes)
	timeout time.Duration // with wait: at most this long
}

func (a *app) newEnqueueCmd() *cobra.Command {
	f := &enqueueFlags{}
	cmd := &cobra.Command{
		Use:   "enqueue KIND [JSON|-]",
		Short: "Add a job (or many, from a JSON Lines file)",
		Long: `enqueue adds one job of KIND with JSON args (default {}; "-" reads them
from stdin) and prints it. When the unique key is held (by a live job, or by
one that finished less than its --unique-for ago), nothing is inserted and
the holder is printed as the duplicate.

With --from FILE.jsonl (or --from - for stdin) it adds one job per line, in
batches: each line is a full job object
  {"kind":…, "args":{…}, "queue":…, "priority":…, "run_at":…, "deadline":…,
   "unique_key":…, "unique_scope":…, "unique_for":…, "partition_key":…, "max_attempts":…,
   "tags":[…], "metadata":{…}}
or, when KIND is given on the command line, the args object itself. The
flags give the defaults for every line. A bad line stops the run: nothing of
its batch is inserted, earlier batches stay inserted, and the error says how
many jobs that was.

With --wait it then waits until the job (or the duplicate's holder) is final
and prints it, result and errors included (with -o json: only the final
job), and exits as "jobs wait" does: 0 completed, 3 --timeout passed first,
4 discarded, 5 cancelled (1 and 2 as every command).`,
		Example: `  backlog enqueue email '{"to":"ann@example.com"}'
  backlog enqueue report --queue slow --priority 2 --in 10m --unique-key report-2024-06
  backlog enqueue resize --from images.jsonl
  generate-jobs | backlog enqueue --from -
  backlog enqueue thumbnail '{"id":7}' --wait --timeout 2m -o json`,
		Args: argsRange(0, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if f.from != "" {
				return a.enqueueBulk(cmd, f, args)
			}
			return a.enqueueOne(cmd, f, args)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.queue, "queue", "", "queue (default \"default\")")
	fl.IntVar(&f.priority, "priority", 0, "priority, 1 (first) … 10 (last) (default 5)")
	fl.StringVar(&f.runAt, "run-at", "", "due time, RFC 3339 (e.g. 2024-06-01T12:00:00Z)")
	fl.DurationVar(&f.in, "in", 0, "due after this duration (e.g. 90s, 2h); excludes --run-at")
	fl.StringVar(&f.uniqueKey, "unique-key", "", "unique key: a live job with the same key makes this a duplicate")
	fl.StringVar(&f.uniqueScope, "unique-scope", "global", "where the unique key is unique: global, queue or kind")
	fl.DurationVar(&f.uniqueFor, "unique-for", 0, "keep the unique key held this long after the job finishes (e.g. 24h; at most 366 days)")
	fl.StringVar(&f.partition, "partition-key", "", "partition key (a tenant, a customer id): the queue's per-partition limit counts running jobs by it")
	fl.IntVar(&f.maxAttempts, "max-attempts", 0, fmt.Sprintf("attempts before the job is discarded (default %d)", core.DefaultMaxAttempts))
	fl.StringArrayVar(&f.tags, "tag", nil, "tag (repeatable)")
	fl.StringArrayVar(&f.meta, "meta", nil, "metadata key=value (repeatable)")
	fl.StringVar(&f.deadline, "deadline", "", "discard the job if not finished by then: RFC 3339 time, or a duration from now")
	fl.StringVar(&f.from, "from", "", "enqueue one job per line of this JSON Lines file (- = stdin)")
	fl.IntVar(&f.batchSize, "batch-size", 1000, "jobs per insert with --from")
	fl.BoolVar(&f.progress, "progress", false, "show a progress bar with --from even when stderr is not a terminal")
	fl.BoolVar(&f.migrate, "migrate", true, "migrate the store's schema first")
	fl.BoolVar(&f.allowUnknown, "allow-unknown-kinds", false, "enqueue a kind that no live registered worker handles (its workers are not deployed yet); off, such a kind is refused once any worker announced its kinds (a typo, a JSON object given as the kind)")
	f.keys.register(fl, false)
	addWaitFlags(cmd, &f.wait, &f.timeout)
	return cmd
}

// options turns the flags into core.Options, relative to now. Errors are
// usage errors.
func (f *enqueueFlags) options(cmd *cobra.Command, now time.Time) (*core.Options, error) {
	o := &core.Options{
		Queue:        f.queue,
		Priority:     f.priority,
		MaxAttempts:  f.maxAttempts,
		UniqueKey:    f.uniqueKey,
		UniqueFor:    f.uniqueFor,
		PartitionKey: f.partition,
		Tags:         f.tags,
	}
	fl := cmd.Flags()
	scope, err := core.ParseUniqueScope(f.uniqueScope)
	if err != nil {
		return nil, usagef("--unique-scope: %v", err)
	}
	o.UniqueScope = scope
	if (fl.Changed("unique-scope") || fl.Changed("unique-for")) && f.uniqueKey == "" && f.from == "" {
		return nil, usagef("--unique-scope and --unique-for need --unique-key")
	}
	if f.uniqueFor < 0 || f.uniqueFor > contract.MaxUniqueFor {
		return nil, usagef("--unique-for %s is outside 0..%s", f.uniqueFor, contract.MaxUniqueFor)
	}
	if fl.Changed("priority") && (f.priority < core.PriorityHighest || f.priority > core.PriorityLowest) {
		return nil, usagef("--priority %d is outside %d..%d", f.priority, core.PriorityHighest, core.PriorityLowest)
	}
	if fl.Changed("max-attempts") && f.maxAttempts < 1 {
		return nil, usagef("--max-attempts %d is below 1", f.maxAttempts)
	}
	if fl.Changed("queue") {
		if err := contract.ValidateQueueName(f.queue); err != nil {
			return nil, usageError{err}
		}
	}
	if f.runAt != "" && fl.Changed("in") {
		return nil, usagef("give --run-at or --in, not both")
	}
	if f.runAt != "" {
		t, err := time.Parse(time.RFC3339Nano, f.runAt)
		if err != nil {
			return nil, usagef("--run-at %q is not an RFC 3339 time (like 2024-06-01T12:00:00Z)", f.runAt)
		}
		if err := timeInRange("--run-at", t); err != nil {
			return nil, err
		}
		o.RunAt = t
	}
	if f.in < 0 {
		return nil, usagef("--in %s is negative", f.in)
	}
	o.Delay = f.in
	if f.deadline != "" {
		t, err := parseTimeOrDuration(f.deadline, now)
		if err != nil {
			return nil, usagef("--deadline: %v", err)
		}
		if err := timeInRange("--deadline", t); err != nil {
			return nil, err
		}
		o.Deadline = t
	}
	if len(f.meta) > 0 {
		o.Metadata = map[string]string{}
		for _, kv := range f.meta {
			k, v, ok := strings.Cut(kv, "=")
			if !ok || k == "" {
				return nil, usagef("--meta %q must be key=value", kv)
			}
			o.Metadata[k] = v
		}
	}
	return o, nil
}

// timeInRange returns a usage error naming flag when t is outside the
// range of job times (core.MinTime … core.MaxTime, UTC).
func timeInRange(flag string, t time.Time) error {
	if err := core.ValidateTime(flag, t); err != nil {
		return usagef("%s", strings.TrimPrefix(err.Error(), core.ErrInvalidJob.Error()+": "))
	}
	return nil
}

// parseTimeOrDuration reads an RFC 3339 time, or a duration counted from now.
func parseTimeOrDuration(s string, now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	if d, err := time.ParseDuration(s); err == nil {
		return now.Add(d), nil
	}
	return time.Time{}, fmt.Errorf("%q is neither an RFC 3339 time (like 2024-06-01T12:00:00Z) nor a duration (like 2h)", s)
}

// checkJSON returns a readable error when b is not exactly one JSON value.
func checkJSON(b []byte) error {
	if len(bytes.TrimSpace(b)) == 0 {
		return errors.New("args are empty (use {} for no args)")
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	var v json.RawMessage
	if err := dec.Decode(&v); err != nil {
		return fmt.Errorf("args are not valid JSON: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("args are not valid JSON: extra data after the first value")
	}
	return nil
}

func (a *app) enqueueOne(cmd *cobra.Command, f *enqueueFlags, args []string) error {
	if len(args) == 0 {
		return usagef("enqueue needs a KIND (or --from FILE)")
	}
	if f.progress || cmd.Flags().Changed("batch-size") {
		return usagef("--progress and --batch-size only apply with --from")
	}
	if f.timeout != 0 && !f.wait {
		return usagef("--timeout goes with --wait")
	}
	if err := checkWaitTimeout(f.timeout); err != nil {
		return err
	}
	kind := args[0]
	raw := []byte("{}")
	if len(args) == 2 {
		raw = []byte(args[1])
		if args[1] == "-" {
			b, err := io.ReadAll(io.LimitReader(a.env.stdin, core.DefaultMaxArgsBytes+1))
			if err != nil {
				return fmt.Errorf("read args from stdin: %w", err)
			}
			raw = b
		}
		if err := checkJSON(raw); err != nil {
			return usageError{err}
		}
	}
	now := time.Now()
	opts, err := f.options(cmd, now)
	if err != nil {
		return err
	}
	p, err := core.NewInsertRaw(kind, raw, opts, now)
	if err != nil {
		return usageError{err}
	}
	oo, err := a.enqueueOpts(cmd, f)
	if err != nil {
		return err
	}
	ctx := cmd.Context()
	return a.withOps(ctx, oo, func(o ops) error {
		res, err := o.Enqueue(ctx, []core.InsertParams{p})
		if err != nil {
			return err
		}
		r := res[0]
		if a.jsonOutput() && !f.wait {
			return writeJSON(a.env.stdout, enqueuedJob{Job: apitypes.FromCore(r.Job), Duplicate: r.Duplicate})
		}
		if !a.jsonOutput() {
			if r.Duplicate {
				fmt.Fprintf(a.env.stdout, "duplicate of job %d (unique key %q); nothing inserted\n", r.Job.ID, p.UniqueKey)
			} else {
				fmt.Fprintf(a.env.stdout, "enqueued job %d\n", r.Job.ID)
			}
		}
		if !f.wait {
			return printJob(a.env.stdout, r.Job)
		}
		j, final, err := waitJob(ctx, o, r.Job.ID, f.timeout)
		if err != nil {
			return fmt.Errorf("wait for job %d: %w", r.Job.ID, describe(err))
		}
		if a.jsonOutput() {
			err = writeJSON(a.env.stdout, enqueuedJob{Job: apitypes.FromCore(j), Duplicate: r.Duplicate})
		} else {
			err = printJob(a.env.stdout, j)
		}
		if err != nil {
			return err
		}
		return waitVerdict(j, final, f.timeout)
	})
}

// enqueueOpts are the ops options of enqueue: the store migrated (unless
// --migrate=false) and args sealed under the keys given. With --server the
// job server migrates and seals, so --migrate and --keys-file are refused.
func (a *app) enqueueOpts(cmd *cobra.Command, f *enqueueFlags) (opsOpts, error) {
	if a.server != "" {
		for _, name := range []string{"migrate", "keys-file", "allow-unknown-kinds"} {
			if cmd.Flags().Changed(name) {
				return opsOpts{}, usagef("--%s does not apply with --server: the job server migrates its store, seals args with its own keys and applies its own kind rule", name)
			}
		}
		return opsOpts{}, nil
	}
	enc, err := f.keys.encryption(a.env.getenv)
	if err != nil {
		return opsOpts{}, err
	}
	return opsOpts{write: true, migrate: f.migrate, enc: enc, allowUnknownKinds: f.allowUnknown}, nil
}

// bulkLine is one line of a --from file in full-object form.
type bulkLine struct {
	Kind         string            `json:"kind"`
	Args         json.RawMessage   `json:"args"`
	Queue        string            `json:"queue"`
	Priority     *int              `json:"priority"`
	RunAt        time.Time         `json:"run_at"`
	Deadline     time.Time         `json:"deadline"`
	UniqueKey    string            `json:"unique_key"`
	UniqueScope  string            `json:"unique_scope"` // global, queue or kind
	UniqueFor    string            `json:"unique_for"`   // a Go duration, e.g. "24h"
	PartitionKey string            `json:"partition_key"`
	MaxAttempts  *int              `json:"max_attempts"`
	Tags         []string          `json:"tags"`
	Metadata     map[string]string `json:"metadata"`
}

// maxLineBytes bounds one line of a --from file: the args limit plus room
// for the other fields.
const maxLineBytes = core.DefaultMaxArgsBytes + contract.MaxMetadataBytes + 64<<10

// bulkStats counts what a bulk enqueue did.
type bulkStats struct {
	Inserted   int `json:"inserted"`
	Duplicates int `json:"duplicates"`
	Lines      int `json:"lines"`
}

func (a *app) enqueueBulk(cmd *cobra.Command, f *enqueueFlags, args []string) error {
	if len(args) > 1 {
		return usagef("give JSON args or --from, not both")
	}
	if f.uniqueKey != "" {
		return usagef("--unique-key would make every line after the first a duplicate; put unique_key in the lines instead")
	}
	if f.wait || f.timeout != 0 {
		return usagef("--wait and --timeout apply to one job, not with --from (wait for jobs with \"jobs wait ID\")")
	}
	if f.batchSize < 1 {
		return usagef("--batch-size must be at least 1")
	}
	if a.server != "" && f.batchSize > httpapi.MaxBatch {
		return usagef("--batch-size is at most %d with --server (one POST /v1/jobs/batch per batch)", httpapi.MaxBatch)
	}
	kind := ""
	if len(args) == 1 {
		kind = args[0]
		if kind == "" {
			return usagef("KIND is empty")
		}
	}
	now := time.Now()
	defaults, err := f.options(cmd, now)
	if err != nil {
		return err
	}

	var (
		in   io.Reader
		name string
		size int64 = -1
	)
	if f.from == "-" {
		in, name = a.env.stdin, "stdin"
	} else {
		fh, err := os.Open(f.from)
		if err != nil {
			return fmt.Errorf("open jobs file: %w", err)
		}
		defer fh.Close()
		if fi, err := fh.Stat(); err == nil && fi.Mode().IsRegular() {
			size = fi.Size()
		}
		in, name = fh, f.from
	}

	oo, err := a.enqueueOpts(cmd, f)
	if err != nil {
		return err
	}
	ctx := cmd.Context()
	return a.withOps(ctx, oo, func(o ops) error {
		var bar *bulkProgress
		if f.progress || (a.env.isTerminal != nil && a.env.isTerminal(a.env.stderr)) {
			bar = newBulkProgress(a.env.stderr, size, time.Now())
		}
		stats, err := bulkInsert(ctx, o, in, name, kind, defaults, f.batchSize, bar)
		if bar != nil {
			bar.finish(err == nil, time.Now())
			fmt.Fprintln(a.env.stderr)
		}
		if err != nil {
			return err
		}
		if a.jsonOutput() {
			return writeJSON(a.env.stdout, stats)
		}
		fmt.Fprintf(a.env.stdout, "enqueued %d jobs from %s (%d duplicates skipped)\n", stats.Inserted, name, stats.Duplicates)
		return nil
	})
}

// bulkProgress is the progress bar of enqueue --from: the share of the
// input read (bytes of a regular file; a spinner for a pipe) with the jobs
// inserted and their rate in jobs per second.
type bulkProgress struct {
	bar   *progressbar.ProgressBar
	size  int64     // input bytes; -1 when unknown
	read  int64     // input bytes of the inserted batches
	jobs  int       // jobs inserted, duplicates included
	start time.Time // when reading began
}

// newBulkProgress draws a bar on w for an input of size bytes (-1 or 0:
// unknown), starting at start.
func newBulkProgress(w io.Writer, size int64, start time.Time) *bulkProgress {
	if size <= 0 {
		size = -1
	}
	return &bulkProgress{
		size:  size,
		start: start,
		bar: progressbar.NewOptions64(size,
			progressbar.OptionSetWriter(w),
			progressbar.OptionSetDescription("enqueue"),
			progressbar.OptionSetWidth(30),
			progressbar.OptionThrottle(100*time.Millisecond),
			progressbar.OptionSetPredictTime(size > 0),
			// No spinner ticker: for an input of unknown size the
			// library otherwise redraws from a goroutine of its own
			// every 100 ms, which reads the bar's state without its
			// lock and outlives a bulk insert that failed (the bar is
			// then never finished); the bar advances with each batch.
			progressbar.OptionSetSpinnerChangeInterval(0),
		),
	}
}

// describe is the bar's text: jobs inserted and jobs per second since start.
func (p *bulkProgress) describe(now time.Time) string {
	rate := 0.0
	if el := now.Sub(p.start).Seconds(); el > 0 {
		rate = float64(p.jobs) / el
	}
	return fmt.Sprintf("enqueue: %d jobs, %.0f jobs/s", p.jobs, rate)
}

// add counts a batch of jobs inserted from bytes of input. The bar stays
// below 100 % until finish: the byte count is of lines as read, which can
// differ from the file's size by a line ending.
func (p *bulkProgress) add(jobs, bytes int, now time.Time) {
	p.jobs += jobs
	p.read += int64(bytes)
	p.bar.Describe(p.describe(now))
	if p.size > 0 {
		_ = p.bar.Set64(min(p.read, p.size-1))
	} else {
		_ = p.bar.Add(bytes)
	}
}

// finish draws the bar a last time: at 100 % when the whole input was
// inserted (ok), where it stopped otherwise.
func (p *bulkProgress) finish(ok bool, now time.Time) {
	p.bar.Describe(p.describe(now))
	if ok {
		_ = p.bar.Finish()
	}
}

// bulkInsert reads in line by line and inserts the jobs in batches of
// batchSize. A bad line or a failed insert stops it; the error says which
// line and how many jobs earlier batches inserted.
func bulkInsert(ctx context.Context, o ops, in io.Reader, name, kind string, defaults *core.Options, batchSize int, bar *bulkProgress) (bulkStats, error) {
	var (
		st         bulkStats
		batch      = make([]core.InsertParams, 0, batchSize)
		batchStart = 0 // line number of the first line of the batch
		lineNo     = 0
		batchBytes = 0 // bytes read for the batch, shown on the bar once inserted
	)
	fail := func(line int, reason error) error {
		where := fmt.Sprintf("%s:%d", name, line)
		if line == 0 {
			where = name
		}
		msg := fmt.Sprintf("%s: %v; ", where, reason)
		if st.Inserted+st.Duplicates == 0 {
			msg += "nothing was inserted"
		} else {
			msg += fmt.Sprintf("%d jobs were inserted before this batch (lines 1-%d, %d of them duplicates); nothing from line %d on was inserted",
				st.Inserted+st.Duplicates, batchStart-1, st.Duplicates, batchStart)
		}
		return errors.New(msg)
	}
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		res, err := o.Enqueue(ctx, batch)
		if err != nil {
			return fail(0, fmt.Errorf("insert of lines %d-%d failed: %w", batchStart, lineNo, err))
		}
		for _, r := range res {
			if r.Duplicate {
				st.Duplicates++
			} else {
				st.Inserted++
			}
		}
		if bar != nil {
			bar.add(len(batch), batchBytes, time.Now())
		}
		batch = batch[:0]
		batchBytes = 0
		return nil
	}

	r := bufio.NewReaderSize(in, 64<<10)
	for {
		line, readErr := readLine(r, maxLineBytes)
		if errors.Is(readErr, errLineTooLong) {
			return st, fail(lineNo+1, fmt.Errorf("line is over %d bytes (a job's args may hold at most %d)", maxLineBytes, core.DefaultMaxArgsBytes))
		}
		if readErr != nil && readErr != io.EOF {
			return st, fail(lineNo+1, fmt.Errorf("read: %w", readErr))
		}
		if readErr == io.EOF && line == nil {
			break
		}
		lineNo++
		batchBytes += len(line) + 1
		if batchStart == 0 {
			batchStart = lineNo
		}
		if len(bytes.TrimSpace(line)) == 0 {
			if readErr == io.EOF {
				break
			}
			continue
		}
		st.Lines++
		p, err := parseBulkLine(line, kind, defaults)
		if err != nil {
			return st, fail(lineNo, err)
		}
		batch = append(batch, p)
		if len(batch) >= batchSize {
			if err := flush(); err != nil {
				return st, err
			}
			batchStart = 0
		}
		if readErr == io.EOF {
			break
		}
	}
	if err := flush(); err != nil {
		return st, err
	}
	return st, nil
}

// errLineTooLong reports a line longer than readLine's limit.
var errLineTooLong = errors.New("line too long")

// readLine returns the next line without its line ending; at the end of
// the input it returns the last (unterminated) line with io.EOF, or nil and
// io.EOF when there is none. A line of more than limit bytes (its ending
// aside) is not read whole: readLine stops at the limit and returns
// errLineTooLong, having held at most limit bytes of it.
func readLine(r *bufio.Reader, limit int) ([]byte, error) {
	var line []byte
	for {
		frag, err := r.ReadSlice('\n')
		if len(line)+len(frag) > limit+2 { // room for "\r\n"
			return nil, errLineTooLong
		}
		line = append(line, frag...)
		if err == bufio.ErrBufferFull {
			continue
		}
		if err == io.EOF && len(line) == 0 {
			return nil, io.EOF
		}
		if err != nil && err != io.EOF {
			return nil, err
		}
		line = bytes.TrimSuffix(line, []byte("\n"))
		line = bytes.TrimSuffix(line, []byte("\r"))
		if len(line) > limit {
			return nil, errLineTooLong
		}
		return line, err
	}
}

// parseBulkLine turns one line into validated InsertParams: the args object
// itself when kind is set, else a full job object. Line fields override the
// defaults from the flags.
func parseBulkLine(line []byte, kind string, defaults *core.Options) (core.InsertParams, error) {
	opts := *defaults
	now := time.Now()
	if kind != "" {
		if err := checkJSON(line); err != nil {
			return core.InsertParams{}, err
		}
		return core.NewInsertRaw(kind, line, &opts, now)
	}
	var l bulkLine
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&l); err != nil {
		var ute *json.UnmarshalTypeError
		if errors.As(err, &ute) && ute.Field == "" {
			return core.InsertParams{}, errors.New("line is not a JSON object (give KIND on the command line if the lines are args)")
		}
		return core.InsertParams{}, fmt.Errorf("not a valid job object: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return core.InsertParams{}, errors.New("not a valid job object: extra data after the object")
	}
	if l.Kind == "" {
		return core.InsertParams{}, errors.New(`"kind" is missing or empty (give KIND on the command line if the lines are args)`)
	}
	if len(l.Args) == 0 || string(l.Args) == "null" {
		l.Args = json.RawMessage("{}")
	}
	if l.Queue != "" {
		opts.Queue = l.Queue
	}
	if l.Priority != nil {
		if *l.Priority < core.PriorityHighest || *l.Priority > core.PriorityLowest {
			return core.InsertParams{}, fmt.Errorf("priority %d is outside %d..%d", *l.Priority, core.PriorityHighest, core.PriorityLowest)
		}
		opts.Priority = *l.Priority
	}
	if !l.RunAt.IsZero() {
		opts.RunAt, opts.Delay = l.RunAt, 0
	}
	if !l.Deadline.IsZero() {
		opts.Deadline = l.Deadline
	}
	if l.UniqueKey != "" {
		opts.UniqueKey = l.UniqueKey
	}
	if l.UniqueScope != "" {
		s, err := core.ParseUniqueScope(l.UniqueScope)
		if err != nil {
			return core.InsertParams{}, err
		}
		opts.UniqueScope = s
	}
	if l.UniqueFor != "" {
		d, err := time.ParseDuration(l.UniqueFor)
		if err != nil {
			return core.InsertParams{}, fmt.Errorf("unique_for %q is not a duration like \"24h\"", l.UniqueFor)
		}
		opts.UniqueFor = d
	}
	if l.PartitionKey != "" {
		opts.PartitionKey = l.PartitionKey
	}
	if l.MaxAttempts != nil {
		if *l.MaxAttempts < 1 {
			return core.InsertParams{}, fmt.Errorf("max_attempts %d is below 1", *l.MaxAttempts)
		}
		opts.MaxAttempts = *l.MaxAttempts
	}
	if l.Tags != nil {
		opts.Tags = l.Tags
	}
	if l.Metadata != nil {
		opts.Metadata = l.Metadata
	}
	return core.NewInsertRaw(l.Kind, l.Args, &opts, now)
}
