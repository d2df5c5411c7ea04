package client_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/backlogq/backlog/adapters/httpapi/client"
	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/store/memory"
)

func newTracer(t *testing.T) (*sdktrace.TracerProvider, *tracetest.InMemoryExporter) {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return tp, exp
}

// spanOf waits for the span called name whose attribute key is id.
func spanOf(t *testing.T, exp *tracetest.InMemoryExporter, name string, key attribute.Key, id int64) tracetest.SpanStub {
	t.Helper()
	var found tracetest.SpanStub
	waitFor(t, 10*time.Second, name+" span", func() bool {
		for _, s := range exp.GetSpans() {
			if s.Name != name {
				continue
			}
			for _, kv := range s.Attributes {
				if kv.Key == key && kv.Value.AsInt64() == id {
					found = s
					return true
				}
			}
		}
		return false
	})
	return found
}

func spanAttr(s tracetest.SpanStub, k attribute.Key) attribute.Value {
	for _, kv := range s.Attributes {
		if kv.Key == k {
			return kv.Value
		}
	}
	return attribute.Value{}
}

// A submission over HTTP with a traceparent header (any client) and one
// through the Go client under a traced context are enqueued in the
// caller's trace; the remote worker's executions continue it, and its
// handler runs under the process span.
func TestTracingHTTPSubmissionToRemoteWorker(t *testing.T) {
	srvTP, srvExp := newTracer(t)
	s := startServer(t, memory.New(), core.Config{TracerProvider: srvTP}, false)
	workTP, workExp := newTracer(t)
	var (
		mu   sync.Mutex
		seen = map[int64]trace.SpanContext{}
	)
	w := s.newWorker(client.WorkerConfig{TracerProvider: workTP, Handler: func(ctx context.Context, job *client.Job) (json.RawMessage, error) {
		mu.Lock()
		seen[job.ID] = trace.SpanContextFromContext(ctx)
		mu.Unlock()
		if job.Kind == "fail" {
			return nil, core.Permanent(errors.New("bad input"))
		}
		return nil, nil
	}})
	runWorker(t, w)

	// Any HTTP client: the W3C header.
	const traceID, parentID = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	req, _ := http.NewRequest("POST", s.URL+"/v1/jobs", bytes.NewReader([]byte(`{"kind":"greet"}`)))
	req.Header.Set("Authorization", "Bearer "+producerToken)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("traceparent", "00-"+traceID+"-"+parentID+"-01")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var sub struct {
		Job struct {
			ID int64 `json:"id"`
		} `json:"job"`
	}
	err = json.NewDecoder(resp.Body).Decode(&sub)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusCreated {
		t.Fatalf("submit: %d %v", resp.StatusCode, err)
	}
	id := sub.Job.ID
	send := spanOf(t, srvExp, "send default", core.AttrJobID, id)
	if send.SpanContext.TraceID().String() != traceID || send.Parent.SpanID().String() != parentID {
		t.Fatalf("send span: trace %s parent %s, want the header's", send.SpanContext.TraceID(), send.Parent.SpanID())
	}
	proc := spanOf(t, workExp, "process default", core.AttrJobID, id)
	if proc.SpanContext.TraceID().String() != traceID || proc.Parent.SpanID() != send.SpanContext.SpanID() {
		t.Fatalf("remote process span: trace %s parent %s, want the send span %s", proc.SpanContext.TraceID(), proc.Parent.SpanID(), send.SpanContext.SpanID())
	}
	if spanAttr(proc, core.AttrJobOutcome).AsString() != "complete" || spanAttr(proc, core.AttrJobAttempt).AsInt64() != 1 ||
		spanAttr(proc, core.AttrJobKind).AsString() != "greet" || proc.SpanKind != trace.SpanKindConsumer {
		t.Fatalf("remote process span: %v", proc.Attributes)
	}
	mu.Lock()
	handlerSpan := seen[id]
	mu.Unlock()
	if handlerSpan.SpanID() != proc.SpanContext.SpanID() {
		t.Fatalf("handler ran under %s, want the process span %s", handlerSpan.SpanID(), proc.SpanContext.SpanID())
	}

	// The Go client under a traced context; a failing job.
	ctx, caller := workTP.Tracer("test").Start(context.Background(), "request")
	res, err := s.producer.Submit(ctx, client.SubmitRequest{Kind: "fail"})
	caller.End()
	if err != nil {
		t.Fatal(err)
	}
	send = spanOf(t, srvExp, "send default", core.AttrJobID, res.Job.ID)
	if send.Parent.SpanID() != caller.SpanContext().SpanID() || send.SpanContext.TraceID() != caller.SpanContext().TraceID() {
		t.Fatalf("Go client submission: send span parent %v, want the caller's span %v", send.Parent, caller.SpanContext())
	}
	proc = spanOf(t, workExp, "process default", core.AttrJobID, res.Job.ID)
	if proc.Parent.SpanID() != send.SpanContext.SpanID() || spanAttr(proc, core.AttrJobOutcome).AsString() != "discard" ||
		proc.Status.Code != codes.Error {
		t.Fatalf("failed remote execution: parent %v outcome %v status %v", proc.Parent, spanAttr(proc, core.AttrJobOutcome), proc.Status)
	}
}

// A job whose metadata carries a garbled traceparent runs on a remote
// worker as usual, in a new root span.
func TestTracingRemoteWorkerBadTraceparent(t *testing.T) {
	s := startServer(t, memory.New(), core.Config{}, false) // no tracing: metadata kept as given
	workTP, workExp := newTracer(t)
	w := s.newWorker(client.WorkerConfig{TracerProvider: workTP, Handler: func(ctx context.Context, job *client.Job) (json.RawMessage, error) {
		return nil, nil
	}})
	runWorker(t, w)
	res, err := s.producer.Submit(context.Background(), client.SubmitRequest{Kind: "greet", Metadata: map[string]string{"traceparent": "00-garbage-01", "tracestate": "=,"}})
	if err != nil {
		t.Fatal(err)
	}
	proc := spanOf(t, workExp, "process default", core.AttrJobID, res.Job.ID)
	if proc.Parent.IsValid() || !proc.SpanContext.IsValid() || spanAttr(proc, core.AttrJobOutcome).AsString() != "complete" {
		t.Fatalf("process span: parent %v outcome %v", proc.Parent, spanAttr(proc, core.AttrJobOutcome))
	}
	waitFor(t, 10*time.Second, "completion", func() bool { return s.job(res.Job.ID).State == core.StateCompleted })
}
