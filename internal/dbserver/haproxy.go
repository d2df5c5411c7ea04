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
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// KindHAProxy is an HAProxy in front of several servers (StartHAProxy).
const KindHAProxy Kind = "haproxy"

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

// HAProxy is one private HAProxy (Debian's haproxy, run in the foreground
// as a child of the calling process, as the calling user, with the
// configuration StartHAProxy wrote). It listens on 127.0.0.1:Port and
// forwards to the backends given.
//
// It is a Server of kind KindHAProxy, started, stopped and killed like the
// databases: Start, Kill, Close, PID, Running, Port, Dir and LogPath are
// the Server's. Stop(StopFast) is HAProxy's soft stop (SIGUSR1: the
// frontend stops listening and open connections may finish, for at most
// 10 s); Stop(StopImmediate) its hard stop (SIGTERM: open connections are
// closed at once). DSN and DriverDSN give the frontend's address, not a
// database's: HAProxy does not know the backends' protocol, so DriverName
// is "" and CreateDatabase fails (create databases on a backend). Its
// methods are safe for concurrent use.
type HAProxy struct {
	*Server
	im *haproxyImpl
}

// StartHAProxy writes an HAProxy configuration for opts and starts haproxy
// on it, waiting until the frontend accepts connections (the backends may
// be down: HAProxy marks them so after Fall checks). Errors wrap
// ErrUnavailable when haproxy is not installed (scripts/install-cluster-packages.sh
// installs it) or the platform is not Linux; on any error nothing is left
// behind. Close it when done.
func StartHAProxy(ctx context.Context, opts HAProxyOptions) (*HAProxy, error) {
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
	if opts.StartTimeout <= 0 {
		opts.StartTimeout = 30 * time.Second
	}

	im := &haproxyImpl{bin: bin, opts: opts}
	// haproxy needs no account of its own: as root, it runs as root.
	s, err := newServer(KindHAProxy, Options{Port: opts.Port, Dir: opts.Dir, StartTimeout: opts.StartTimeout}, "root", im)
	if err != nil {
		return nil, err
	}
	im.cfgPath = filepath.Join(s.dir, "haproxy.cfg")
	im.sockPath = filepath.Join(s.dir, "admin.sock")
	s.logPath = filepath.Join(s.dir, "haproxy.log")
	if err := s.startFirst(ctx, opts.Port == 0); err != nil {
		_ = s.Close()
		return nil, err
	}
	return &HAProxy{Server: s, im: im}, nil
}

// haproxyImpl runs haproxy as a Server.
type haproxyImpl struct {
	bin               string
	opts              HAProxyOptions // defaults filled in
	cfgPath, sockPath string
}

// prepare writes the configuration (the port may have changed since the
// last try) and removes the admin socket a killed haproxy left, which
// would be taken for a live one.
func (p *haproxyImpl) prepare(_ context.Context, s *Server) error {
	if err := os.WriteFile(p.cfgPath, []byte(haproxyConfig(p.opts, s.port, p.sockPath)), 0o600); err != nil {
		return fmt.Errorf("dbserver: %w", err)
	}
	if err := os.Remove(p.sockPath); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("dbserver: %w", err)
	}
	return nil
}

// command runs haproxy in the foreground (-db).
func (p *haproxyImpl) command(*Server) []string { return []string{p.bin, "-db", "-f", p.cfgPath} }

// ping returns nil once the frontend accepts a TCP connection.
func (p *haproxyImpl) ping(ctx context.Context, s *Server) error {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", haproxyAddr(s))
	if err != nil {
		return err
	}
	return c.Close()
}

// stop: StopFast is HAProxy's soft stop (SIGUSR1; hard-stop-after in the
// configuration bounds it), StopImmediate its hard stop (SIGTERM).
func (p *haproxyImpl) stop(_ context.Context, _ *Server, proc *process, mode StopMode) error {
	if mode == StopFast {
		return proc.signal(sigUSR1)
	}
	return proc.signal(syscall.SIGTERM)
}

// url is the frontend's base URL, http://127.0.0.1:PORT or
// tcp://127.0.0.1:PORT; there is no database to name.
func (p *haproxyImpl) url(s *Server, _ string) string {
	return string(p.opts.Mode) + "://" + haproxyAddr(s)
}

// driverDSN is the frontend's address: which driver talks through it
// depends on the backends.
func (p *haproxyImpl) driverDSN(s *Server, _ string) string { return haproxyAddr(s) }

func (p *haproxyImpl) driverName() string { return "" }

func (p *haproxyImpl) createDatabase(context.Context, *Server, string) error {
	return errors.New("HAProxy holds no databases: create it on a backend")
}

// sigUSR1 is SIGUSR1 on Linux (amd64, arm64 and most others), the one
// platform where servers run; the syscall package names it on Unix only,
// and this package builds everywhere. TestHAProxyHTTP checks the value.
const sigUSR1 = syscall.Signal(0xa)

func haproxyAddr(s *Server) string { return "127.0.0.1:" + strconv.Itoa(s.port) }

// Addr is the frontend's address, 127.0.0.1:PORT.
func (h *HAProxy) Addr() string { return haproxyAddr(h.Server) }

// URL is the frontend's base URL for HTTP mode: http://127.0.0.1:PORT.
func (h *HAProxy) URL() string { return "http://" + h.Addr() }

// ConfigPath is the configuration file StartHAProxy wrote in Dir.
func (h *HAProxy) ConfigPath() string { return h.im.cfgPath }

// haproxyConfig renders the configuration of opts.
func haproxyConfig(opts HAProxyOptions, port int, sock string) string {
	idle := 5 * time.Minute
	if opts.Mode == HAProxyTCP {
		idle = time.Hour
	}
	ms := func(d, def time.Duration) string {
		if d <= 0 {
			d = def
		}
		return strconv.FormatInt(max(d.Milliseconds(), 1), 10) + "ms"
	}
	inter := ms(opts.CheckInterval, 500*time.Millisecond)
	fall, rise := opts.Fall, opts.Rise
	if fall <= 0 {
		fall = 2
	}
	if rise <= 0 {
		rise = 1
	}
	var httpDefaults, httpCheck string
	if opts.Mode == HAProxyHTTP {
		// L7 retries for reads only: a GET or HEAD whose server closed
		// its kept-alive connection without a full answer (a server going
		// away mid-request: one GET in about 3,000 got a 502 in
		// TestHAProxyHTTP) is sent again, to another server; any other
		// method is never sent twice (a POST may have been processed).
		httpDefaults = "    timeout http-request 30s\n    timeout http-keep-alive " + ms(opts.IdleTimeout, idle) + "\n" +
			"    retry-on conn-failure empty-response junk-response response-timeout\n"
		httpCheck = "    option httpchk GET " + opts.HealthPath + "\n    http-check expect status 200\n" +
			"    http-request disable-l7-retry if !METH_GET !METH_HEAD\n"
	}
	// hard-stop-after: a soft stop (SIGUSR1) closes what is still open
	// after 10 s. retries and redispatch: a connection refused or timed out
	// is tried again, on another server from the second try on (nothing of
	// the request reached a server).
	var b strings.Builder
	fmt.Fprintf(&b, `# Written by internal/dbserver (StartHAProxy).
global
    maxconn 4096
    stats socket %s mode 600 level admin
    hard-stop-after 10s

defaults
    mode %s
    timeout connect %s
    timeout check %s
    timeout client %[5]s
    timeout server %[5]s
%[6]s    retries 3
    option redispatch 1

frontend fe
    bind 127.0.0.1:%[7]d
    default_backend be

backend be
    balance %[8]s
%[9]s    default-server check inter %[10]s fastinter %[10]s downinter %[10]s fall %[11]d rise %[12]d on-marked-down shutdown-sessions
`, sock, opts.Mode, ms(opts.ConnectTimeout, time.Second), ms(opts.CheckTimeout, 2*time.Second), ms(opts.IdleTimeout, idle),
		httpDefaults, port, opts.Balance, httpCheck, inter, fall, rise)
	for i, a := range append(append([]string(nil), opts.Backends...), opts.Backups...) {
		backup := ""
		if i >= len(opts.Backends) {
			backup = " backup"
		}
		fmt.Fprintf(&b, "    server s%d %s%s\n", i+1, a, backup)
	}
	return b.String()
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
	c, err := d.DialContext(ctx, "unix", h.im.sockPath)
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
	var h *HAProxy
	started(t, "HAProxy", func(ctx context.Context) (*Server, error) {
		var err error
		if h, err = StartHAProxy(ctx, opts); err != nil {
			return nil, err
		}
		return h.Server, nil
	})
	return h
}
