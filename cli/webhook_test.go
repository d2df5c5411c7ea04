package cli

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/backlogq/backlog/adapters/webhook"
	"github.com/backlogq/backlog/core"
)

const testWebhookSecret = "webhook-secret-for-tests-0123456789"

// A config file's handler whose command is a URL runs as a webhook: each
// job is POSTed signed, and the receiver's status decides the outcome.
func TestWebhookHandlerEndToEnd(t *testing.T) {
	t.Parallel()
	unsigned := make(chan string, 10)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if err := webhook.Verify([]byte(testWebhookSecret), r.Header, body, time.Now(), 0); err != nil {
			unsigned <- err.Error()
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		var p webhook.Payload
		if err := json.Unmarshal(body, &p); err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		var args struct{ N int }
		_ = json.Unmarshal(p.Args, &args)
		switch args.N {
		case 1:
			w.WriteHeader(http.StatusOK)
		case 2:
			w.WriteHeader(http.StatusUnprocessableEntity)
			io.WriteString(w, "no such customer")
		default:
			w.WriteHeader(http.StatusInternalServerError)
			io.WriteString(w, "mailer down")
		}
	}))
	defer hs.Close()
	host := strings.TrimPrefix(hs.URL, "http://")

	dir := t.TempDir()
	db := "sqlite:" + dir + "/hooks.db"
	secretFile := writeFile(t, dir, "secret", testWebhookSecret+"\n")
	cfg := writeFile(t, dir, "backlog.json", `{
	  "handlers": {"notify": {"command": "`+hs.URL+`/notify", "retry": ["50ms"]}},
	  "webhooks": {"allow_hosts": ["`+host+`"], "secret_file": "`+secretFile+`", "timeout": "5s"}
	}`)
	for _, n := range []string{"1", "2", "3"} {
		mustCLI(t, db, "enqueue", "notify", `{"n":`+n+`}`, "--max-attempts", "2")
	}
	w := startWorker(t, db, "--config", cfg)
	st := openStore(t, db)
	waitFor(t, 30*time.Second, "every job to be final", func() bool {
		c := counts(t, st)
		return c[core.StateCompleted]+c[core.StateDiscarded] == 3
	})
	w.stop(t)
	select {
	case e := <-unsigned:
		t.Fatalf("a request did not verify: %s", e)
	default:
	}
	for _, j := range allJobs(t, st) {
		var args struct{ N int }
		_ = json.Unmarshal(j.Args, &args)
		switch args.N {
		case 1:
			if j.State != core.StateCompleted || j.Attempt != 1 {
				t.Errorf("2xx: job %+v", j)
			}
		case 2:
			if j.State != core.StateDiscarded || j.Attempt != 1 || len(j.Errors) != 1 || !strings.Contains(j.Errors[0].Error, "422 Unprocessable Entity: no such customer") {
				t.Errorf("422: state %s attempt %d errors %+v", j.State, j.Attempt, j.Errors)
			}
		case 3:
			if j.State != core.StateDiscarded || j.Attempt != 2 || len(j.Errors) != 2 || !strings.Contains(j.Errors[1].Error, "500 Internal Server Error: mailer down") {
				t.Errorf("500: state %s attempt %d errors %+v", j.State, j.Attempt, j.Errors)
			}
		}
	}
}

// What work refuses at start: a webhook URL off the allow-list, no or a
// short secret, webhook flags without webhook handlers, and webhooks in a
// remote worker.
func TestWebhookStartupRefusals(t *testing.T) {
	t.Parallel()
	db := tempDB(t)
	try := func(env map[string]string, args ...string) result {
		e, out, errb := testEnv("")
		e.getenv = func(k string) string { return env[k] }
		code := run(context.Background(), e, append([]string{"--db", db, "work"}, args...))
		return result{code: code, stdout: out.String(), stderr: errb.String()}
	}
	secret := map[string]string{webhookSecretEnv: testWebhookSecret}
	for _, tc := range []struct {
		env  map[string]string
		args []string
		want string
	}{
		{secret, []string{"--handler", "k=http://127.0.0.1:9/x"}, "need their hosts allowed"},
		{secret, []string{"--handler", "k=http://127.0.0.1:9/x", "--webhook-allow-host", "hooks.example.com"}, "not on the allow-list"},
		{secret, []string{"--handler", "k=https://evil.example.com/x", "--webhook-allow-host", "hooks.example.com"}, "not on the allow-list"},
		{nil, []string{"--handler", "k=https://hooks.example.com/x", "--webhook-allow-host", "hooks.example.com"}, "sign their requests"},
		{map[string]string{webhookSecretEnv: "short"}, []string{"--handler", "k=https://hooks.example.com/x", "--webhook-allow-host", "hooks.example.com"}, "at least 16"},
		{secret, []string{"--handler", "k=echo hi", "--webhook-allow-host", "hooks.example.com"}, "no handler is a webhook"},
		{secret, []string{"--handler", "k=https://hooks.example.com/x", "--webhook-allow-host", "hooks.example.com:99999"}, "port"},
		{secret, []string{"--server", "http://127.0.0.1:9", "--handler", "k=https://hooks.example.com/x", "--webhook-allow-host", "hooks.example.com"}, "remote worker"},
	} {
		r := try(tc.env, tc.args...)
		if r.code == 0 || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("work %s: want a refusal containing %q, got %s", strings.Join(tc.args, " "), tc.want, r)
		}
	}
}

func TestWebhookURL(t *testing.T) {
	for _, tc := range []struct {
		argv []string
		url  string
	}{
		{shellArgv("https://hooks.example.com/x"), "https://hooks.example.com/x"},
		{shellArgv("  http://10.0.0.1:8080/ "), "http://10.0.0.1:8080/"},
		{[]string{"https://hooks.example.com/x"}, "https://hooks.example.com/x"},
		{shellArgv("curl https://hooks.example.com/x"), ""},
		{[]string{"curl", "https://hooks.example.com/x"}, ""},
		{shellArgv("./https://x"), ""},
	} {
		got, ok := webhookURL(tc.argv)
		if got != tc.url || ok != (tc.url != "") {
			t.Errorf("webhookURL(%q) = %q, %v; want %q", tc.argv, got, ok, tc.url)
		}
	}
}

// The attempt's span context goes out as traceparent.
func TestWebhookInjectTrace(t *testing.T) {
	tid, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	sid, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	ctx := trace.ContextWithSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled}))
	h := http.Header{}
	injectTrace(ctx, h, &core.Job{})
	if got := h.Get("traceparent"); got != "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01" {
		t.Fatalf("traceparent %q", got)
	}
	h = http.Header{}
	injectTrace(context.Background(), h, &core.Job{})
	if len(h) != 0 {
		t.Fatalf("without a span: %v", h)
	}
}
