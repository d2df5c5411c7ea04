package core

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/backlogq/backlog/core/contract"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// QueueConfig configures one queue a client works.
type QueueConfig struct {
	// MaxWorkers is how many jobs of the queue run at once on this node.
	// 0 means 50.
	MaxWorkers int
	// ClaimAhead is how many claimed jobs of the queue this node may hold
	// waiting for a free slot; while it holds room for any, the queue runs
	// two claims at once. A queue's slots otherwise turn over at most once
	// per claim round trip (MaxWorkers / claim latency jobs per second),
	// which bounds queues of short jobs. Waiting jobs are running in the
	// store (leased, extended by heartbeats, rescued if the node dies) but
	// not yet started, so other nodes cannot take them. A stopping node
	// hands its waiting jobs back unrun.
	//
	// 0 (the default, NoClaimAhead) never claims ahead. AutoClaimAhead
	// (any negative value) adapts: the node holds up to MaxWorkers jobs
	// ahead while the queue's jobs run, on average, for less than
	// AutoClaimAheadRatio claim round trips, and none otherwise (long jobs
	// are not held back from other nodes). A positive value holds up to
	// that many, whatever the jobs' length. It is not the default: a job
	// held ahead may start after the store became unreachable, and if its
	// outcome cannot be written before its lease runs out it runs again;
	// and the held jobs of a node that dies wait for their leases to run
	// out (docs/benchmarks.md, "Claiming ahead while jobs are short").
	ClaimAhead int
	// Limits, when set, are the queue's concurrency limits (QueueLimits)
	// to store at Start if the queue's limits were never set in the
	// store. Limits already in the store win: they are shared by every
	// node and changed with Client.SetQueueLimits (or the operator's
	// tools), never by a node's configuration. Start fails on a store
	// that is not a QueueLimiter. Nil leaves the store's limits alone.
	Limits *QueueLimits
}

// Retention says how long finished jobs are kept before maintenance prunes
// them. A zero Completed deletes a job at the moment it completes; a
// negative duration keeps jobs of that state forever.
type Retention struct {
	Completed time.Duration
	Cancelled time.Duration
	Discarded time.Duration

	// Archive, when true, has maintenance move finished jobs past their
	// retention into the store's archive (contract.Archiver) instead of
	// deleting them; a zero Completed then archives completed jobs at the
	// next maintenance round rather than deleting them as they complete.
	// Client.ListArchivedJobs and GetArchivedJob read the archive. Start
	// fails with an error wrapping ErrUnsupported on a store that is not
	// an Archiver.
	Archive bool
	// ArchiveTTL is how long archived jobs are kept, counted from their
	// FinishedAt: maintenance deletes older ones from the archive. Zero
	// or negative keeps them forever. It applies whenever the store is an
	// Archiver, Archive on or off (an archive filled earlier is pruned
	// too).
	ArchiveTTL time.Duration
}

// DefaultRetention keeps completed jobs a day and cancelled or discarded
// (dead-lettered) jobs a week.
var DefaultRetention = Retention{Completed: 24 * time.Hour, Cancelled: 7 * 24 * time.Hour, Discarded: 7 * 24 * time.Hour}

// Config configures a Client. The zero value is an insert-only client with
// defaults; set Queues and Handlers to run jobs.
type Config struct {
	// Queues to work on this node, by name. Empty means the client only
	// inserts and administers.
	Queues map[string]QueueConfig
	// Handlers by kind. A claimed job whose kind is missing fails its
	// attempt with ErrUnknownKind and is retried (another node may know the
	// kind during a rolling deploy), then discarded when attempts run out.
	Handlers *Handlers
	// AllowUnknownKinds lets this client enqueue kinds that neither it nor
	// any live registered worker handles (a kind whose workers are not
	// deployed yet). Off, Enqueue, EnqueueRaw, EnqueueMany, EnqueueTx and
	// the HTTP API's submissions refuse them with an error wrapping
	// ErrUnknownKind and insert nothing (Client.CheckKinds says the rule;
	// a client that handles no kind accepts every kind until some worker
	// announces its own). It also lets periodic jobs name kinds this
	// client has no handler for.
	AllowUnknownKinds bool
	// Periodic jobs this client enqueues on their schedules (see
	// PeriodicJob): every client listing one takes part, with or without
	// queues of its own. NewClient returns an error for an invalid one,
	// or for a kind this client could not enqueue (ErrUnknownKind).
	Periodic []PeriodicJob
	// Middleware wraps every handler, outermost first.
	Middleware []Middleware
	// Observers receive engine events.
	Observers []Observer
	// Logger for structured logs; nil means slog.Default().
	Logger *slog.Logger
	// TracerProvider, when set, traces enqueues and executions with
	// OpenTelemetry, and carries each job's trace context in its metadata
	// so that its executions, on any node, continue the producer's trace
	// (see Tracing and docs/tracing.md). Nil means no tracing: no spans,
	// no metadata written, nothing allocated per job. The engine never
	// reads the global provider: pass otel.GetTracerProvider() to use it.
	TracerProvider trace.TracerProvider
	// Propagator writes and reads the trace context in job metadata and
	// HTTP headers; nil means W3C Trace Context (propagation.TraceContext,
	// the metadata keys "traceparent" and "tracestate"). Unused without a
	// TracerProvider.
	Propagator propagation.TextMapPropagator
	// Clock is the single time source; nil means SystemClock.
	Clock Clock

	// WorkerID identifies this process in the worker registry and in every
	// claim; "" means host-pid-random.
	WorkerID string
	// WorkerTags are this node's capabilities: its claims take jobs whose
	// tags are all among them, and jobs without tags (see Store.Claim).
	// They are also stored in the worker registry.
	WorkerTags []string

	// PollInterval is how often an idle queue checks for due jobs (scheduled
	// jobs coming due, inserts by other nodes without notifications). 0
	// means 1 s.
	PollInterval time.Duration
	// FetchCooldown is the least time between the starts of two claims of
	// one queue when the second would take fewer jobs than the queue's
	// workers (at most MaxClaim), so claims gather many jobs under load.
	// While the queue has more due jobs than slots, such a claim waits
	// instead, counted from the last claim's start or result, for the
	// cooldown or the mean duration of recent claims, whichever is
	// longer (at most PollInterval): slots that short jobs free meanwhile
	// join it. 0 means 1 ms.
	FetchCooldown time.Duration
	// MaxClaim caps the jobs one claim takes. 0 means 200.
	MaxClaim int
	// LeaseDuration is how long a claim (and each heartbeat) holds a job
	// before another node may rescue it. 0 means 30 s. A node that cannot
	// renew a lease stops the job's handler one HeartbeatInterval before
	// the lease runs out and hands the job back (see docs/guarantees.md).
	LeaseDuration time.Duration
	// HeartbeatInterval is how often the node re-registers and extends the
	// leases of the jobs it holds, in one statement; while the store is
	// unreachable it tries every second instead. 0 means 10 s. Must be
	// below LeaseDuration.
	HeartbeatInterval time.Duration
	// RescueGrace is how long this node's maintenance waits, after its
	// store became reachable again, before it rescues expired leases, so
	// that live workers cut off by the same outage first write their
	// outcomes and renew their leases. 0 means HeartbeatInterval.
	RescueGrace time.Duration
	// CompleterInterval is how long the completer gathers outcomes before
	// writing them in one batch. 0 means 2 ms.
	CompleterInterval time.Duration
	// CompleterMaxBatch caps outcomes per Finish call. 0 means 1000.
	CompleterMaxBatch int
	// DefaultTimeout bounds every attempt of kinds without WithTimeout. 0
	// means no timeout.
	DefaultTimeout time.Duration
	// Retry is the default retry policy; nil means ExponentialBackoff{}.
	Retry RetryPolicy

	// MaintenanceInterval is how often this node rescues expired leases,
	// discards jobs past their deadline, prunes finished jobs and removes
	// dead workers. 0 means 5 s. Negative disables maintenance on this node.
	MaintenanceInterval time.Duration
	// Retention of finished jobs; nil means DefaultRetention.
	Retention *Retention
	// WorkerStaleAfter is how long a worker may go without a heartbeat
	// before it shows as stale (nothing is done to it yet). 0 means 30 s.
	WorkerStaleAfter time.Duration
	// WorkerDeadAfter is how long a worker may go without a heartbeat
	// before it is declared dead: maintenance hands its running jobs back
	// at once (Store.RescueWorkers), without waiting for their leases, and
	// removes its record. 0 means 2 min. Must exceed HeartbeatInterval.
	WorkerDeadAfter time.Duration

	// MaxArgsBytes limits a job's JSON args. 0 means DefaultMaxArgsBytes.
	MaxArgsBytes int
	// MaxResultBytes limits a job's result. 0 means DefaultMaxResultBytes.
	MaxResultBytes int

	// Encryption seals args (and, when asked, results and error text)
	// with AES-256-GCM before they reach the store, and opens args for
	// handlers; nil means off. Size limits apply to the plaintext. Jobs
	// the store, the enqueue results, Running and events return hold the
	// sealed form: Keyring.OpenJob opens them. See docs/security.md.
	Encryption *Encryption
}

func (c *Config) withDefaults() (Config, error) {
	out := *c
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&out.PollInterval, time.Second)
	def(&out.FetchCooldown, time.Millisecond)
	def(&out.LeaseDuration, 30*time.Second)
	def(&out.HeartbeatInterval, 10*time.Second)
	def(&out.CompleterInterval, 2*time.Millisecond)
	def(&out.MaintenanceInterval, 5*time.Second)
	def(&out.WorkerStaleAfter, 30*time.Second)
	def(&out.WorkerDeadAfter, 2*time.Minute)
	if out.MaxClaim <= 0 {
		out.MaxClaim = 200
	}
	if out.CompleterMaxBatch <= 0 {
		out.CompleterMaxBatch = 1000
	}
	if out.Retry == nil {
		out.Retry = ExponentialBackoff{}
	}
	if out.Retention == nil {
		r := DefaultRetention
		out.Retention = &r
	}
	if out.Logger == nil {
		out.Logger = slog.Default()
	}
	if out.Clock == nil {
		out.Clock = SystemClock{}
	}
	if out.MaxArgsBytes <= 0 {
		out.MaxArgsBytes = DefaultMaxArgsBytes
	}
	if out.MaxResultBytes <= 0 {
		out.MaxResultBytes = DefaultMaxResultBytes
	}
	def(&out.RescueGrace, out.HeartbeatInterval)
	if out.HeartbeatInterval >= out.LeaseDuration {
		return out, fmt.Errorf("backlog: heartbeat interval %s must be below the lease duration %s", out.HeartbeatInterval, out.LeaseDuration)
	}
	if out.WorkerDeadAfter <= out.HeartbeatInterval || out.WorkerStaleAfter > out.WorkerDeadAfter {
		return out, fmt.Errorf("backlog: worker dead-after %s must exceed the heartbeat interval %s and the stale-after %s", out.WorkerDeadAfter, out.HeartbeatInterval, out.WorkerStaleAfter)
	}
	qs := make(map[string]QueueConfig, len(out.Queues))
	for name, q := range out.Queues {
		if err := contract.ValidateQueueName(name); err != nil {
			return out, err
		}
		if q.MaxWorkers <= 0 {
			q.MaxWorkers = 50
		}
		if q.Limits != nil {
			if err := q.Limits.Validate(); err != nil {
				return out, fmt.Errorf("backlog: queue %q: %w", name, err)
			}
		}
		qs[name] = q
	}
	out.Queues = qs
	return out, nil
}
