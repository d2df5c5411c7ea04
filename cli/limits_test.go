package cli

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// dialServe opens a TCP connection to serve's listener at base.
func dialServe(t *testing.T, base string) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c, bufio.NewReader(c)
}

// answer reads one HTTP answer from c within limit.
func answer(c net.Conn, br *bufio.Reader, limit time.Duration) (*http.Response, string, error) {
	_ = c.SetReadDeadline(time.Now().Add(limit))
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return nil, "", err
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(b), err
}

// closedWithin fails unless the server closes c within limit.
func closedWithin(t *testing.T, c net.Conn, br *bufio.Reader, limit time.Duration) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(limit))
	var err error
	for err == nil {
		_, err = br.ReadByte()
	}
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatalf("the server still holds the connection %s later", limit)
	}
}

// TestServeCutsSlowBodies: through serve's real listener, a stalled body
// is answered and its connection closed at --body-timeout, and a request
// without a token is answered 401 before its body arrives and its
// connection closed right after, while the client keeps trickling.
func TestServeCutsSlowBodies(t *testing.T) {
	_, base := startServe(t, tempDB(t), nil, "--admin-token", "adm", "--body-timeout", "400ms")

	c, br := dialServe(t, base)
	start := time.Now()
	fmt.Fprintf(c, "POST /v1/jobs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer adm\r\nContent-Type: application/json\r\nContent-Length: 5000\r\n\r\n{")
	resp, body, err := answer(c, br, 10*time.Second)
	if err != nil {
		t.Fatalf("stalled body: no answer: %v", err)
	}
	if resp.StatusCode != http.StatusBadRequest || time.Since(start) > 5*time.Second {
		t.Fatalf("stalled body answered %d after %s: %s; want 400 at the 400ms deadline", resp.StatusCode, time.Since(start), body)
	}
	closedWithin(t, c, br, 3*time.Second)

	for _, path := range []string{"/v1/jobs", "/metrics", "/dashboard/"} {
		c, br := dialServe(t, base)
		start := time.Now()
		method := "POST"
		if path != "/v1/jobs" {
			method = "GET"
		}
		fmt.Fprintf(c, "%s %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{", method, path)
		stop := make(chan struct{})
		go func() { // a slow client: a byte every 50 ms
			for {
				select {
				case <-stop:
					return
				case <-time.After(50 * time.Millisecond):
					if _, err := c.Write([]byte(" ")); err != nil {
						return
					}
				}
			}
		}()
		resp, _, err := answer(c, br, 10*time.Second)
		if err != nil {
			close(stop)
			t.Fatalf("%s %s with a trickled body: no answer: %v", method, path, err)
		}
		closedWithin(t, c, br, 5*time.Second)
		close(stop)
		if took := time.Since(start); took > 3*time.Second {
			t.Errorf("%s %s (answered %d): connection closed after %s; want at most the 400ms body deadline and the close delay", method, path, resp.StatusCode, took)
		}
	}
}

// TestServeCapsConnections: with --max-connections 2, a third connection
// is not served while two are open, and is served as soon as one closes.
func TestServeCapsConnections(t *testing.T) {
	_, base := startServe(t, tempDB(t), nil, "--max-connections", "2")

	var held []net.Conn
	for range 2 {
		c, _ := dialServe(t, base)
		fmt.Fprintf(c, "GET /healthz HTTP/1.1\r\nHost: x\r\n") // headers never finished
		held = append(held, c)
	}
	time.Sleep(200 * time.Millisecond) // let the server accept both

	c, br := dialServe(t, base)
	fmt.Fprintf(c, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
	if resp, _, err := answer(c, br, time.Second); err == nil {
		t.Fatalf("a third connection was served (%d) while two were open", resp.StatusCode)
	}
	_ = held[0].Close()
	resp, body, err := answer(c, br, 5*time.Second)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("the waiting connection after one closed: %v %v %s", resp, err, body)
	}
}

// TestServeMetricsToken: with --metrics-token (or BACKLOG_METRICS_TOKEN)
// /metrics answers 401 without it and serves it or the admin token.
func TestServeMetricsToken(t *testing.T) {
	_, base := startServe(t, tempDB(t), nil, "--metrics-token", "m3tr1cs", "--admin-token", "adm")
	for _, tc := range []struct {
		token string
		want  int
	}{{"", 401}, {"wrong", 401}, {"m3tr1cs", 200}, {"adm", 200}} {
		code, body := call(t, "GET", base+"/metrics", tc.token, "")
		if code != tc.want {
			t.Errorf("/metrics with token %q: %d; want %d", tc.token, code, tc.want)
		}
		if code == 200 && !strings.Contains(body, "backlog_jobs_submitted_total") && !strings.Contains(body, "backlog_scrape_error") {
			t.Errorf("/metrics with token %q: no backlog metrics:\n%.300s", tc.token, body)
		}
	}
	// A scrape without the token is refused before its body is read, and
	// its connection closed at once (the body deadline is 30 s here).
	c, br := dialServe(t, base)
	start := time.Now()
	fmt.Fprintf(c, "GET /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n{")
	if resp, _, err := answer(c, br, 5*time.Second); err != nil || resp.StatusCode != 401 {
		t.Fatalf("/metrics without the token, with a stalled body: %v %v; want 401 at once", resp, err)
	}
	closedWithin(t, c, br, 3*time.Second)
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("/metrics refused, connection closed after %s; want right after the 401", took)
	}

	// The metrics token is not an API token.
	if code, _ := call(t, "GET", base+"/v1/queues", "m3tr1cs", ""); code != 401 {
		t.Errorf("GET /v1/queues with the metrics token: %d; want 401", code)
	}

	_, base = startServe(t, tempDB(t), map[string]string{"BACKLOG_METRICS_TOKEN": "fromenv"})
	if code, _ := call(t, "GET", base+"/metrics", "", ""); code != 401 {
		t.Errorf("/metrics without the token from BACKLOG_METRICS_TOKEN: %d; want 401", code)
	}
	if code, _ := call(t, "GET", base+"/metrics", "fromenv", ""); code != 200 {
		t.Errorf("/metrics with the token from BACKLOG_METRICS_TOKEN: %d; want 200", code)
	}
}
