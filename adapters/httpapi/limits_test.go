package httpapi

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/internal/teststores"
)

// rawConn opens a TCP connection to the harness's server.
func (h *harness) rawConn() net.Conn {
	h.t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(h.hs.URL, "http://"))
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { _ = c.Close() })
	return c
}

// readAnswer reads one HTTP answer from c, waiting at most limit.
func readAnswer(t *testing.T, c net.Conn, br *bufio.Reader, limit time.Duration) (*http.Response, string, error) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(limit))
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return nil, "", err
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(b), err
}

// waitClosed reports how long it took until the server closed c (a read
// returning EOF or a reset), failing after limit.
func waitClosed(t *testing.T, c net.Conn, br *bufio.Reader, limit time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	_ = c.SetReadDeadline(start.Add(limit))
	_, err := br.ReadByte()
	for err == nil {
		_, err = br.ReadByte()
	}
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatalf("the server still holds the connection %s later", limit)
	}
	return time.Since(start)
}

// TestSlowBodyIsCutOff: a client that sends part of its body and then
// nothing gets an answer once BodyReadTimeout has passed and its
// connection is closed. Without a body deadline the server waits for the
// body for as long as the client keeps the connection.
func TestSlowBodyIsCutOff(t *testing.T) {
	h := newHarness(t, teststores.Memory(t), core.Config{}, Config{BodyReadTimeout: 300 * time.Millisecond})
	c := h.rawConn()
	start := time.Now()
	fmt.Fprintf(c, "POST /v1/jobs HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"kind\":")
	br := bufio.NewReader(c)
	resp, body, err := readAnswer(t, c, br, 5*time.Second)
	if err != nil {
		t.Fatalf("no answer to a stalled body within 5 s: %v", err)
	}
	took := time.Since(start)
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, "did not arrive within 300ms") {
		t.Fatalf("stalled body answered %d %s; want 400 naming the deadline", resp.StatusCode, body)
	}
	if took < 250*time.Millisecond || took > 3*time.Second {
		t.Fatalf("stalled body answered after %s; want about the 300ms deadline", took)
	}
	waitClosed(t, c, br, 3*time.Second)
}

// TestTrickledBodyIsCutOff: a body sent a byte at a time, each byte well
// within any per-read timeout, is still cut off at the deadline for the
// whole body.
func TestTrickledBodyIsCutOff(t *testing.T) {
	h := newHarness(t, teststores.Memory(t), core.Config{}, Config{BodyReadTimeout: 400 * time.Millisecond})
	c := h.rawConn()
	start := time.Now()
	fmt.Fprintf(c, "POST /v1/jobs HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n")
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
				if _, err := c.Write([]byte(" ")); err != nil {
					return
				}
			}
		}
	}()
	br := bufio.NewReader(c)
	resp, _, err := readAnswer(t, c, br, 5*time.Second)
	if err != nil {
		t.Fatalf("no answer to a trickled body within 5 s: %v", err)
	}
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("trickled body answered %d; want 400", resp.StatusCode)
	}
	waitClosed(t, c, br, 3*time.Second)
	if took := time.Since(start); took > 4*time.Second {
		t.Fatalf("connection closed after %s; want about the 400ms deadline", took)
	}
}

// TestUnauthenticatedBodyIsNotRead: a request without a valid token gets
// its 401 at once, before its body has arrived, and the connection is
// closed right after, without waiting for (or draining) the body.
func TestUnauthenticatedBodyIsNotRead(t *testing.T) {
	h := newHarness(t, teststores.Memory(t), core.Config{}, Config{Tokens: Tokens{Admin: "secret"}, BodyReadTimeout: time.Minute})
	for _, tc := range []struct{ name, auth, path string }{
		{"no token", "", "/v1/jobs"},
		{"bad token", "Authorization: Bearer wrong\r\n", "/v1/jobs"},
		{"unknown route", "Authorization: Bearer secret\r\n", "/v1/nothing"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := h.rawConn()
			start := time.Now()
			// 100 kB declared (below the 256 KiB net/http drains after an
			// answer), 10 bytes sent.
			fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: x\r\n%sContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{\"kind\":1", tc.path, tc.auth)
			stop := make(chan struct{})
			defer close(stop)
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
			br := bufio.NewReader(c)
			resp, _, err := readAnswer(t, c, br, 5*time.Second)
			if err != nil {
				t.Fatalf("no answer: %v", err)
			}
			if resp.StatusCode != http.StatusUnauthorized && resp.StatusCode != http.StatusNotFound {
				t.Fatalf("answered %d; want 401 or 404", resp.StatusCode)
			}
			if !resp.Close {
				t.Errorf("the answer does not say Connection: close")
			}
			waitClosed(t, c, br, 3*time.Second)
			if took := time.Since(start); took > 2*time.Second {
				t.Fatalf("connection closed %s after the request; want right after the answer", took)
			}
		})
	}
}

// TestLongPollOutlivesTheDeadlines: a claim waiting longer than both the
// body and the write timeouts still answers (its write deadline is
// extended by MaxClaimWait, and the passed body deadline does not cancel
// its context), and the next request on the same connection is served.
func TestLongPollOutlivesTheDeadlines(t *testing.T) {
	h := newHarness(t, teststores.Memory(t), core.Config{}, Config{BodyReadTimeout: 100 * time.Millisecond, WriteTimeout: 200 * time.Millisecond})
	h.register("w", map[string]any{"queues": []string{"default"}})
	c := h.rawConn()
	br := bufio.NewReader(c)
	body := `{"wait_seconds":0.8}`
	start := time.Now()
	fmt.Fprintf(c, "POST /v1/workers/w/claim HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	resp, text, err := readAnswer(t, c, br, 5*time.Second)
	if err != nil {
		t.Fatalf("long-poll: %v", err)
	}
	if resp.StatusCode != 200 || time.Since(start) < 700*time.Millisecond {
		t.Fatalf("long-poll answered %d after %s: %s; want 200 after the 0.8 s wait", resp.StatusCode, time.Since(start), text)
	}
	// The connection is reusable: the deadlines are renewed per request.
	time.Sleep(300 * time.Millisecond)
	fmt.Fprintf(c, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
	if resp, text, err := readAnswer(t, c, br, 5*time.Second); err != nil || resp.StatusCode != 200 {
		t.Fatalf("second request on the connection: %v %v %s", resp, err, text)
	}
}

// TestGetOutlivesTheBodyDeadline: a request without a body whose handler
// takes longer than BodyReadTimeout is not cancelled by it.
func TestGetOutlivesTheBodyDeadline(t *testing.T) {
	st := &countingStore{Store: teststores.Memory(t), gate: make(chan struct{})}
	h := newHarness(t, st, core.Config{}, Config{BodyReadTimeout: 100 * time.Millisecond, StatsCacheTTL: -1})
	go func() { time.Sleep(500 * time.Millisecond); close(st.gate) }()
	if r := h.do("GET", "/v1/queues", nil); r.status != 200 {
		t.Fatalf("GET /v1/queues slower than the body deadline: %d %s", r.status, r.body)
	}
}
