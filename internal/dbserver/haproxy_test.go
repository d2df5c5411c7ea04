//go:build linux

package dbserver

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// TestHAProxyHTTP puts two HTTP servers behind HAProxy, sends requests
// through it without pause, and closes one server: every request must
// still succeed (a refused connection is sent to the other server), the
// closed one must be marked down within about a second, and the survivor
// answers everything after that. Then haproxy itself is killed and started
// again on the same port.
func TestHAProxyHTTP(t *testing.T) {
	t.Parallel()
	var hits [2]atomic.Int64
	var srvs [2]*httptest.Server
	for i := range srvs {
		srvs[i] = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/healthz" {
				hits[i].Add(1)
			}
			fmt.Fprintf(w, "server %d", i)
		}))
		t.Cleanup(srvs[i].Close)
	}
	h := HAProxyFor(t, HAProxyOptions{Backends: []string{srvs[0].Listener.Addr().String(), srvs[1].Listener.Addr().String()}})
	if h.Port() == 0 || h.URL() != "http://127.0.0.1:"+fmt.Sprint(h.Port()) {
		t.Fatalf("port %d, URL %s", h.Port(), h.URL())
	}
	ctx := context.Background()
	waitStatus(t, h, map[string]string{"s1": "UP", "s2": "UP"}, 5*time.Second)

	hc := &http.Client{Timeout: 5 * time.Second}
	get := func() (string, error) {
		resp, err := hc.Get(h.URL() + "/work")
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			return "", fmt.Errorf("status %d: %s", resp.StatusCode, b)
		}
		return string(b), err
	}
	for range 20 {
		if _, err := get(); err != nil {
			t.Fatal(err)
		}
	}
	if hits[0].Load() == 0 || hits[1].Load() == 0 {
		t.Fatalf("round robin: hits %d and %d, want both > 0", hits[0].Load(), hits[1].Load())
	}

	// Requests without pause while server 1 goes away.
	var (
		mu     sync.Mutex
		errs   []string
		lastS1 time.Time
		n      int
	)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				body, err := get()
				mu.Lock()
				n++
				if err != nil {
					errs = append(errs, err.Error())
				} else if body == "server 1" {
					lastS1 = time.Now()
				}
				mu.Unlock()
			}
		}()
	}
	time.Sleep(200 * time.Millisecond)
	killed := time.Now()
	srvs[1].CloseClientConnections()
	srvs[1].Close()
	down := waitStatus(t, h, map[string]string{"s2": "DOWN"}, 5*time.Second)
	time.Sleep(500 * time.Millisecond)
	close(stop)
	wg.Wait()
	t.Logf("%d requests; server 2 closed, marked down after %s; last answer from it %s after the close; %d errors",
		n, down.Sub(killed).Round(time.Millisecond), lastS1.Sub(killed).Round(time.Millisecond), len(errs))
	if len(errs) > 0 {
		t.Errorf("%d of %d requests failed while a backend went away: %v", len(errs), n, errs[:min(len(errs), 5)])
	}
	if d := down.Sub(killed); d > 2*time.Second {
		t.Errorf("the closed backend was marked down after %s, want about a second", d)
	}
	st, err := h.Servers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st[1].Redispatches+st[1].Retries+st[1].ConnErrors == 0 && st[1].Status != "DOWN" {
		t.Errorf("server states %+v", st)
	}

	// Kill haproxy and start it again on the same port.
	pid := h.PID()
	if err := h.Kill(); err != nil {
		t.Fatal(err)
	}
	if _, err := get(); err == nil {
		t.Fatal("a request succeeded with haproxy killed")
	}
	if err := h.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if h.PID() == pid || h.PID() == 0 {
		t.Fatalf("pid %d after a restart (was %d)", h.PID(), pid)
	}
	if body, err := get(); err != nil || body != "server 0" {
		t.Fatalf("after a restart: %q, %v", body, err)
	}
	if err := h.Start(ctx); err == nil {
		t.Fatal("Start of a running haproxy succeeded")
	}
	if _, err := h.Servers(ctx); err != nil {
		t.Fatalf("admin socket after a restart: %v", err)
	}
	if err := h.Stop(StopImmediate); err != nil {
		t.Fatal(err)
	}
	if h.PID() != 0 {
		t.Fatal("running after Stop")
	}

	// A soft stop with a keep-alive connection open: haproxy stops
	// listening and closes the idle connection, well within
	// hard-stop-after.
	if sigUSR1 != syscall.SIGUSR1 {
		t.Fatalf("sigUSR1 is %d, SIGUSR1 is %d here", sigUSR1, syscall.SIGUSR1)
	}
	if err := h.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := get(); err != nil {
		t.Fatal(err)
	}
	begin := time.Now()
	if err := h.Stop(StopFast); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(begin); d > 5*time.Second || h.PID() != 0 {
		t.Fatalf("soft stop took %s, pid %d after it", d, h.PID())
	}
	if log := fileTail(h.LogPath(), 2000); !strings.Contains(log, "Proxy fe stopped") {
		t.Errorf("no soft stop in the log:\n%s", log)
	}
	t.Logf("soft stop took %s", time.Since(begin).Round(time.Millisecond))
}

// TestHAProxyTCPFirst puts two TCP servers behind HAProxy with balance
// first and the second as a backup: every connection goes to the first
// until it dies, then to the second; the connection held to the first is
// cut when it is marked down.
func TestHAProxyTCPFirst(t *testing.T) {
	t.Parallel()
	var ls [2]net.Listener
	var mu sync.Mutex
	var conns []net.Conn
	for i := range ls {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ls[i] = l
		t.Cleanup(func() { l.Close() })
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				mu.Lock()
				conns = append(conns, c)
				mu.Unlock()
				go func() {
					// Health checks connect and close; clients write a line.
					if _, err := bufio.NewReader(c).ReadString('\n'); err == nil {
						fmt.Fprintf(c, "server %d\n", i)
					}
				}()
			}
		}()
	}
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	h := HAProxyFor(t, HAProxyOptions{Mode: HAProxyTCP, Balance: BalanceFirst,
		Backends: []string{ls[0].Addr().String()}, Backups: []string{ls[1].Addr().String()}})
	waitStatus(t, h, map[string]string{"s1": "UP", "s2": "UP"}, 5*time.Second)
	if h.Kind() != KindHAProxy || h.DSN() != "tcp://"+h.Addr() || h.DriverDSN("test") != h.Addr() {
		t.Errorf("kind %s, DSN %s, driver DSN %s", h.Kind(), h.DSN(), h.DriverDSN("test"))
	}
	if err := h.CreateDatabase(context.Background(), "x"); err == nil {
		t.Error("CreateDatabase on HAProxy succeeded")
	}
	ask := func() (string, error) {
		c, err := net.DialTimeout("tcp", h.Addr(), 2*time.Second)
		if err != nil {
			return "", err
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(3 * time.Second))
		if _, err := io.WriteString(c, "hello\n"); err != nil {
			return "", err
		}
		s, err := bufio.NewReader(c).ReadString('\n')
		return strings.TrimSpace(s), err
	}
	for range 5 {
		if s, err := ask(); err != nil || s != "server 0" {
			t.Fatalf("with both up: %q, %v; want server 0", s, err)
		}
	}
	// A connection held open to the first server.
	held, err := net.Dial("tcp", h.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	time.Sleep(100 * time.Millisecond)

	killed := time.Now()
	ls[0].Close()
	waitStatus(t, h, map[string]string{"s1": "DOWN"}, 5*time.Second)
	if s, err := ask(); err != nil || s != "server 1" {
		t.Fatalf("with the first down: %q, %v; want server 1", s, err)
	}
	t.Logf("first backend closed; the backup answered %s later", time.Since(killed).Round(time.Millisecond))
	_ = held.SetReadDeadline(time.Now().Add(3 * time.Second))
	if _, err := held.Read(make([]byte, 1)); err == nil {
		t.Error("the connection held to the dead backend was not cut")
	} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Error("the connection held to the dead backend is still open 3 s after it was marked down")
	}
}

func TestHAProxyUnavailable(t *testing.T) {
	_, err := StartHAProxy(context.Background(), HAProxyOptions{Bin: t.TempDir() + "/haproxy", Backends: []string{"127.0.0.1:1"}})
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("StartHAProxy with a missing program: %v", err)
	}
	if _, err := StartHAProxy(context.Background(), HAProxyOptions{}); err == nil {
		t.Fatal("StartHAProxy without backends succeeded")
	}
}

// waitStatus polls h until each named server has the wanted status and
// returns when that was first seen; it fails t after timeout.
func waitStatus(t *testing.T, h *HAProxy, want map[string]string, timeout time.Duration) time.Time {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var last []HAProxyServer
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		st, err := h.Servers(ctx)
		cancel()
		if err == nil {
			last = st
			ok := 0
			for _, s := range st {
				if w, in := want[s.Name]; in && s.Status == w {
					ok++
				}
			}
			if ok == len(want) {
				return time.Now()
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("servers %+v (last error %v), want %v within %s; log:\n%s", last, err, want, timeout, fileTail(h.LogPath(), 2000))
		}
		time.Sleep(20 * time.Millisecond)
	}
}
