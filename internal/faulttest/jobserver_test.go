//go:build linux

package faulttest

import (
	"context"
	"fmt"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// jobServer is one `backlog serve` process that remote workers
// (`backlog work --server`) reach: the cluster's own when it has one, or
// one of several behind a proxy (jobServers). It runs no handlers of its
// own; it is killed and started again on the same address.
type jobServer struct {
	addr  string // 127.0.0.1:port, the same across restarts
	name  string // its log files are NAME-GEN.log; "" means serve
	bin   string
	db    string
	dir   string
	lease time.Duration
	env   []string
	gen   int
	pid   int
	done  chan struct{} // closed once the current process was reaped
}

// url is the job server's base URL.
func (s *jobServer) url() string { return "http://" + s.addr }

// freeAddr returns a loopback address with a port nobody listens on now.
func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// startServer starts (or starts again) the cluster's job server on the
// cluster's store and waits until it answers /healthz.
func (c *cluster) startServer(ctx context.Context) error {
	s := c.server
	s.bin, s.db, s.dir, s.lease, s.env = c.bin, c.db, c.dir, c.lease, c.env()
	return s.start(ctx)
}

// start starts (or starts again) the job server and waits until it
// answers /healthz.
func (s *jobServer) start(ctx context.Context) error {
	s.gen++
	name := s.name
	if name == "" {
		name = "serve"
	}
	logPath := filepath.Join(s.dir, fmt.Sprintf("%s-%d.log", name, s.gen))
	f, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer f.Close()
	cmd := exec.Command(s.bin, "--db", s.db, "--log-level", "warn", "serve",
		"--listen", s.addr, "--no-dashboard", "--lease", s.lease.String(), "--poll-interval", "250ms")
	cmd.Env = s.env
	cmd.Dir = s.dir
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start serve: %w", err)
	}
	done := make(chan struct{})
	s.pid, s.done = cmd.Process.Pid, done
	go func() { _ = cmd.Wait(); close(done) }()
	hc := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-done:
			return fmt.Errorf("serve exited at start: %s", lastLines(logPath, 5))
		case <-ctx.Done():
			return ctx.Err()
		default:
		}
		if resp, err := hc.Get(s.url() + "/healthz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("serve did not answer /healthz within 30s: %s", lastLines(logPath, 5))
}

// killServer SIGKILLs the cluster's job server and waits until it is
// reaped.
func (c *cluster) killServer() { c.server.kill() }

// kill SIGKILLs the job server and waits until it is reaped.
func (s *jobServer) kill() {
	_ = syscall.Kill(s.pid, syscall.SIGKILL)
	<-s.done
}

// stopServer stops the cluster's job server, if it has one; its workers
// must have stopped first, so their outcomes got in.
func (c *cluster) stopServer() {
	if c.server != nil {
		c.server.stop()
	}
}

// stop stops the job server (SIGTERM, SIGKILL after 20 s) unless it was
// never started or has exited.
func (s *jobServer) stop() {
	if s.done == nil {
		return
	}
	select {
	case <-s.done:
		return // reaped: its pid may belong to another process now
	default:
	}
	_ = syscall.Kill(s.pid, syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(20 * time.Second):
		_ = syscall.Kill(s.pid, syscall.SIGKILL)
		<-s.done
	}
}

// killServers is the disruption of TestServerKills: every 2–4 s it
// SIGKILLs the job server under the remote workers (claims, heartbeats and
// outcomes in flight, some answered by nobody) and starts it again on the
// same address 0.2–1 s later, until the jobs are done or the kill window
// has passed. Each time the server is unreachable counts as an outage
// (plus a third of the lease, as for the database), since a remote worker
// that cannot renew a lease stops its handler, as promised.
func killServers(ctx context.Context, r *run) {
	deadline := time.Now().Add(r.cfg.killWindow)
	kills := 0
	defer func() { r.note("job server SIGKILLed %d times", kills) }()
	for time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return
		case <-time.After(2*time.Second + time.Duration(mrand.Int64N(int64(2*time.Second)))):
		}
		from := monoNow()
		r.c.killServer()
		kills++
		time.Sleep(200*time.Millisecond + time.Duration(mrand.Int64N(int64(800*time.Millisecond))))
		var err error
		for try := 0; try < 3; try++ {
			if err = r.c.startServer(context.Background()); err == nil {
				break
			}
		}
		if err != nil {
			r.c.t.Errorf("start the job server again: %v", err)
			return
		}
		to := monoNow()
		r.mu.Lock()
		r.outages = append(r.outages, window{from, to + int64(r.cfg.lease/3)})
		r.mu.Unlock()
	}
	r.note("server kills stopped after the kill window (%s) with jobs left", r.cfg.killWindow)
}
