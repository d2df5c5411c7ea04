package cli

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// startServe runs "backlog --db db serve --listen 127.0.0.1:0 args..." in a
// goroutine with the given environment and returns it with the base URL it
// printed.
func startServe(t *testing.T, db string, vars map[string]string, args ...string) (*worker, string) {
	t.Helper()
	e, out, errb := testEnv("")
	e.getenv = func(k string) string { return vars[k] }
	w := &worker{sigs: make(chan os.Signal, 2), done: make(chan int, 1), stdout: out, stderr: errb}
	e.notifySignals = func() (<-chan os.Signal, func()) { return w.sigs, func() {} }
	ctx, cancel := context.WithCancel(context.Background())
	w.cancel = cancel
	full := append([]string{"--db", db, "--log-level", "warn", "serve", "--listen", "127.0.0.1:0", "--poll-interval", "50ms"}, args...)
	go func() { w.done <- run(ctx, e, full) }()
	t.Cleanup(func() { w.stop(t) })
	apiLine := regexp.MustCompile(`API (http://\S+)/v1/`)
	var base string
	waitFor(t, 20*time.Second, "serve's start lines", func() bool {
		select {
		case code := <-w.done:
			w.stopped = true
			t.Fatalf("serve exited early with %d\nstdout:\n%s\nstderr:\n%s", code, out, errb)
		default:
		}
		if m := apiLine.FindStringSubmatch(out.String()); m != nil && strings.Contains(out.String(), "serving") {
			base = m[1]
			return true
		}
		return false
	})
	return w, base
}

// call makes one HTTP request and returns the status and body.
func call(t *testing.T, method, url, token, body string) (int, string) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestServeRunsTheJobServer: serve prints the dashboard URL, a job
// submitted with plain HTTP runs on a local shell handler, and the
// dashboard, /metrics and /healthz answer on the same listener.
func TestServeRunsTheJobServer(t *testing.T) {
	db := tempDB(t)
	w, base := startServe(t, db, nil, "--handler", `hello=echo "hello, $(cat)"`)
	if !strings.Contains(w.stdout.String(), "dashboard "+base+"/dashboard/") {
		t.Fatalf("serve did not print the dashboard URL:\n%s", w.stdout)
	}

	code, body := call(t, "POST", base+"/v1/jobs", "", `{"kind":"hello","args":{"name":"ann"}}`)
	if code != http.StatusCreated {
		t.Fatalf("submit: %d %s", code, body)
	}
	var sub struct{ Job struct{ ID int64 } }
	if err := json.Unmarshal([]byte(body), &sub); err != nil || sub.Job.ID == 0 {
		t.Fatalf("submit answer %s: %v", body, err)
	}
	var got struct {
		Job struct {
			State  string
			Result json.RawMessage
		}
	}
	waitFor(t, 20*time.Second, "the submitted job to complete", func() bool {
		_, body := call(t, "GET", base+"/v1/jobs/"+itoa(sub.Job.ID), "", "")
		_ = json.Unmarshal([]byte(body), &got)
		return got.Job.State == "completed"
	})
	if !strings.Contains(string(got.Job.Result), `hello, {\"name\":\"ann\"}`) {
		t.Errorf("result %s; want the handler's stdout", got.Job.Result)
	}

	if code, body := call(t, "GET", base+"/dashboard/", "", ""); code != 200 || !strings.Contains(body, "<html") {
		t.Errorf("dashboard: %d %.200s", code, body)
	}
	req, _ := http.NewRequest("GET", base+"/", nil)
	resp, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != "/dashboard/" {
		t.Errorf("GET / answered %d to %q; want a redirect to /dashboard/", resp.StatusCode, resp.Header.Get("Location"))
	}
	code, body = call(t, "GET", base+"/metrics", "", "")
	for _, want := range []string{`backlog_jobs{queue="default",state="completed"} 1`, "backlog_jobs_completed_total", "go_goroutines"} {
		if code != 200 || !strings.Contains(body, want) {
			t.Errorf("/metrics (%d) lacks %q", code, want)
		}
	}
	if code, body := call(t, "GET", base+"/healthz", "", ""); code != 200 {
		t.Errorf("/healthz: %d %s", code, body)
	}
	if code, body := call(t, "GET", base+"/nope", "", ""); code != 404 || !strings.Contains(body, "not-found") {
		t.Errorf("unknown path: %d %s; want a problem+json 404", code, body)
	}
	if c := w.stop(t); c != 0 {
		t.Fatalf("serve exit %d\n%s\n%s", c, w.stdout, w.stderr)
	}
}

// TestServeWithoutHandlersClaimsNothing: with no --handler, serve only
// hosts the API; jobs wait for remote workers.
func TestServeWithoutHandlersClaimsNothing(t *testing.T) {
	db := tempDB(t)
	w, base := startServe(t, db, nil)
	if !strings.Contains(w.stdout.String(), "no local handlers") {
		t.Errorf("start line does not say it has no handlers:\n%s", w.stdout)
	}
	if code, body := call(t, "POST", base+"/v1/jobs", "", `{"kind":"anything"}`); code != 201 {
		t.Fatalf("submit: %d %s", code, body)
	}
	time.Sleep(300 * time.Millisecond) // six poll intervals
	if c := counts(t, openStore(t, db)); c["available"] != 1 {
		t.Fatalf("counts %v; the job must wait for a remote worker", c)
	}
}

// TestServeTokens: a non-loopback listener needs a token; with tokens set,
// requests without one get 401 and the right token works, from a flag or
// the environment.
func TestServeTokens(t *testing.T) {
	db := tempDB(t)
	for _, listen := range []string{"0.0.0.0:0", ":0", "[::]:0", "192.0.2.1:8080"} {
		r := cli(t, db, "serve", "--listen", listen)
		if r.code != 2 || !strings.Contains(r.stderr, "refusing to listen on "+listen+" without a token") {
			t.Errorf("serve --listen %s without a token: %s", listen, r)
		}
	}
	if r := cli(t, db, "serve", "--listen", "nonsense"); r.code != 2 || !strings.Contains(r.stderr, "--listen") {
		t.Errorf("serve --listen nonsense: %s", r)
	}

	_, base := startServe(t, db, map[string]string{"BACKLOG_ADMIN_TOKEN": "adm-secret"}, "--producer-token", "prod-secret")
	if code, body := call(t, "GET", base+"/v1/queues", "", ""); code != 401 || !strings.Contains(body, "unauthorized") {
		t.Errorf("no token: %d %s", code, body)
	}
	if code, body := call(t, "GET", base+"/v1/queues", "wrong", ""); code != 401 {
		t.Errorf("wrong token: %d %s", code, body)
	}
	if code, body := call(t, "POST", base+"/v1/jobs", "prod-secret", `{"kind":"k"}`); code != 201 {
		t.Errorf("producer token: %d %s", code, body)
	}
	if code, body := call(t, "GET", base+"/v1/workers", "prod-secret", ""); code != 403 {
		t.Errorf("producer token on an admin route: %d %s", code, body)
	}
	if code, body := call(t, "GET", base+"/v1/workers", "adm-secret", ""); code != 200 {
		t.Errorf("admin token from BACKLOG_ADMIN_TOKEN: %d %s", code, body)
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// TestServePortTaken: serve on a port another listener holds exits at
// once with "address already in use", before any worker starts: no soft
// stop and no notification listener to fail.
func TestServePortTaken(t *testing.T) {
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	db := tempDB(t)
	start := time.Now()
	r := cli(t, db, "--log-level", "debug", "serve", "--listen", held.Addr().String(), "--handler", "k=true")
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("serve took %s to fail", took)
	}
	if r.code == 0 || !strings.Contains(r.stderr, "address already in use") {
		t.Fatalf("serve on a taken port: %s", r)
	}
	for _, bad := range []string{"client started", "soft stop timed out", "listening for notifications failed", "serving"} {
		if strings.Contains(r.stderr+r.stdout, bad) {
			t.Errorf("output holds %q: %s", bad, r)
		}
	}
}
