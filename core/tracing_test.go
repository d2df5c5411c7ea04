package core_test

import (
	"context"
	"errors"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/backlogq/backlog/core/contract"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/store/memory"
	"github.com/backlogq/backlog/store/sqlite"
)

// newTracer returns a tracer provider that exports every ended span to
// the returned in-memory exporter at once.
func newTracer(t *testing.T) (*sdktrace.TracerProvider, *tracetest.InMemoryExporter) {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return tp, exp
}

// spansNamed returns the ended spans called name.
func spansNamed(exp *tracetest.InMemoryExporter, name string) tracetest.SpanStubs {
	var out tracetest.SpanStubs
	for _, s := range exp.GetSpans() {
		if s.Name == name {
			out = append(out, s)
		}
	}
	return out
}

// waitSpans waits until exp holds n spans called name.
func waitSpans(t *testing.T, exp *tracetest.InMemoryExporter, name string, n int) tracetest.SpanStubs {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		s := spansNamed(exp, name)
		if len(s) >= n {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("want %d %q spans, have %d of %d spans", n, name, len(s), len(exp.GetSpans()))
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func attr(s tracetest.SpanStub, k attribute.Key) attribute.Value {
	for _, kv := range s.Attributes {
		if kv.Key == k {
			return kv.Value
		}
	}
	return attribute.Value{}
}

// tracedStores are the stores two nodes share in the tracing tests.
func tracedStores(t *testing.T) map[string]func(t *testing.T) contract.Store {
	return map[string]func(t *testing.T) contract.Store{
		"memory": func(t *testing.T) contract.Store {
			st := memory.New()
			t.Cleanup(func() { _ = st.Close() })
			return st
		},
		"sqlite": func(t *testing.T) contract.Store {
			st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "jobs.db"))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = st.Close() })
			return st
		},
	}
}

// startNode starts a client over st that works the default queue with h.
func startNode(t *testing.T, st contract.Store, h *core.Handlers, mod func(*core.Config)) *core.Client {
	t.Helper()
	cfg := core.Config{
		Queues:              map[string]core.QueueConfig{core.DefaultQueue: {MaxWorkers: 4}},
		Handlers:            h,
		Logger:              quietLogger(),
		PollInterval:        10 * time.Millisecond,
		MaintenanceInterval: -1,
		Retention:           &core.Retention{Completed: time.Hour},
	}
	if mod != nil {
		mod(&cfg)
	}
	c, err := core.NewClient(st, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = c.Stop(ctx)
	})
	return c
}

// handlerSpans records the span context each handler call ran under, by
// job id.
type handlerSpans struct {
	mu sync.Mutex
	m  map[int64]trace.SpanContext
}

func (h *handlerSpans) record(ctx context.Context, j *core.Job) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.m == nil {
		h.m = map[int64]trace.SpanContext{}
	}
	h.m[j.ID] = trace.SpanContextFromContext(ctx)
}

func (h *handlerSpans) get(id int64) trace.SpanContext {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.m[id]
}

// An enqueue on one node and the execution on another are one trace: the
// caller's span → "send default" → "process default", whose context the
// handler runs under.
func TestTracingEnqueueToExecutionContinuesTrace(t *testing.T) {
	for name, open := range tracedStores(t) {
		t.Run(name, func(t *testing.T) {
			st := open(t)
			prodTP, prodExp := newTracer(t)
			workTP, workExp := newTracer(t)
			var seen handlerSpans
			h := core.NewHandlers()
			h.HandleRaw("greet", func(ctx context.Context, j *core.Job) error { seen.record(ctx, j); return nil })
			startNode(t, st, h, func(c *core.Config) { c.TracerProvider = workTP })
			producer, err := core.NewClient(st, core.Config{Logger: quietLogger(), TracerProvider: prodTP})
			if err != nil {
				t.Fatal(err)
			}

			ctx, req := prodTP.Tracer("test").Start(context.Background(), "request")
			r, err := producer.EnqueueRaw(ctx, "greet", []byte(`{}`), &core.Options{Metadata: map[string]string{"traceparent": "stale", "k": "v"}})
			req.End()
			if err != nil {
				t.Fatal(err)
			}
			waitState(t, st, r.Job.ID, core.StateCompleted)

			send := waitSpans(t, prodExp, "send default", 1)[0]
			if send.Parent.SpanID() != req.SpanContext().SpanID() || send.SpanContext.TraceID() != req.SpanContext().TraceID() {
				t.Fatalf("send span %v is not a child of the caller's span %v", send.Parent, req.SpanContext())
			}
			if send.SpanKind != trace.SpanKindProducer || attr(send, "messaging.system").AsString() != "backlog" ||
				attr(send, "messaging.destination.name").AsString() != "default" || attr(send, "messaging.operation.type").AsString() != "send" ||
				attr(send, "messaging.message.id").AsString() != strconv.FormatInt(r.Job.ID, 10) {
				t.Fatalf("send span: kind %v attributes %v", send.SpanKind, send.Attributes)
			}
			stored, err := st.Get(context.Background(), r.Job.ID)
			if err != nil {
				t.Fatal(err)
			}
			if tp := stored.Metadata[core.MetadataTraceParent]; !strings.Contains(tp, send.SpanContext.SpanID().String()) || stored.Metadata["k"] != "v" {
				t.Fatalf("metadata %v does not carry the send span %s", stored.Metadata, send.SpanContext.SpanID())
			}

			proc := waitSpans(t, workExp, "process default", 1)[0]
			if proc.Parent.SpanID() != send.SpanContext.SpanID() || proc.SpanContext.TraceID() != req.SpanContext().TraceID() || !proc.Parent.IsRemote() {
				t.Fatalf("process span's parent %v, want the send span %v", proc.Parent, send.SpanContext)
			}
			if len(proc.Links) != 1 || proc.Links[0].SpanContext.SpanID() != send.SpanContext.SpanID() {
				t.Fatalf("process span links %v, want the send span", proc.Links)
			}
			if proc.SpanKind != trace.SpanKindConsumer || attr(proc, core.AttrJobID).AsInt64() != r.Job.ID ||
				attr(proc, core.AttrJobKind).AsString() != "greet" || attr(proc, core.AttrJobAttempt).AsInt64() != 1 ||
				attr(proc, core.AttrJobOutcome).AsString() != "complete" || attr(proc, "messaging.destination.name").AsString() != "default" ||
				attr(proc, "messaging.operation.type").AsString() != "process" || proc.Status.Code == codes.Error {
				t.Fatalf("process span: kind %v attributes %v status %v", proc.SpanKind, proc.Attributes, proc.Status)
			}
			if got := seen.get(r.Job.ID); got.SpanID() != proc.SpanContext.SpanID() {
				t.Fatalf("handler ran under span %s, want the process span %s", got.SpanID(), proc.SpanContext.SpanID())
			}
		})
	}
}

// A batch enqueue makes one create span per job (its creation context)
// and a send span linking them; each execution is a child of its job's
// create span.
func TestTracingBatchEnqueueCreateSpans(t *testing.T) {
	st := memory.New()
	t.Cleanup(func() { _ = st.Close() })
	tp, exp := newTracer(t)
	h := core.NewHandlers()
	h.HandleRaw("greet", func(ctx context.Context, j *core.Job) error { return nil })
	c := startNode(t, st, h, func(c *core.Config) { c.TracerProvider = tp })

	ctx, req := tp.Tracer("test").Start(context.Background(), "request")
	ps := make([]core.InsertParams, 3)
	for i := range ps {
		p, err := core.NewInsertRaw("greet", nil, nil, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		ps[i] = p
	}
	res, err := c.EnqueueMany(ctx, ps)
	req.End()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range ps {
		if p.Metadata != nil {
			t.Fatalf("the caller's params were modified: %v", p.Metadata)
		}
	}
	creates := waitSpans(t, exp, "create default", 3)
	send := waitSpans(t, exp, "send default", 1)[0]
	if send.SpanKind != trace.SpanKindClient || len(send.Links) != 3 || attr(send, "messaging.batch.message_count").AsInt64() != 3 {
		t.Fatalf("send span: kind %v links %v attributes %v", send.SpanKind, send.Links, send.Attributes)
	}
	byID := map[trace.SpanID]bool{}
	for _, cs := range creates {
		if cs.Parent.SpanID() != req.SpanContext().SpanID() {
			t.Fatalf("create span parent %v, want the caller's span", cs.Parent)
		}
		byID[cs.SpanContext.SpanID()] = true
	}
	for _, r := range res {
		waitState(t, st, r.Job.ID, core.StateCompleted)
	}
	procs := waitSpans(t, exp, "process default", 3)
	for _, p := range procs {
		if !byID[p.Parent.SpanID()] || p.SpanContext.TraceID() != req.SpanContext().TraceID() {
			t.Fatalf("process span parent %v is none of the create spans", p.Parent)
		}
		delete(byID, p.Parent.SpanID())
	}
}

// A failed attempt's span records the error and has status Error, with
// the outcome the engine decided (retry, then discard when attempts run
// out).
func TestTracingFailureRecordsError(t *testing.T) {
	st := memory.New()
	t.Cleanup(func() { _ = st.Close() })
	tp, exp := newTracer(t)
	h := core.NewHandlers()
	h.HandleRaw("fail", func(ctx context.Context, j *core.Job) error { return errors.New("boom") },
		core.WithRetry(core.RetryFunc(func(*core.Job, error) time.Duration { return 0 })))
	c := startNode(t, st, h, func(c *core.Config) { c.TracerProvider = tp })
	r, err := c.EnqueueRaw(context.Background(), "fail", nil, &core.Options{MaxAttempts: 2})
	if err != nil {
		t.Fatal(err)
	}
	waitState(t, st, r.Job.ID, core.StateDiscarded)
	procs := waitSpans(t, exp, "process default", 2)
	outcomes := map[int64]string{}
	for _, p := range procs {
		outcomes[attr(p, core.AttrJobAttempt).AsInt64()] = attr(p, core.AttrJobOutcome).AsString()
		if p.Status.Code != codes.Error || !strings.Contains(p.Status.Description, "boom") {
			t.Fatalf("attempt %d: status %v", attr(p, core.AttrJobAttempt).AsInt64(), p.Status)
		}
		if len(p.Events) == 0 || p.Events[0].Name != "exception" {
			t.Fatalf("no exception event: %v", p.Events)
		}
	}
	if outcomes[1] != "retry" || outcomes[2] != "discard" {
		t.Fatalf("outcomes by attempt: %v", outcomes)
	}
	// Both attempts continue the enqueue's trace.
	send := spansNamed(exp, "send default")[0]
	for _, p := range procs {
		if p.Parent.SpanID() != send.SpanContext.SpanID() {
			t.Fatalf("attempt's parent %v, want the send span", p.Parent)
		}
	}
}

// A job whose metadata carries a garbled trace context runs as usual, in
// a new root span; one whose metadata carries a valid context (a producer
// without tracing that wrote it, such as another language's client)
// continues it.
func TestTracingBadTraceparentStartsNewRoot(t *testing.T) {
	st := memory.New()
	t.Cleanup(func() { _ = st.Close() })
	tp, exp := newTracer(t)
	h := core.NewHandlers()
	h.HandleRaw("greet", func(ctx context.Context, j *core.Job) error { return nil })
	startNode(t, st, h, func(c *core.Config) { c.TracerProvider = tp })
	producer, err := core.NewClient(st, core.Config{Logger: quietLogger()}) // tracing off: metadata kept as given
	if err != nil {
		t.Fatal(err)
	}
	// The span in the worker's own context must not become the parent.
	bad := []string{"garbage", "00-00000000000000000000000000000000-0000000000000000-01", "zz-" + strings.Repeat("x", 600), ""}
	var ids []int64
	for _, tpv := range bad {
		r, err := producer.EnqueueRaw(context.Background(), "greet", nil, &core.Options{Metadata: map[string]string{"traceparent": tpv, "tracestate": "=,=="}})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, r.Job.ID)
	}
	const foreign = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	r, err := producer.EnqueueRaw(context.Background(), "greet", nil, &core.Options{Metadata: map[string]string{"traceparent": foreign}})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		waitState(t, st, id, core.StateCompleted)
	}
	waitState(t, st, r.Job.ID, core.StateCompleted)
	for _, p := range waitSpans(t, exp, "process default", len(bad)+1) {
		id := attr(p, core.AttrJobID).AsInt64()
		if id == r.Job.ID {
			if p.SpanContext.TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" || p.Parent.SpanID().String() != "00f067aa0ba902b7" {
				t.Fatalf("job with a valid traceparent: trace %s parent %s", p.SpanContext.TraceID(), p.Parent.SpanID())
			}
			continue
		}
		if p.Parent.IsValid() || len(p.Links) != 0 || !p.SpanContext.IsValid() {
			t.Fatalf("job %d with a bad traceparent: parent %v links %v", id, p.Parent, p.Links)
		}
		if attr(p, core.AttrJobOutcome).AsString() != "complete" {
			t.Fatalf("job %d: outcome %v", id, attr(p, core.AttrJobOutcome))
		}
	}
}

// Without a TracerProvider nothing is written to metadata, and the
// execution path allocates nothing for tracing.
func TestTracingOffIsFree(t *testing.T) {
	st := memory.New()
	t.Cleanup(func() { _ = st.Close() })
	c, err := core.NewClient(st, core.Config{Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	if c.Tracing() != nil {
		t.Fatal("tracing on without a provider")
	}
	ctx, span := sdktrace.NewTracerProvider().Tracer("test").Start(context.Background(), "request")
	defer span.End()
	r, err := c.EnqueueRaw(ctx, "greet", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Job.Metadata) != 0 {
		t.Fatalf("metadata written with tracing off: %v", r.Job.Metadata)
	}
	var off *core.Tracing
	job := &core.Job{ID: 1, Kind: "greet", Queue: "default", Attempt: 1, Metadata: map[string]string{"traceparent": "x"}}
	bg := context.Background()
	if n := testing.AllocsPerRun(100, func() {
		_, s := off.StartProcess(bg, job)
		s.End("complete", nil)
		off.Inject(bg, nil)
		_ = off.Extract(bg, nil)
	}); n != 0 {
		t.Fatalf("tracing off allocates %v times per execution", n)
	}
}

// The helpers for handlers: W3C headers for HTTP calls and environment
// entries for commands carry the execution span's context.
func TestInjectTraceHeadersAndTraceEnv(t *testing.T) {
	tp, _ := newTracer(t)
	if env := core.TraceEnv(context.Background()); env != nil {
		t.Fatalf("env without a span: %v", env)
	}
	h := http.Header{}
	core.InjectTraceHeaders(context.Background(), h)
	if len(h) != 0 {
		t.Fatalf("headers without a span: %v", h)
	}
	ctx, span := tp.Tracer("test").Start(context.Background(), "process")
	defer span.End()
	sc := span.SpanContext()
	want := "00-" + sc.TraceID().String() + "-" + sc.SpanID().String() + "-01"
	core.InjectTraceHeaders(ctx, h)
	if h.Get("traceparent") != want {
		t.Fatalf("traceparent header %q, want %q", h.Get("traceparent"), want)
	}
	ts, _ := trace.ParseTraceState("vendor=x")
	ctx = trace.ContextWithSpanContext(ctx, sc.WithTraceState(ts))
	env := core.TraceEnv(ctx)
	if len(env) != 2 || env[0] != "TRACEPARENT="+want || env[1] != "TRACESTATE=vendor=x" {
		t.Fatalf("env %v", env)
	}
}

// EnqueueTx traces like EnqueueMany: the jobs a transaction inserts carry
// their creation context, and an insert that fails ends its span in error.
func TestTracingEnqueueTx(t *testing.T) {
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "jobs.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	tp, exp := newTracer(t)
	c, err := core.NewClient(st, core.Config{Logger: quietLogger(), TracerProvider: tp})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	tx, err := st.DB().BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.EnqueueTx(ctx, tx, []core.InsertParams{{Kind: "greet"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	send := waitSpans(t, exp, "send default", 1)[0]
	j, err := st.Get(ctx, res[0].Job.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(j.Metadata[core.MetadataTraceParent], send.SpanContext.SpanID().String()) {
		t.Fatalf("metadata %v does not carry the send span %s", j.Metadata, send.SpanContext.SpanID())
	}
	if _, err := c.EnqueueTx(ctx, "not a transaction", []core.InsertParams{{Kind: "greet"}}); err == nil {
		t.Fatal("EnqueueTx with a bad transaction succeeded")
	}
	failed := waitSpans(t, exp, "send default", 2)[1]
	if failed.Status.Code != codes.Error || len(failed.Events) == 0 {
		t.Fatalf("failed insert's span: status %v events %v", failed.Status, failed.Events)
	}
}

// BenchmarkTracingProcessSpan is the engine's tracing cost per execution:
// off (no provider) and on (the SDK sampling every span, no exporter).
func BenchmarkTracingProcessSpan(b *testing.B) {
	job := &core.Job{ID: 1, Kind: "greet", Queue: "default", Attempt: 1,
		Metadata: map[string]string{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}}
	for _, c := range []struct {
		name string
		tr   *core.Tracing
	}{{"off", nil}, {"on", core.NewTracing(sdktrace.NewTracerProvider(), nil)}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			ctx := context.Background()
			for b.Loop() {
				_, s := c.tr.StartProcess(ctx, job)
				s.End("complete", nil)
			}
		})
	}
}

// The steps of a workflow run in one trace, the trace of the span the
// workflow was enqueued in, and their process spans name the workflow and
// the step.
func TestTracingWorkflowInOneTrace(t *testing.T) {
	st := memory.New()
	tp, exp := newTracer(t)
	h := core.NewHandlers()
	h.HandleRaw("step", func(ctx context.Context, j *core.Job) error { return nil })
	c := startNode(t, st, h, func(c *core.Config) { c.TracerProvider = tp })
	ctx, req := tp.Tracer("test").Start(context.Background(), "request")
	var w core.Workflow
	w.AddRaw("a", "step", nil, nil).AddRaw("b", "step", nil, nil, "a").AddRaw("c", "step", nil, nil, "b")
	res, err := c.EnqueueWorkflow(ctx, &w)
	req.End()
	if err != nil {
		t.Fatal(err)
	}
	waitState(t, st, res.Steps["c"].ID, core.StateCompleted)
	procs := waitSpans(t, exp, "process default", 3)
	steps := map[string]bool{}
	for _, p := range procs {
		if p.SpanContext.TraceID() != req.SpanContext().TraceID() {
			t.Fatalf("step %q ran in trace %s; want the enqueue's trace %s", attr(p, core.AttrWorkflowStep).AsString(), p.SpanContext.TraceID(), req.SpanContext().TraceID())
		}
		if attr(p, core.AttrWorkflowID).AsInt64() != res.ID {
			t.Fatalf("process span's workflow id %d; want %d", attr(p, core.AttrWorkflowID).AsInt64(), res.ID)
		}
		steps[attr(p, core.AttrWorkflowStep).AsString()] = true
	}
	if len(steps) != 3 || !steps["a"] || !steps["b"] || !steps["c"] {
		t.Fatalf("process spans name the steps %v; want a, b and c", steps)
	}
}
