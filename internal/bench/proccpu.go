package bench

import (
	"fmt"
	"net"
	"net/url"
	"strings"
)

// Server says where the database server of a store runs, so that a run
// can split its CPU between the benchmark's process and the server. The
// zero Server is a server not known (or on another machine): its CPU is
// omitted.
type Server struct {
	// Procs names the server's processes on this machine (their comm,
	// e.g. "postgres"); their CPU is the server's.
	Procs []string
	// InProcess is true for a store that runs in the benchmark's own
	// process (SQLite, memory): server CPU 0, all of it is the client's.
	InProcess bool
}

// ServerOf returns where the server of the store URL rawURL runs:
// postgres: and postgresql: URLs with a loopback host, "localhost" or no
// host (a Unix socket) have the processes named "postgres"; mysql: URLs
// with such a host have "mariadbd" and "mysqld"; sqlite: is in-process;
// any other URL gives the zero Server (not known).
func ServerOf(rawURL string) Server {
	u, err := url.Parse(rawURL)
	if err != nil {
		return Server{}
	}
	var procs []string
	switch strings.ToLower(u.Scheme) {
	case "sqlite", "memory":
		return Server{InProcess: true}
	case "postgres", "postgresql":
		procs = []string{"postgres"}
	case "mysql":
		procs = []string{"mariadbd", "mysqld"}
	default:
		return Server{}
	}
	h := u.Hostname()
	if ip := net.ParseIP(h); h == "" || h == "localhost" || (ip != nil && ip.IsLoopback()) {
		return Server{Procs: procs}
	}
	return Server{}
}

// ProcCPU splits a measured span's CPU between the benchmark's own
// process and the database server (Linux only, read from /proc). It is
// embedded in the results, so its fields sit beside the others in JSON.
type ProcCPU struct {
	// ClientSeconds is the CPU time of this process (user + system, all
	// threads) over the span, in core-seconds.
	ClientSeconds float64 `json:"client_core_seconds"`
	// ServerSeconds is the CPU time over the span of every process on
	// this machine named like the database server (ServerProcs), in
	// core-seconds, the backends that exited during the span included
	// (through their parent's waited-for children's time). Such processes
	// count whoever they serve. 0 for an in-process store.
	// Nil when the server is not known (Server's zero value, e.g. on
	// another machine).
	ServerSeconds *float64 `json:"server_core_seconds,omitempty"`
	// PerThousand is the CPU per 1,000 jobs completed in the span, in
	// core-milliseconds.
	PerThousand CPUPerThousand `json:"core_ms_per_1000_jobs"`
}

// CPUPerThousand is CPU time per 1,000 jobs, in core-milliseconds.
// Server and Total are nil when the server is not known.
type CPUPerThousand struct {
	Client float64  `json:"client"`
	Server *float64 `json:"server,omitempty"`
	Total  *float64 `json:"total,omitempty"`
}

// procMark is a reading of the CPU time of this process and of the
// server's processes; the zero mark means none could be read.
type procMark struct {
	ok     bool
	client float64
	server map[procKey]float64 // process → user+system+children's, seconds
}

// procKey names a process across pid reuse.
type procKey struct {
	pid   int
	start uint64
}

// since returns the split of the CPU used from m to now over jobs jobs,
// or nil when /proc could not be read.
func (m procMark) since(srv Server, jobs int64) *ProcCPU {
	now := markProcs(srv.Procs)
	if !m.ok || !now.ok {
		return nil
	}
	p := &ProcCPU{ClientSeconds: now.client - m.client}
	k := 0.0
	if jobs > 0 {
		k = 1e6 / float64(jobs)
	}
	p.PerThousand.Client = p.ClientSeconds * k
	if !srv.InProcess && len(srv.Procs) == 0 {
		return p // the server is not known
	}
	var server float64
	for key, s := range now.server {
		// A process that started during the span counts from 0.
		server += s - m.server[key]
	}
	ps, pt := server*k, (p.ClientSeconds+server)*k
	p.ServerSeconds, p.PerThousand.Server, p.PerThousand.Total = &server, &ps, &pt
	return p
}

// procText is "; CPU per 1,000 jobs: client 12 + server 30 = 42 core-ms",
// "; CPU per 1,000 jobs: client 12 core-ms (server not measured)" or "".
func procText(p *ProcCPU) string {
	switch {
	case p == nil:
		return ""
	case p.ServerSeconds == nil:
		return fmt.Sprintf("; CPU per 1,000 jobs: client %.0f core-ms (server not measured)", p.PerThousand.Client)
	}
	return fmt.Sprintf("; CPU per 1,000 jobs: client %.0f + server %.0f = %.0f core-ms", p.PerThousand.Client, *p.PerThousand.Server, *p.PerThousand.Total)
}
