package core

import (
	"context"
	"net/http"
	"strconv"

	"github.com/backlogq/backlog/core/contract"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// The metadata keys of a job's creation context with the default
// propagator (W3C Trace Context). An enqueue with tracing on replaces
// what the caller put under the propagator's keys.
const (
	MetadataTraceParent = "traceparent"
	MetadataTraceState  = "tracestate"
)

// The attributes of backlog's spans besides the messaging conventions'.
const (
	AttrJobID      = attribute.Key("backlog.job.id")      // int64
	AttrJobKind    = attribute.Key("backlog.job.kind")    // string
	AttrJobAttempt = attribute.Key("backlog.job.attempt") // int, 1-based
	// AttrJobOutcome is what the attempt led to: an OutcomeKind
	// ("complete", "retry", "snooze", "continue", "cancel", "discard"), or
	// "lease_lost" when its outcome could not apply.
	AttrJobOutcome = attribute.Key("backlog.job.outcome")
	// AttrJobDuplicate is set on the send span of one job whose unique key
	// was held: nothing was inserted.
	AttrJobDuplicate = attribute.Key("backlog.job.duplicate")
	// AttrWorkflowID and AttrWorkflowStep are set on the process span of a
	// job of a workflow or batch (Job.WorkflowID, Job.Step): int64 and
	// string. The jobs of one workflow share one trace already, the trace
	// of the span in their enqueue's context.
	AttrWorkflowID   = attribute.Key("backlog.workflow.id")
	AttrWorkflowStep = attribute.Key("backlog.workflow.step")
)

// OutcomeLeaseLost is the outcome attribute of an execution whose outcome
// could not apply: its lease was lost (rescued, finished elsewhere).
const OutcomeLeaseLost = "lease_lost"

const (
	tracerName      = "github.com/backlogq/backlog"
	messagingSystem = "backlog"
)

// Tracing starts the engine's OpenTelemetry spans and carries trace
// contexts in job metadata and HTTP headers, following the semantic
// conventions for messaging systems (semconv v1.43.0, messaging spans;
// messaging.system is "backlog", a queue is a destination, a job a
// message; see docs/tracing.md):
//
//   - An enqueue of one job is a "send {queue}" span (kind producer), and
//     the job's creation context is that span's. An enqueue of several
//     jobs is one "create {queue}" span per job (kind producer), each the
//     creation context of its job, and one "send" span (kind client)
//     linking to them. All are children of the span in the enqueue's
//     context.
//   - The creation context travels in the job's metadata under the W3C
//     Trace Context keys "traceparent" and "tracestate" (by default: the
//     keys are those of the configured propagator).
//   - Each execution (attempt) of a job is a "process {queue}" span (kind
//     consumer), a child of the job's creation context, also linked to it,
//     with the job's id, kind and attempt and the attempt's outcome. So an
//     execution on any node, in process or in a remote worker, continues
//     the producer's trace. A job whose metadata has no valid trace
//     context (none, or garbled) is processed in a new root span.
//
// A client's tracing is off unless Config.TracerProvider is set: its
// Tracing is nil, a valid value on which every method does nothing, and
// the engine creates no span, writes no metadata and allocates nothing per
// job. Safe for concurrent use.
type Tracing struct {
	tracer trace.Tracer
	prop   propagation.TextMapPropagator
}

// NewTracing returns the tracing of tp and prop, or nil (off) when tp is
// nil. A nil prop means W3C Trace Context (propagation.TraceContext{}).
// Clients build theirs from Config.TracerProvider and Config.Propagator;
// runners of jobs outside the engine (the HTTP API's remote workers)
// build one to trace executions the same way.
func NewTracing(tp trace.TracerProvider, prop propagation.TextMapPropagator) *Tracing {
	if tp == nil {
		return nil
	}
	if prop == nil {
		prop = propagation.TraceContext{}
	}
	return &Tracing{tracer: tp.Tracer(tracerName, trace.WithSchemaURL(semconv.SchemaURL)), prop: prop}
}

// Tracing returns the client's tracing; nil when Config.TracerProvider is
// nil.
func (c *Client) Tracing() *Tracing { return c.tracing }

// Inject writes the trace context of ctx into carrier with the tracing's
// propagator. It does nothing on a nil Tracing.
func (t *Tracing) Inject(ctx context.Context, carrier propagation.TextMapCarrier) {
	if t != nil {
		t.prop.Inject(ctx, carrier)
	}
}

// Extract returns ctx carrying the trace context read from carrier (such
// as propagation.HeaderCarrier of a request's headers): a remote parent
// for the spans started under it. An absent or invalid context leaves ctx
// as it is; so does a nil Tracing.
func (t *Tracing) Extract(ctx context.Context, carrier propagation.TextMapCarrier) context.Context {
	if t == nil {
		return ctx
	}
	return t.prop.Extract(ctx, carrier)
}

// startSend starts the spans of an enqueue of ps (see the conventions
// above) and writes each job's creation context into a copy of its
// metadata. It returns the context to insert under and the send span;
// endSend ends it. On a nil Tracing it returns ctx and nil.
func (t *Tracing) startSend(ctx context.Context, ps []InsertParams) (context.Context, trace.Span) {
	if t == nil || len(ps) == 0 {
		return ctx, nil
	}
	queue := ps[0].Queue
	for _, p := range ps[1:] {
		if p.Queue != queue {
			queue = ""
			break
		}
	}
	fields := t.prop.Fields()
	withContext := func(ctx context.Context, md map[string]string) map[string]string {
		out := make(map[string]string, len(md)+len(fields))
		for k, v := range md {
			out[k] = v
		}
		for _, f := range fields {
			delete(out, f)
		}
		t.prop.Inject(ctx, propagation.MapCarrier(out))
		return out
	}
	if len(ps) == 1 {
		p := &ps[0]
		ctx, span := t.tracer.Start(ctx, spanName("send", queue), trace.WithSpanKind(trace.SpanKindProducer),
			trace.WithAttributes(
				semconv.MessagingSystemKey.String(messagingSystem),
				semconv.MessagingOperationTypeSend,
				semconv.MessagingOperationName("send"),
				semconv.MessagingDestinationName(queue),
				AttrJobKind.String(p.Kind),
			))
		p.Metadata = withContext(ctx, p.Metadata)
		return ctx, span
	}
	links := make([]trace.Link, len(ps))
	for i := range ps {
		p := &ps[i]
		cctx, create := t.tracer.Start(ctx, spanName("create", p.Queue), trace.WithSpanKind(trace.SpanKindProducer),
			trace.WithAttributes(
				semconv.MessagingSystemKey.String(messagingSystem),
				semconv.MessagingOperationTypeCreate,
				semconv.MessagingOperationName("create"),
				semconv.MessagingDestinationName(p.Queue),
				AttrJobKind.String(p.Kind),
			))
		p.Metadata = withContext(cctx, p.Metadata)
		links[i] = trace.Link{SpanContext: create.SpanContext()}
		create.End()
	}
	attrs := []attribute.KeyValue{
		semconv.MessagingSystemKey.String(messagingSystem),
		semconv.MessagingOperationTypeSend,
		semconv.MessagingOperationName("send"),
		semconv.MessagingBatchMessageCount(len(ps)),
	}
	if queue != "" {
		attrs = append(attrs, semconv.MessagingDestinationName(queue))
	}
	return t.tracer.Start(ctx, spanName("send", queue), trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attrs...), trace.WithLinks(links...))
}

// endSend ends an enqueue's send span (nil: tracing is off) with the
// insert's results or error.
func endSend(span trace.Span, res []InsertResult, err error) {
	if span == nil {
		return
	}
	switch {
	case err != nil:
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	case len(res) == 1 && res[0].Job != nil:
		span.SetAttributes(semconv.MessagingMessageID(strconv.FormatInt(res[0].Job.ID, 10)), AttrJobID.Int64(res[0].Job.ID))
		if res[0].Duplicate {
			span.SetAttributes(AttrJobDuplicate.Bool(true))
		}
	}
	span.End()
}

func spanName(op, queue string) string {
	if queue == "" {
		return op
	}
	return op + " " + queue
}

// ProcessSpan is the span of one execution of a job (StartProcess). The
// zero value (tracing off) does nothing.
type ProcessSpan struct {
	span trace.Span
}

// StartProcess starts the "process {queue}" span of job's current
// attempt: a child of the creation context in job.Metadata (linked to it
// as well), or a new root span when the metadata holds no valid context
// (the span in ctx, if any, is never the parent). It returns ctx carrying
// the span, for the handler, and the span to End with the attempt's
// outcome. The engine calls it for every execution; the remote worker of
// adapters/httpapi/client too. On a nil Tracing it returns ctx and the
// zero ProcessSpan, allocating nothing.
func (t *Tracing) StartProcess(ctx context.Context, job *Job) (context.Context, ProcessSpan) {
	if t == nil {
		return ctx, ProcessSpan{}
	}
	// Whatever span ctx carries is not the parent: the job's creation
	// context is, or none.
	parent := t.prop.Extract(trace.ContextWithSpanContext(ctx, trace.SpanContext{}), propagation.MapCarrier(job.Metadata))
	opts := []trace.SpanStartOption{
		trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithAttributes(
			semconv.MessagingSystemKey.String(messagingSystem),
			semconv.MessagingOperationTypeProcess,
			semconv.MessagingOperationName("process"),
			semconv.MessagingDestinationName(job.Queue),
			semconv.MessagingMessageID(strconv.FormatInt(job.ID, 10)),
			AttrJobID.Int64(job.ID),
			AttrJobKind.String(job.Kind),
			AttrJobAttempt.Int(job.Attempt),
		),
	}
	if job.WorkflowID != 0 {
		opts = append(opts, trace.WithAttributes(AttrWorkflowID.Int64(job.WorkflowID), AttrWorkflowStep.String(job.Step)))
	}
	if sc := trace.SpanContextFromContext(parent); sc.IsValid() {
		opts = append(opts, trace.WithLinks(trace.Link{SpanContext: sc}))
	}
	ctx, span := t.tracer.Start(parent, spanName("process", job.Queue), opts...)
	return ctx, ProcessSpan{span: span}
}

// End ends the span with the attempt's outcome (an OutcomeKind's string
// or OutcomeLeaseLost) and the handler's error. The error of a failed
// attempt ("retry", "discard") is recorded as an exception event and sets
// the span's status to Error; a cancellation's is recorded only. The
// errors that ask for a snooze or a continuation are not failures and are
// not recorded. Safe on the zero ProcessSpan.
func (s ProcessSpan) End(outcome string, err error) {
	if s.span == nil {
		return
	}
	s.span.SetAttributes(AttrJobOutcome.String(outcome))
	if err != nil {
		switch contract.OutcomeKind(outcome) {
		case contract.OutcomeRetry, contract.OutcomeDiscard:
			s.span.RecordError(err)
			s.span.SetStatus(codes.Error, err.Error())
		case contract.OutcomeCancel:
			s.span.RecordError(err)
		}
	}
	s.span.End()
}

// w3c is the propagator of the package-level helpers.
var w3c propagation.TextMapPropagator = propagation.TraceContext{}

// InjectTraceHeaders sets the W3C "traceparent" (and "tracestate", when
// the context has one) headers of h from the span in ctx; it does nothing
// when ctx carries no valid span context. A handler that calls other
// services over HTTP (a webhook) passes its context and request headers,
// so the service continues the execution's trace:
//
//	req, _ := http.NewRequestWithContext(ctx, "POST", url, body)
//	core.InjectTraceHeaders(ctx, req.Header)
func InjectTraceHeaders(ctx context.Context, h http.Header) {
	w3c.Inject(ctx, propagation.HeaderCarrier(h))
}

// TraceEnv returns the W3C trace context of the span in ctx as
// environment entries, "TRACEPARENT=…" and, when set, "TRACESTATE=…"
// (the names of the OpenTelemetry environment-variable carrier), for
// commands a handler starts; nil when ctx carries no valid span context.
func TraceEnv(ctx context.Context) []string {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return nil
	}
	var c propagation.MapCarrier = make(map[string]string, 2)
	w3c.Inject(ctx, c)
	var env []string
	if v := c[MetadataTraceParent]; v != "" {
		env = append(env, "TRACEPARENT="+v)
	}
	if v := c[MetadataTraceState]; v != "" {
		env = append(env, "TRACESTATE="+v)
	}
	return env
}
