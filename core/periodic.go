package core

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/backlogq/backlog/core/contract"

	cron "github.com/netresearch/go-cron"
)

// PeriodicJob is a job enqueued on a schedule. Every node whose Config
// lists it enqueues its occurrences; no leader is needed and no occurrence
// runs twice, because each occurrence is enqueued with a unique key made
// of the name and the occurrence's instant (UTC), held for
// PeriodicHold(schedule) after the job finishes (Options.UniqueFor), so
// any number of nodes may try and exactly one job exists per occurrence.
//
// The idea of cron-driven enqueues deduplicated by a unique key per
// occurrence follows River's periodic jobs and Oban's Cron plugin.
type PeriodicJob struct {
	// Name identifies the schedule across nodes and restarts: 1..100
	// bytes of UTF-8 without control characters. Renaming a schedule
	// makes a new one.
	Name string
	// Schedule is a cron expression: 5 fields (minute hour day-of-month
	// month day-of-week), or 6 with a leading seconds field; a
	// descriptor (@yearly, @monthly, @weekly, @daily, @hourly, @every
	// 5m); an optional time zone prefix, CRON_TZ=Europe/Paris (default
	// UTC). @every intervals are whole seconds, at least 1 s, counted
	// from the Unix epoch, so every node computes the same instants.
	// Parsed with github.com/netresearch/go-cron; see docs/scheduling.md
	// for daylight saving time.
	Schedule string
	// Kind and Args are those of every occurrence's job; Args nil
	// means {}. With ArgsFunc, Kind may be "" (it is then the Kind() of
	// the args ArgsFunc builds) and Args must be nil.
	Kind string
	Args json.RawMessage
	// ArgsFunc, when set, builds the typed args of each occurrence's
	// job, as Enqueue takes them: the job's kind is their Kind() and its
	// args their JSON encoding. It is called with the occurrence's
	// instant (UTC, whole seconds), or the current time for
	// RunPeriodicNow, so the args may name the period they cover. The
	// schedule's kind is fixed when the client is made: NewClient calls
	// ArgsFunc once, with the schedule's next occurrence, takes the
	// kind of what it returns (which must equal Kind when Kind is set),
	// checks the job it makes as it checks a Kind given (a kind with no
	// handler is refused: ErrUnknownKind), and returns ArgsFunc's error
	// if it fails. Later, an occurrence whose ArgsFunc returns an error,
	// nil args or args of another kind is not enqueued:
	// EnqueuePeriodic's error names it (wrapping ErrInvalidJob for the
	// last two) and the next round tries it again, as an occurrence not
	// yet enqueued (see MissedPolicy). ArgsFunc may run on every node,
	// for each occurrence, also one that another node has enqueued
	// already, and RunPeriodicNow may call it while the periodic loop
	// does: it must build the same args for the same instant, be safe
	// for concurrent use, and have no side effects.
	ArgsFunc func(at time.Time) (Args, error)
	// Options of every occurrence's job. RunAt, Delay, UniqueKey,
	// UniqueScope and UniqueFor must be zero: the occurrence sets them.
	Options Options
	// Missed says what happens to occurrences more than PeriodicGrace
	// late, missed while no node ran the schedule. "" means
	// MissedRunOnce.
	Missed MissedPolicy
}

// MissedPolicy is what a node does with occurrences that are more than
// PeriodicGrace in the past when it looks (every node was down, or the
// store was out of reach). Occurrences less late than that are never
// missed: they are enqueued, late. A node looks at the occurrences after
// the last run recorded in the store (MutableSettings; a schedule never
// run starts with its first occurrence from now on, and one resumed with
// its first occurrence after the resume), and never further back than
// half the schedule's hold (PeriodicHold): on a store without
// MutableSettings that half hold is all it has.
type MissedPolicy string

// The missed-occurrence policies.
const (
	// MissedSkip drops missed occurrences: the next one runs on time.
	MissedSkip MissedPolicy = "skip"
	// MissedRunOnce enqueues the newest missed occurrence only (the
	// default): a daily report missed for three days runs once.
	MissedRunOnce MissedPolicy = "once"
	// MissedRunEach enqueues every missed occurrence, oldest first, at
	// most MaxPeriodicCatchUp of them per schedule and round.
	MissedRunEach MissedPolicy = "each"
)

const (
	// PeriodicGrace is how late an occurrence may be enqueued before it
	// counts as missed (see MissedPolicy).
	PeriodicGrace = time.Minute
	// MaxPeriodicCatchUp bounds the missed occurrences one schedule
	// enqueues in one round under MissedRunEach.
	MaxPeriodicCatchUp = 1000
	// MaxPeriodicNameLen is the longest schedule name, in bytes.
	MaxPeriodicNameLen = 100
	// PeriodicMetadataName and PeriodicMetadataAt are the metadata keys
	// of an occurrence's job: the schedule's name and the occurrence's
	// instant (RFC 3339, UTC). A job run with RunPeriodicNow has the
	// name only.
	PeriodicMetadataName = "backlog.periodic"
	PeriodicMetadataAt   = "backlog.periodic.at"
)

// schedule is a parsed PeriodicJob.Schedule.
type schedule struct {
	spec  cron.Schedule  // nil for @every
	every time.Duration  // @every interval, whole seconds
	loc   *time.Location // the spec's time zone (CRON_TZ; UTC by default)
}

var cronParser = cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// parseSchedule parses a PeriodicJob.Schedule; a spec without a time zone
// is read in UTC (never the machine's local zone, which nodes may not
// share).
func parseSchedule(s string) (schedule, error) {
	spec := strings.TrimSpace(s)
	if spec == "" {
		return schedule{}, errors.New("schedule is empty")
	}
	if !strings.HasPrefix(spec, "CRON_TZ=") && !strings.HasPrefix(spec, "TZ=") {
		spec = "CRON_TZ=UTC " + spec
	}
	if _, every, ok := strings.Cut(spec, "@every "); ok {
		d, err := time.ParseDuration(strings.TrimSpace(every))
		if err != nil || d < time.Second || d%time.Second != 0 {
			return schedule{}, fmt.Errorf("@every %s: the interval must be whole seconds, at least 1s", strings.TrimSpace(every))
		}
		return schedule{every: d}, nil
	}
	parsed, err := cronParser.Parse(spec)
	if err != nil {
		return schedule{}, err
	}
	sch := schedule{spec: parsed, loc: time.UTC}
	if ss, ok := parsed.(*cron.SpecSchedule); ok && ss.Location != nil {
		sch.loc = ss.Location
	}
	if sch.next(time.Unix(0, 0).UTC()).IsZero() && sch.next(time.Now()).IsZero() {
		return schedule{}, errors.New("the schedule never fires")
	}
	return sch, nil
}

// next is the first occurrence strictly after t (UTC, whole seconds), or
// zero when there is none.
func (s schedule) next(t time.Time) time.Time {
	if s.every > 0 {
		e := int64(s.every / time.Second)
		return time.Unix((t.Unix()/e+1)*e, 0).UTC()
	}
	n := s.spec.Next(t)
	// Fall back repeats an hour of wall time: an occurrence in it runs at
	// its first instant only, as cron does.
	for !n.IsZero() && repeatedWallTime(n.In(s.loc)) {
		n = s.spec.Next(n)
	}
	if n.IsZero() {
		return n
	}
	return n.UTC()
}

// repeatedWallTime reports whether t's wall time (in t's location) was
// already shown earlier, by a clock set back (daylight saving time ends).
func repeatedWallTime(t time.Time) bool {
	y, mo, d := t.Date()
	h, mi, s := t.Clock()
	for _, back := range []time.Duration{30 * time.Minute, time.Hour, 2 * time.Hour} {
		e := t.Add(-back).In(t.Location())
		ey, emo, ed := e.Date()
		eh, emi, es := e.Clock()
		if ey == y && emo == mo && ed == d && eh == h && emi == mi && es == s {
			return true
		}
	}
	return false
}

// period is the time between the two occurrences after t (an estimate of
// the schedule's interval for irregular ones).
func (s schedule) period(t time.Time) time.Duration {
	if s.every > 0 {
		return s.every
	}
	a := s.next(t)
	if a.IsZero() {
		return 0
	}
	b := s.next(a)
	if b.IsZero() {
		return 0
	}
	return b.Sub(a)
}

// PeriodicHold is how long an occurrence's unique key is held after its
// job finishes: twice the schedule's period at now, at least an hour and
// at most MaxUniqueFor. Nodes look back half of it for missed
// occurrences, so no occurrence they may enqueue has a freed key.
func PeriodicHold(period time.Duration) time.Duration {
	return min(max(2*period, time.Hour), contract.MaxUniqueFor)
}

// occurrences returns the instants a node enqueues at now: those in
// (now-PeriodicGrace, now], and the missed ones before (back to half the
// hold, never before since) as policy says, oldest first.
func (s schedule) occurrences(policy MissedPolicy, now, since time.Time) []time.Time {
	look := now.Add(-PeriodicHold(s.period(now)) / 2)
	if since.After(look) {
		look = since
	}
	graceStart := now.Add(-PeriodicGrace)
	var missed, due []time.Time
	for t := s.next(look.Add(-time.Nanosecond)); !t.IsZero() && !t.After(now); t = s.next(t) {
		if t.Before(look) {
			continue
		}
		if t.After(graceStart) {
			due = append(due, t)
			continue
		}
		missed = append(missed, t)
		if len(missed) > MaxPeriodicCatchUp {
			missed = missed[1:]
		}
	}
	switch policy {
	case MissedSkip:
		missed = nil
	case MissedRunEach:
	default:
		if len(due) > 0 {
			// A later occurrence is due: it is the one run.
			missed = nil
		} else if len(missed) > 1 {
			missed = missed[len(missed)-1:]
		}
	}
	return append(missed, due...)
}

// periodicEntry is a validated PeriodicJob.
type periodicEntry struct {
	job   PeriodicJob
	sched schedule
	// since is when this client was made: a schedule with no recorded
	// run starts with its first occurrence from then on.
	since time.Time
}

// validatePeriodic checks the configured periodic jobs: names unique and
// valid, schedules parse, options leave the occurrence's fields alone and
// the job they make at now (the client's clock) is valid.
func validatePeriodic(jobs []PeriodicJob, lim limits, now time.Time) ([]*periodicEntry, error) {
	now = contract.UTC(now)
	out := make([]*periodicEntry, 0, len(jobs))
	seen := map[string]bool{}
	for _, pj := range jobs {
		if err := ValidatePeriodicName(pj.Name); err != nil {
			return nil, err
		}
		if seen[pj.Name] {
			return nil, fmt.Errorf("backlog: periodic job %q is configured twice", pj.Name)
		}
		seen[pj.Name] = true
		sch, err := parseSchedule(pj.Schedule)
		if err != nil {
			return nil, fmt.Errorf("backlog: periodic job %q: schedule %q: %w", pj.Name, pj.Schedule, err)
		}
		o := pj.Options
		if !o.RunAt.IsZero() || o.Delay != 0 || o.UniqueKey != "" || o.UniqueScope != UniqueGlobal || o.UniqueFor != 0 {
			return nil, fmt.Errorf("backlog: periodic job %q: options must not set RunAt, Delay, UniqueKey, UniqueScope or UniqueFor (each occurrence sets them)", pj.Name)
		}
		switch pj.Missed {
		case "", MissedSkip, MissedRunOnce, MissedRunEach:
		default:
			return nil, fmt.Errorf("backlog: periodic job %q: missed policy %q is not skip, once or each", pj.Name, pj.Missed)
		}
		args := []byte(pj.Args)
		if pj.ArgsFunc != nil {
			if len(pj.Args) > 0 {
				return nil, fmt.Errorf("backlog: periodic job %q: Args and ArgsFunc are both set: the args are given, or built at each occurrence, not both", pj.Name)
			}
			at := sch.next(now)
			if at.IsZero() {
				at = now
			}
			a, err := callArgsFunc(pj.ArgsFunc, at)
			if err != nil {
				return nil, fmt.Errorf("backlog: periodic job %q: %w", pj.Name, err)
			}
			if pj.Kind != "" && a.Kind() != pj.Kind {
				return nil, fmt.Errorf("backlog: periodic job %q: %w", pj.Name, invalid("kind %q: ArgsFunc built args of kind %q", pj.Kind, a.Kind()))
			}
			pj.Kind = a.Kind()
			if args, err = encodeArgs(a); err != nil {
				return nil, fmt.Errorf("backlog: periodic job %q: %w", pj.Name, err)
			}
		}
		e := &periodicEntry{job: pj, sched: sch}
		if _, err := e.build(args, now, now, lim); err != nil {
			return nil, fmt.Errorf("backlog: periodic job %q: %w", pj.Name, err)
		}
		out = append(out, e)
	}
	return out, nil
}

// ValidatePeriodicName returns an error when name is not a valid
// PeriodicJob.Name.
func ValidatePeriodicName(name string) error {
	if name == "" || len(name) > MaxPeriodicNameLen || !utf8.ValidString(name) {
		return fmt.Errorf("backlog: periodic job name %q must be 1..%d bytes of UTF-8", name, MaxPeriodicNameLen)
	}
	for _, r := range name {
		if r < 0x20 || r == 0x7f {
			return fmt.Errorf("backlog: periodic job name %q holds a control character", name)
		}
	}
	return nil
}

// callArgsFunc calls fn for the occurrence at and refuses nil args; its
// errors name the instant.
func callArgsFunc(fn func(time.Time) (Args, error), at time.Time) (Args, error) {
	a, err := fn(at)
	if err != nil {
		return nil, fmt.Errorf("ArgsFunc for %s: %w", at.Format(time.RFC3339), err)
	}
	if a == nil {
		return nil, invalid("ArgsFunc for %s returned nil args", at.Format(time.RFC3339))
	}
	return a, nil
}

// params builds the job of the occurrence at (zero for a run now): its
// args are the configured ones, or those ArgsFunc builds for at (for now
// on a run now).
func (e *periodicEntry) params(at, now time.Time, lim limits) (InsertParams, error) {
	args := []byte(e.job.Args)
	if e.job.ArgsFunc != nil {
		when := at
		if when.IsZero() {
			when = now
		}
		a, err := callArgsFunc(e.job.ArgsFunc, when)
		if err != nil {
			return InsertParams{}, err
		}
		if a.Kind() != e.job.Kind {
			return InsertParams{}, invalid("kind %q: ArgsFunc for %s built args of kind %q", e.job.Kind, when.Format(time.RFC3339), a.Kind())
		}
		if args, err = encodeArgs(a); err != nil {
			return InsertParams{}, err
		}
	}
	return e.build(args, at, now, lim)
}

// build makes the job of the occurrence at (zero for a run now) with the
// given JSON args.
func (e *periodicEntry) build(args []byte, at, now time.Time, lim limits) (InsertParams, error) {
	o := e.job.Options
	o.Metadata = make(map[string]string, len(e.job.Options.Metadata)+2)
	for k, v := range e.job.Options.Metadata {
		o.Metadata[k] = v
	}
	o.Metadata[PeriodicMetadataName] = e.job.Name
	if !at.IsZero() {
		o.RunAt = at
		o.UniqueKey = periodicKey(e.job.Name, at)
		o.UniqueFor = PeriodicHold(e.sched.period(now))
		o.Metadata[PeriodicMetadataAt] = at.UTC().Format(time.RFC3339)
	}
	return buildInsert(e.job.Kind, args, &o, now, lim)
}

// periodicKey is the unique key of the occurrence of name at at.
func periodicKey(name string, at time.Time) string {
	return "backlog.periodic:" + strconv.FormatInt(at.Unix(), 10) + ":" + name
}

// PeriodicStatus is one configured periodic job as a node sees it.
type PeriodicStatus struct {
	Name     string       `json:"name"`
	Schedule string       `json:"schedule"`
	Kind     string       `json:"kind"`
	Queue    string       `json:"queue"`
	Missed   MissedPolicy `json:"missed"`
	// Paused is true while the schedule is paused (every node skips it).
	Paused bool `json:"paused"`
	// LastRunAt is the latest occurrence this cluster enqueued, as
	// recorded in the store (zero when unknown: never run, or a store
	// without MutableSettings); LastJobID its job.
	LastRunAt time.Time `json:"last_run_at,omitzero"`
	LastJobID int64     `json:"last_job_id,omitempty"`
	// NextRunAt is the next occurrence (UTC); zero while paused or when
	// the schedule never fires again.
	NextRunAt time.Time `json:"next_run_at,omitzero"`
}

// periodicState is what the store keeps of a schedule (MutableSettings,
// under periodicStateKey): written by whichever node changes it.
type periodicState struct {
	Paused bool `json:"paused,omitempty"`
	// Since is when it was last resumed: occurrences before it are not
	// looked at (a resume does not run what the pause skipped).
	Since time.Time `json:"since,omitzero"`
}

// periodicRun records the latest enqueued occurrence (under
// periodicRunKey).
type periodicRun struct {
	At    time.Time `json:"at"`
	JobID int64     `json:"job_id"`
}

const periodicSettingPrefix = "backlog.periodic."

func periodicStateKey(name string) string { return periodicSettingPrefix + "state." + name }
func periodicRunKey(name string) string   { return periodicSettingPrefix + "run." + name }

// ErrUnknownPeriodic is returned (wrapped) for a periodic job name this
// client's Config does not list.
var ErrUnknownPeriodic = errors.New("backlog: no such periodic job")

func (c *Client) periodicEntry(name string) (*periodicEntry, error) {
	for _, e := range c.periodic {
		if e.job.Name == name {
			return e, nil
		}
	}
	return nil, fmt.Errorf("%w: %q", ErrUnknownPeriodic, name)
}

// mutableSettings returns the store's MutableSettings, or ErrUnsupported.
func (c *Client) mutableSettings() (contract.MutableSettings, error) {
	ms, ok := c.store.(contract.MutableSettings)
	if !ok {
		return nil, fmt.Errorf("%w: the store keeps no mutable settings (MutableSettings)", ErrUnsupported)
	}
	return ms, nil
}

func (c *Client) periodicState(ctx context.Context, ms contract.MutableSettings, name string) (periodicState, error) {
	var st periodicState
	err := readJSONSetting(ctx, ms, periodicStateKey(name), &st)
	return st, err
}

// readJSONSetting decodes the JSON value stored under key into v,
// leaving v as it is when there is none.
func readJSONSetting(ctx context.Context, ms contract.MutableSettings, key string, v any) error {
	b, err := ms.Setting(ctx, key)
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("backlog: setting %q holds %q: %w", key, b, err)
	}
	return nil
}

// periodicRunRecord reads the latest recorded run of name (zero when none).
func (c *Client) periodicRunRecord(ctx context.Context, ms contract.MutableSettings, name string) (periodicRun, error) {
	var r periodicRun
	if err := readJSONSetting(ctx, ms, periodicRunKey(name), &r); err != nil {
		return periodicRun{}, err
	}
	r.At = contract.UTC(r.At)
	return r, nil
}

func (c *Client) lastPeriodicRun(ctx context.Context, ms contract.MutableSettings, name string) (time.Time, error) {
	r, err := c.periodicRunRecord(ctx, ms, name)
	return r.At, err
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// PeriodicJobs lists this client's periodic jobs in name order, with
// their stored state (paused, last run) when the store keeps it.
func (c *Client) PeriodicJobs(ctx context.Context) ([]PeriodicStatus, error) {
	now := c.clock.Now()
	ms, _ := c.store.(contract.MutableSettings)
	out := make([]PeriodicStatus, 0, len(c.periodic))
	for _, e := range c.periodic {
		s := PeriodicStatus{
			Name: e.job.Name, Schedule: e.job.Schedule, Kind: e.job.Kind,
			Queue: e.job.Options.Queue, Missed: e.job.Missed,
		}
		if s.Queue == "" {
			s.Queue = DefaultQueue
		}
		if s.Missed == "" {
			s.Missed = MissedRunOnce
		}
		if ms != nil {
			st, err := c.periodicState(ctx, ms, e.job.Name)
			if err != nil {
				return nil, err
			}
			s.Paused = st.Paused
			r, err := c.periodicRunRecord(ctx, ms, e.job.Name)
			if err != nil {
				return nil, err
			}
			s.LastRunAt, s.LastJobID = r.At, r.JobID
		}
		if !s.Paused {
			s.NextRunAt = e.sched.next(now)
		}
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b PeriodicStatus) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// PausePeriodic pauses the named periodic job on every node sharing the
// store: none enqueues its occurrences until ResumePeriodic. It returns
// ErrUnknownPeriodic (wrapped) for a name this client does not list, and
// ErrUnsupported (wrapped) on a store without MutableSettings.
func (c *Client) PausePeriodic(ctx context.Context, name string) error {
	return c.setPeriodicPaused(ctx, name, true)
}

// ResumePeriodic resumes a paused periodic job. Occurrences that fell
// while it was paused are not run; the next one is. Errors as
// PausePeriodic.
func (c *Client) ResumePeriodic(ctx context.Context, name string) error {
	return c.setPeriodicPaused(ctx, name, false)
}

func (c *Client) setPeriodicPaused(ctx context.Context, name string, paused bool) error {
	if _, err := c.periodicEntry(name); err != nil {
		return err
	}
	ms, err := c.mutableSettings()
	if err != nil {
		return err
	}
	st := periodicState{Paused: paused}
	if !paused {
		st.Since = c.clock.Now()
	}
	b, _ := json.Marshal(st)
	return ms.PutSetting(ctx, periodicStateKey(name), b)
}

// RunPeriodicNow enqueues one job of the named periodic job now, outside
// its schedule (no unique key: each call enqueues one), and returns it.
// The job's metadata names the schedule. It returns ErrUnknownPeriodic
// (wrapped) for a name this client does not list.
func (c *Client) RunPeriodicNow(ctx context.Context, name string) (InsertResult, error) {
	e, err := c.periodicEntry(name)
	if err != nil {
		return InsertResult{}, err
	}
	p, err := e.params(time.Time{}, c.clock.Now(), c.limits())
	if err != nil {
		return InsertResult{}, err
	}
	return c.enqueueOne(ctx, p)
}

// EnqueuePeriodic runs one scheduling round now: for every periodic job
// that is not paused, it enqueues the occurrences due at the client's
// clock (see MissedPolicy), and records the latest one it created. It
// returns how many jobs it created (occurrences other nodes had already
// enqueued are duplicates, not counted). The client's periodic loop calls
// it at every occurrence; tests and tools may call it directly.
func (c *Client) EnqueuePeriodic(ctx context.Context) (int, error) {
	now := c.clock.Now()
	ms, _ := c.store.(contract.MutableSettings)
	created := 0
	var errs []error
	for _, e := range c.periodic {
		var since time.Time
		if ms != nil {
			st, err := c.periodicState(ctx, ms, e.job.Name)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			if st.Paused {
				continue
			}
			since = st.Since
			// Occurrences after the last recorded run only; a schedule
			// never run starts when this client was made (it does not
			// catch up on a past it never had).
			last, err := c.lastPeriodicRun(ctx, ms, e.job.Name)
			switch {
			case err != nil:
				errs = append(errs, err)
				continue
			case last.IsZero():
				since = maxTime(since, e.since)
			default:
				since = maxTime(since, last.Add(time.Nanosecond))
			}
		}
		at := e.sched.occurrences(e.job.Missed, now, since)
		if len(at) == 0 {
			continue
		}
		ps := make([]InsertParams, 0, len(at))
		for _, t := range at {
			p, err := e.params(t, now, c.limits())
			if err != nil {
				errs = append(errs, fmt.Errorf("backlog: periodic job %q: %w", e.job.Name, err))
				continue
			}
			ps = append(ps, p)
		}
		res, err := c.EnqueueMany(ctx, ps)
		if err != nil {
			errs = append(errs, fmt.Errorf("backlog: periodic job %q: %w", e.job.Name, err))
			continue
		}
		var last *Job
		for _, r := range res {
			if !r.Duplicate {
				created++
				last = r.Job
			}
		}
		if last != nil && ms != nil && !last.RunAt.Before(since) {
			b, _ := json.Marshal(periodicRun{At: last.RunAt, JobID: last.ID})
			if err := ms.PutSetting(ctx, periodicRunKey(e.job.Name), b); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return created, errors.Join(errs...)
}

// nextPeriodic is the earliest next occurrence of any periodic job after
// now (zero when none fires again).
func (c *Client) nextPeriodic(now time.Time) time.Time {
	var first time.Time
	for _, e := range c.periodic {
		if n := e.sched.next(now); !n.IsZero() && (first.IsZero() || n.Before(first)) {
			first = n
		}
	}
	return first
}

// periodicLoop enqueues occurrences as they come due, on every node with
// periodic jobs: a round at start (catching up on missed occurrences),
// then one at each occurrence, and at least every PeriodicGrace/2 (so a
// pause, a resume or a failed round is picked up soon).
func (c *Client) periodicLoop(ctx context.Context) {
	failures := 0
	for {
		if _, err := c.EnqueuePeriodic(ctx); err != nil && ctx.Err() == nil {
			failures++
			c.log.Warn("backlog: enqueueing periodic jobs failed; retrying", "err", err, "failures", failures)
			c.emit(Event{Kind: EventStoreError, At: c.clock.Now(), Err: err})
			if !sleepCtx(ctx, retryDelay(failures, time.Second)) {
				return
			}
			continue
		}
		failures = 0
		now := c.clock.Now()
		wait := PeriodicGrace / 2
		if n := c.nextPeriodic(now); !n.IsZero() {
			wait = min(wait, n.Sub(now))
		}
		if !sleepCtx(ctx, max(wait, time.Millisecond)) {
			return
		}
	}
}
