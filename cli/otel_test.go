package cli

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/backlogq/backlog/adapters/httpapi/client"
	"github.com/backlogq/backlog/core"
)

func TestTracingWanted(t *testing.T) {
	cases := []struct {
		vars    map[string]string
		on      bool
		wantErr string
	}{
		{vars: nil},
		{vars: map[string]string{"OTEL_SERVICE_NAME": "x"}},
		{vars: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, on: true},
		{vars: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4318/v1/traces"}, on: true},
		{vars: map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}, on: true},
		{vars: map[string]string{"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}},
		{vars: map[string]string{"OTEL_SDK_DISABLED": "true", "OTEL_TRACES_EXPORTER": "otlp"}},
		{vars: map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, wantErr: `exporter "zipkin" is not built in`},
		{vars: map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, wantErr: `protocol "grpc"`},
		{vars: map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf"}, on: true},
		{vars: map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}}, // no exporter: not checked
	}
	for _, c := range cases {
		on, err := tracingWanted(func(k string) string { return c.vars[k] })
		switch {
		case c.wantErr != "":
			var ue usageError
			if err == nil || !strings.Contains(err.Error(), c.wantErr) || !errors.As(err, &ue) {
				t.Errorf("%v: error %v, want a usage error with %q", c.vars, err, c.wantErr)
			}
		case err != nil || on != c.on:
			t.Errorf("%v: %v, %v; want %v", c.vars, on, err, c.on)
		}
	}
}

// otlpReceiver is an OTLP/HTTP trace endpoint that keeps what it gets.
type otlpReceiver struct {
	mu    sync.Mutex
	spans []*tracepb.Span
	svc   []string // service.name of each resource
}

func (o *otlpReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	var req collectortrace.ExportTraceServiceRequest
	if r.URL.Path != "/v1/traces" || proto.Unmarshal(b, &req) != nil {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	o.mu.Lock()
	for _, rs := range req.ResourceSpans {
		for _, a := range rs.GetResource().GetAttributes() {
			if a.Key == "service.name" {
				o.svc = append(o.svc, a.GetValue().GetStringValue())
			}
		}
		for _, ss := range rs.ScopeSpans {
			o.spans = append(o.spans, ss.Spans...)
		}
	}
	o.mu.Unlock()
	w.Header().Set("Content-Type", "application/x-protobuf")
	out, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
	_, _ = w.Write(out)
}

func (o *otlpReceiver) named(name string) []*tracepb.Span {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []*tracepb.Span
	for _, s := range o.spans {
		if s.Name == name {
			out = append(out, s)
		}
	}
	return out
}

// serve with an OTLP endpoint in the environment exports its spans: a
// submission carrying a traceparent header is enqueued in that trace, the
// execution continues it, the shell handler gets TRACEPARENT of the
// execution's span, and the spans still buffered are flushed at shutdown.
func TestServeExportsTracesWithOTLP(t *testing.T) {
	recv := &otlpReceiver{}
	hs := httptest.NewServer(recv)
	t.Cleanup(hs.Close)
	// The exporter reads the process environment; serve decides from its own.
	vars := map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": hs.URL, "OTEL_BSP_SCHEDULE_DELAY": "60000"}
	for k, v := range vars {
		t.Setenv(k, v)
	}
	t.Setenv("OTEL_SERVICE_NAME", "")
	t.Setenv("OTEL_RESOURCE_ATTRIBUTES", "")
	db := tempDB(t)
	w, base := startServe(t, db, vars, "--handler", `trace=printf %s "$TRACEPARENT"`)

	const traceID, parentID = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	req, _ := http.NewRequest("POST", base+"/v1/jobs", strings.NewReader(`{"kind":"trace"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("traceparent", "00-"+traceID+"-"+parentID+"-01")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var sub struct{ Job struct{ ID int64 } }
	err = json.NewDecoder(resp.Body).Decode(&sub)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusCreated {
		t.Fatalf("submit: %d %v", resp.StatusCode, err)
	}
	var got struct {
		Job struct {
			State  string
			Result string
		}
	}
	waitFor(t, 20*time.Second, "the job to complete", func() bool {
		_, body := call(t, "GET", base+"/v1/jobs/"+itoa(sub.Job.ID), "", "")
		_ = json.Unmarshal([]byte(body), &got)
		return got.Job.State == "completed"
	})
	if len(recv.named("process default")) != 0 {
		t.Fatal("spans exported before the batch delay: the shutdown flush is not tested")
	}
	if c := w.stop(t); c != 0 {
		t.Fatalf("serve exit %d\n%s\n%s", c, w.stdout, w.stderr)
	}

	sends, procs := recv.named("send default"), recv.named("process default")
	if len(sends) != 1 || len(procs) != 1 {
		t.Fatalf("exported %d send and %d process spans, want 1 and 1", len(sends), len(procs))
	}
	send, proc := sends[0], procs[0]
	if hex.EncodeToString(send.TraceId) != traceID || hex.EncodeToString(send.ParentSpanId) != parentID {
		t.Fatalf("send span: trace %x parent %x, want the header's", send.TraceId, send.ParentSpanId)
	}
	if hex.EncodeToString(proc.TraceId) != traceID || string(proc.ParentSpanId) != string(send.SpanId) {
		t.Fatalf("process span: trace %x parent %x, want the send span %x", proc.TraceId, proc.ParentSpanId, send.SpanId)
	}
	want := "00-" + traceID + "-" + hex.EncodeToString(proc.SpanId) + "-01"
	if got.Job.Result != want {
		t.Fatalf("the handler's TRACEPARENT %q, want the process span's %q", got.Job.Result, want)
	}
	recv.mu.Lock()
	defer recv.mu.Unlock()
	for _, s := range recv.svc {
		if s != defaultServiceName {
			t.Fatalf("service.name %q, want %q", s, defaultServiceName)
		}
	}
}

// work --server with an OTLP endpoint traces its executions: a job whose
// metadata carries a traceparent (written by any producer) runs in a
// process span continuing it, the shell handler gets that span's
// TRACEPARENT, and the span is flushed when the worker stops.
func TestWorkRemoteExportsTracesWithOTLP(t *testing.T) {
	recv := &otlpReceiver{}
	hs := httptest.NewServer(recv)
	t.Cleanup(hs.Close)
	vars := map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": hs.URL + "/v1/traces", "OTEL_BSP_SCHEDULE_DELAY": "60000", "OTEL_SERVICE_NAME": "remote"}
	for k, v := range vars {
		t.Setenv(k, v)
	}
	url, admin := apiServer(t)
	const traceID, parentID = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"
	id := submit(t, admin, client.SubmitRequest{Kind: "trace", Metadata: map[string]string{"traceparent": "00-" + traceID + "-" + parentID + "-01"}})
	w := startRemote(t, func(k string) string { return vars[k] }, url, "--token", "wtok", "--handler", `trace=printf %s "$TRACEPARENT"`)
	waitFor(t, 30*time.Second, "the job to complete", func() bool { return getJob(t, admin, id).State == core.StateCompleted })
	if code := w.stop(t); code != 0 {
		t.Fatalf("exit %d: %s", code, w.stderr)
	}
	procs := recv.named("process default")
	if len(procs) != 1 {
		t.Fatalf("exported %d process spans, want 1", len(procs))
	}
	p := procs[0]
	if hex.EncodeToString(p.TraceId) != traceID || hex.EncodeToString(p.ParentSpanId) != parentID {
		t.Fatalf("process span: trace %x parent %x, want the job's traceparent", p.TraceId, p.ParentSpanId)
	}
	want := `"00-` + traceID + "-" + hex.EncodeToString(p.SpanId) + `-01"`
	if got := string(getJob(t, admin, id).Result); got != want {
		t.Fatalf("the handler's TRACEPARENT %s, want the process span's %s", got, want)
	}
	recv.mu.Lock()
	defer recv.mu.Unlock()
	if len(recv.svc) == 0 || recv.svc[0] != "remote" {
		t.Fatalf("service.name %v, want OTEL_SERVICE_NAME's", recv.svc)
	}
}
