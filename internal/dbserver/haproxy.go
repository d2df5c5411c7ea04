package dbserver

import (
	"bufio"
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// HAProxyMode says what HAProxy forwards.
type HAProxyMode string

const (
	// HAProxyHTTP forwards HTTP requests (job servers): each request goes
	// to a backend of its own, and a backend is healthy while GET
	// HAProxyOptions.HealthPath answers 200.
	HAProxyHTTP HAProxyMode = "http"
	// HAProxyTCP forwards TCP connections (databases): a connection stays
	// on the backend it was sent to, and a backend is healthy while it
	// accepts TCP connections. When a backend is marked down, the
	// connections HAProxy holds to it are cut, so clients reconnect to
	// another one.
	HAProxyTCP HAProxyMode = "tcp"
)

// HAProxyBalance is HAProxy's load-balancing algorithm.
type HAProxyBalance string

const (
	// BalanceRoundRobin sends each request (connection) to the next
	// healthy backend in turn.
	BalanceRoundRobin HAProxyBalance = "roundrobin"
	// BalanceFirst sends everything to the first healthy backend in the
	// order given: one writer at a time (a primary and its standby, one
	// node of a Galera cluster), the next one taking over when it is
	// marked down.
	BalanceFirst HAProxyBalance = "first"
)

// HAProxyOptions configures a private HAProxy. Backends is required; the
// rest has defaults.
type HAProxyOptions struct {
	// Backends are the servers' addresses (host:port), in order.
	Backends []string
	// Backups are servers (host:port) that get traffic only while no
	// server of Backends is healthy.
	Backups []string
	// Mode is HAProxyHTTP (the default) or HAProxyTCP.
	Mode HAProxyMode
	// Balance is BalanceRoundRobin (the default) or BalanceFirst.
	Balance HAProxyBalance
	// HealthPath is the path of the HTTP health check (HAProxyHTTP
	// only); "" means /healthz.
	HealthPath string
	// CheckInterval is the time between two health checks of a backend;
	// 0 means 500 ms. A backend is marked down after Fall failed checks in
	// a row (0 means 2) and up again after Rise good ones (0 means 1), so a
	// dead backend leaves the rotation within about CheckInterval × Fall.
	CheckInterval time.Duration
	Fall, Rise    int
	// CheckTimeout bounds one health check once connected; 0 means 2 s. A
	// backend that stops answering without refusing connections leaves
	// the rotation after about Fall × CheckTimeout; a dead one refuses at
	// once. A check slower than this on a merely busy backend counts as a
	// failure, so keep it well above the health path's latency under load.
	CheckTimeout time.Duration
	// ConnectTimeout bounds a connection to a backend (and a health
	// check's); 0 means 1 s. A refused or timed-out connection is retried
	// (3 times) on another backend, which is safe for any request since
	// none of it reached a backend.
	ConnectTimeout time.Duration
	// IdleTimeout is how long a connection may stay silent on either side:
	// 0 means 5 minutes for HTTP (long-polling claims wait up to a minute)
	// and an hour for TCP (pooled database connections).
	IdleTimeout time.Duration
	// Port is the frontend's TCP port on 127.0.0.1; 0 picks a free one
	// (as for database servers, below the ephemeral range).
	Port int
	// Dir holds the configuration, the admin socket and the log. It must
	// not exist yet or be empty; "" makes a temporary directory, which
	// Close removes.
	Dir string
	// Bin is the haproxy program; "" means haproxy on PATH, else
	// /usr/sbin/haproxy.
	Bin string
	// StartTimeout bounds each start until the frontend accepts
	// connections; 0 means 30 s.
	StartTimeout time.Duration
}

// HAProxy is one private HAProxy process (Debian's haproxy, run in the
// foreground as a child of the calling process with the configuration
// StartHAProxy wrote). It listens on 127.0.0.1:Port and forwards to the
// backends given. Its methods are safe for concurrent use.
type HAProxy struct {
	bin          string
	dir          string
	ownsDir      bool
	cfgPath      string
	sockPath     string
	logPath      string
	port         int
	startTimeout time.Duration

	mu     sync.Mutex // serialises Start, Stop, Kill, Close
	proc   *process
	closed bool
}

// StartHAProxy writes an HAProxy configuration for opts and starts haproxy
// on it, waiting until the frontend accepts connections (the backends may
// be down: HAProxy marks them so after Fall checks). Errors wrap
// ErrUnavailable when haproxy is not installed (scripts/install-cluster-packages.sh
// installs it) or the platform is not Linux; on any error nothing is left
// behind. Close it when done.
func StartHAProxy(ctx context.Context, opts HAProxyOptions) (*HAProxy, error) {
	if runtime.GOOS != "linux" {
		return nil, fmt.Errorf("%w: private servers need Linux, this is %s", ErrUnavailable, runtime.GOOS)
	}
	bin := opts.Bin
	if bin == "" {
		var ok bool
		if bin, ok = lookBin("haproxy", "/usr/sbin/haproxy"); !ok {
			return nil, fmt.Errorf("%w: haproxy not found on PATH or in /usr/sbin (apt-get install haproxy, or scripts/install-cluster-packages.sh)", ErrUnavailable)
		}
	} else if _, ok := lookBin(bin); !ok {
		return nil, fmt.Errorf("%w: haproxy program %s not found", ErrUnavailable, bin)
	}
	if len(opts.Backends) == 0 {
		return nil, errors.New("dbserver: HAProxy needs at least one backend")
	}
	for _, a := range append(append([]string(nil), opts.Backends...), opts.Backups...) {
		if _, _, err := net.SplitHostPort(a); err != nil || strings.ContainsAny(a, " \t\n#") {
			return nil, fmt.Errorf("dbserver: HAProxy backend %q: want host:port", a)
		}
	}
	switch opts.Mode {
	case "":
		opts.Mode = HAProxyHTTP
	case HAProxyHTTP, HAProxyTCP:
	default:
		return nil, fmt.Errorf("dbserver: HAProxy mode %q: want http or tcp", opts.Mode)
	}
	switch opts.Balance {
	case "":
		opts.Balance = BalanceRoundRobin
	case BalanceRoundRobin, BalanceFirst:
	default:
		return nil, fmt.Errorf("dbserver: HAProxy balance %q: want roundrobin or first", opts.Balance)
	}
	if opts.HealthPath == "" {
		opts.HealthPath = "/healthz"
	}
	if !strings.HasPrefix(opts.HealthPath, "/") || strings.ContainsAny(opts.HealthPath, " \t\n#") {
		return nil, fmt.Errorf("dbserver: HAProxy health path %q: want an absolute path without spaces", opts.HealthPath)
	}

	h := &HAProxy{bin: bin, port: opts.Port, startTimeout: opts.StartTimeout}
	if h.startTimeout <= 0 {
		h.startTimeout = 30 * time.Second
	}
	if opts.Dir == "" {
		d, err := os.MkdirTemp("", "backlog-haproxy-")
		if err != nil {
			return nil, fmt.Errorf("dbserver: %w", err)
		}
		h.dir, h.ownsDir = d, true
	} else {
		d, err := filepath.Abs(opts.Dir)
		if err != nil {
			return nil, fmt.Errorf("dbserver: %w", err)
		}
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("dbserver: %w", err)
		}
		if ents, err := os.ReadDir(d); err != nil || len(ents) > 0 {
			return nil, fmt.Errorf("dbserver: directory %s must be empty (%v)", d, err)
		}
		h.dir = d
	}
	h.cfgPath = filepath.Join(h.dir, "haproxy.cfg")
	h.sockPath = filepath.Join(h.dir, "admin.sock")
	h.logPath = filepath.Join(h.dir, "haproxy.log")

	pickPort := opts.Port == 0
	var err error
	for range 4 {
		if pickPort {
			if h.port, err = freePort(); err != nil {
				break
			}
		}
		if err = os.WriteFile(h.cfgPath, []byte(haproxyConfig(opts, h.port, h.sockPath)), 0o600); err != nil {
			err = fmt.Errorf("dbserver: %w", err)
			break
		}
		h.mu.Lock()
		err = h.startLocked(ctx)
		h.mu.Unlock()
		if err == nil || !pickPort || !strings.Contains(strings.ToLower(err.Error()), "address already in use") {
			break
		}
	}
	if err != nil {
		_ = h.Close()
		return nil, err
	}
	return h, nil
}

// haproxyConfig renders the configuration of opts.
func haproxyConfig(opts HAProxyOptions, port int, sock string) string {
	inter := opts.CheckInterval
	if inter <= 0 {
		inter = 500 * time.Millisecond
	}
	fall, rise := opts.Fall, opts.Rise
	if fall <= 0 {
		fall = 2
	}
	if rise <= 0 {
		rise = 1
	}
	connect := opts.ConnectTimeout
	if connect <= 0 {
		connect = time.Second
	}
	check := opts.CheckTimeout
	if check <= 0 {
		check = 2 * time.Second
	}
	idle := opts.IdleTimeout
	if idle <= 0 {
		idle = 5 * time.Minute
		if opts.Mode == HAProxyTCP {
			idle = time.Hour
		}
	}
	ms := func(d time.Duration) string { return strconv.FormatInt(max(d.Milliseconds(), 1), 10) + "ms" }

	var b strings.Builder
	fmt.Fprintf(&b, "# Written by internal/dbserver (StartHAProxy).\n")
	fmt.Fprintf(&b, "global\n")
	fmt.Fprintf(&b, "    maxconn 4096\n")
	fmt.Fprintf(&b, "    stats socket %s mode 600 level admin\n", sock)
	fmt.Fprintf(&b, "\ndefaults\n")
	fmt.Fprintf(&b, "    mode %s\n", opts.Mode)
	fmt.Fprintf(&b, "    timeout connect %s\n", ms(connect))
	fmt.Fprintf(&b, "    timeout check %s\n", ms(check))
	fmt.Fprintf(&b, "    timeout client %s\n", ms(idle))
	fmt.Fprintf(&b, "    timeout server %s\n", ms(idle))
	if opts.Mode == HAProxyHTTP {
		fmt.Fprintf(&b, "    timeout http-request 30s\n")
		fmt.Fprintf(&b, "    timeout http-keep-alive %s\n", ms(idle))
	}
	// A connection refused or timed out is tried again, on another server
	// from the second try on: nothing of the request reached a server.
	fmt.Fprintf(&b, "    retries 3\n")
	fmt.Fprintf(&b, "    option redispatch 1\n")
	fmt.Fprintf(&b, "\nfrontend fe\n")
	fmt.Fprintf(&b, "    bind 127.0.0.1:%d\n", port)
	fmt.Fprintf(&b, "    default_backend be\n")
	fmt.Fprintf(&b, "\nbackend be\n")
	fmt.Fprintf(&b, "    balance %s\n", opts.Balance)
	if opts.Mode == HAProxyHTTP {
		fmt.Fprintf(&b, "    option httpchk GET %s\n", opts.HealthPath)
		fmt.Fprintf(&b, "    http-check expect status 200\n")
	}
	fmt.Fprintf(&b, "    default-server check inter %s fastinter %s downinter %s fall %d rise %d on-marked-down shutdown-sessions\n",
		ms(inter), ms(inter), ms(inter), fall, rise)
	n := 0
	for _, a := range opts.Backends {
		n++
		fmt.Fprintf(&b, "    server s%d %s\n", n, a)
	}
	for _, a := range opts.Backups {
		n++
		fmt.Fprintf(&b, "    server s%d %s backup\n", n, a)
	}
	return b.String()
}

// Port is the frontend's TCP port on 127.0.0.1; it stays the same across
// restarts.
func (h *HAProxy) Port() int { return h.port }

// Addr is the frontend's address, 127.0.0.1:PORT.
func (h *HAProxy) Addr() string { return "127.0.0.1:" + strconv.Itoa(h.port) }

// URL is the frontend's base URL for HTTP mode: http://127.0.0.1:PORT.
func (h *HAProxy) URL() string { return "http://" + h.Addr() }

// Dir is the directory holding the configuration, the admin socket and
// the log.
func (h *HAProxy) Dir() string { return h.dir }

// ConfigPath is the configuration file StartHAProxy wrote.
func (h *HAProxy) ConfigPath() string { return h.cfgPath }

// LogPath is haproxy's output (its warnings, among them every backend
// marked down or up), across restarts.
func (h *HAProxy) LogPath() string { return h.logPath }

// PID is the process id of the running haproxy, or 0 when it is not
// running.
func (h *HAProxy) PID() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.proc == nil || h.proc.exited() {
		return 0
	}
	return h.proc.pid
}

// Start starts the stopped or killed haproxy again on the same port and
// configuration and waits until its frontend accepts connections. It
// returns an error if it is running or closed, or does not come up within
// StartTimeout.
func (h *HAProxy) Start(ctx context.Context) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return errors.New("dbserver: Start on a closed HAProxy")
	}
	if h.proc != nil && !h.proc.exited() {
		return errors.New("dbserver: Start: HAProxy is running")
	}
	return h.startLocked(ctx)
}

// Stop stops haproxy at once (SIGTERM, HAProxy's hard stop: open
// connections are closed) and waits until it has exited (at most 10 s;
// then it is killed and an error returned). Stopping a haproxy that is not
// running does nothing.
func (h *HAProxy) Stop() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	p := h.proc
	if p == nil || p.exited() {
		h.proc = nil
		return nil
	}
	_ = p.signal(syscall.SIGTERM)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.wait(ctx); err != nil {
		_ = p.killTree()
		h.proc = nil
		return fmt.Errorf("dbserver: haproxy did not stop on SIGTERM, killed it: %w", err)
	}
	h.proc = nil
	return nil
}

// Kill sends SIGKILL to haproxy and waits until it is gone (at most 30 s).
// Killing a haproxy that is not running does nothing.
func (h *HAProxy) Kill() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.killLocked()
}

func (h *HAProxy) killLocked() error {
	p := h.proc
	h.proc = nil
	if p == nil || p.exited() {
		return nil
	}
	return p.killTree()
}

// Close kills haproxy if it runs and removes its directory when
// StartHAProxy made it. It is idempotent; after Close, Start fails.
func (h *HAProxy) Close() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil
	}
	h.closed = true
	err := h.killLocked()
	if h.ownsDir {
		if rerr := os.RemoveAll(h.dir); rerr != nil && err == nil {
			err = fmt.Errorf("dbserver: remove %s: %w", h.dir, rerr)
		}
	}
	return err
}

// startLocked spawns haproxy in the foreground (-db) and waits until its
// frontend accepts connections.
func (h *HAProxy) startLocked(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, h.startTimeout)
	defer cancel()
	// A socket left by a killed haproxy would be taken for a live one.
	_ = os.Remove(h.sockPath)
	logf, err := os.OpenFile(h.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("dbserver: %w", err)
	}
	defer logf.Close() // the child keeps its own descriptor
	argv := []string{h.bin, "-db", "-f", h.cfgPath}
	fmt.Fprintf(logf, "\n===== dbserver: %s starting: %s\n", time.Now().Format(time.RFC3339Nano), strings.Join(argv, " "))
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = h.dir
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = sysProcAttr(nil, true)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("dbserver: start %s: %w", h.bin, err)
	}
	p := &process{pid: cmd.Process.Pid, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	h.proc = p
	for {
		c, err := net.DialTimeout("tcp", h.Addr(), time.Second)
		if err == nil {
			c.Close()
			return nil
		}
		select {
		case <-p.done:
			h.proc = nil
			return fmt.Errorf("dbserver: haproxy exited while starting (%v); end of %s:\n%s", p.err, h.logPath, fileTail(h.logPath, 3000))
		case <-ctx.Done():
			_ = h.killLocked()
			return fmt.Errorf("dbserver: haproxy did not accept connections in time (last error: %v); end of %s:\n%s", err, h.logPath, fileTail(h.logPath, 3000))
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// HAProxyServer is the state of one backend as HAProxy sees it.
type HAProxyServer struct {
	Name   string // s1, s2, … in the order of Backends then Backups
	Addr   string // host:port
	Backup bool
	// Status is HAProxy's: "UP", "DOWN", "UP 1/2" (going down), "DOWN
	// 1/2" (coming up), "MAINT", "no check".
	Status string
	// Sessions is the number of requests (HTTP) or connections (TCP) sent
	// to this backend since haproxy started.
	Sessions int64
	// Retries and Redispatches count the connection attempts to this
	// backend that were tried again on it or sent to another backend.
	Retries, Redispatches int64
	// ConnErrors counts failed connections to it, ResponseErrors the
	// responses it did not complete.
	ConnErrors, ResponseErrors int64
}

// Servers returns the state of every backend, read from haproxy's admin
// socket ("show stat"), in the order they were given.
func (h *HAProxy) Servers(ctx context.Context) ([]HAProxyServer, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", h.sockPath)
	if err != nil {
		return nil, fmt.Errorf("dbserver: haproxy admin socket: %w", err)
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(dl)
	} else {
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	}
	if _, err := io.WriteString(c, "show stat\n"); err != nil {
		return nil, fmt.Errorf("dbserver: haproxy admin socket: %w", err)
	}
	r := bufio.NewReader(c)
	head, err := r.ReadString('\n')
	if err != nil {
		return nil, fmt.Errorf("dbserver: haproxy show stat: %w", err)
	}
	cols := strings.Split(strings.TrimSpace(strings.TrimPrefix(head, "# ")), ",")
	idx := map[string]int{}
	for i, c := range cols {
		idx[c] = i
	}
	for _, need := range []string{"pxname", "svname", "status", "stot", "wretr", "wredis", "econ", "eresp", "bck", "addr"} {
		if _, ok := idx[need]; !ok {
			return nil, fmt.Errorf("dbserver: haproxy show stat: no column %q in %q", need, head)
		}
	}
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = -1
	var out []HAProxyServer
	for {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("dbserver: haproxy show stat: %w", err)
		}
		get := func(c string) string {
			if i := idx[c]; i < len(rec) {
				return rec[i]
			}
			return ""
		}
		num := func(c string) int64 { n, _ := strconv.ParseInt(get(c), 10, 64); return n }
		if get("pxname") != "be" || get("svname") == "BACKEND" {
			continue
		}
		out = append(out, HAProxyServer{
			Name: get("svname"), Addr: get("addr"), Backup: get("bck") == "1", Status: get("status"),
			Sessions: num("stot"), Retries: num("wretr"), Redispatches: num("wredis"),
			ConnErrors: num("econ"), ResponseErrors: num("eresp"),
		})
	}
	return out, nil
}

// HAProxyFor starts a private HAProxy for t (StartHAProxy) and closes it
// when t ends. It skips t when haproxy cannot run here (ErrUnavailable),
// failing it instead when BACKLOG_REQUIRE_DBS=1, and fails t on any other
// error.
func HAProxyFor(t testing.TB, opts HAProxyOptions) *HAProxy {
	t.Helper()
	h, err := StartHAProxy(context.Background(), opts)
	if err != nil {
		Unavailable(t, "HAProxy", err)
	}
	t.Cleanup(func() {
		if err := h.Close(); err != nil {
			t.Errorf("dbserver: close HAProxy: %v", err)
		}
	})
	return h
}
