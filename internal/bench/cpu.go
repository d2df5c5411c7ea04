package bench

import (
	"fmt"
	"runtime"

	"github.com/prometheus/procfs"
)

// CPU is the whole machine's CPU use over a measured span, read from
// /proc/stat (Linux only): every process counts, a database server on
// the same machine included, so on a machine that runs the benchmark and
// its database it tells whether the run was CPU-bound and what one job
// cost in CPU, wherever that CPU was spent.
type CPU struct {
	Cores int `json:"cores"`
	// BusyPct is the busy share of all cores over the span, 0–100
	// (everything but idle and I/O wait).
	BusyPct float64 `json:"busy_pct"`
	// BusySeconds is the busy time summed over all cores, in seconds.
	BusySeconds float64 `json:"busy_core_seconds"`
}

// PerThousand formats the busy core-milliseconds per 1,000 of n things
// ("" when n is 0).
func (c *CPU) PerThousand(n int64) string {
	if c == nil || n <= 0 {
		return ""
	}
	return fmt.Sprintf("%.0f core-ms per 1,000", c.BusySeconds*1e6/float64(n))
}

// cpuMark is a reading of /proc/stat; the zero mark means none could be
// read.
type cpuMark struct {
	ok         bool
	busy, idle float64
}

func markCPU() cpuMark {
	fs, err := procfs.NewDefaultFS()
	if err != nil {
		return cpuMark{}
	}
	st, err := fs.Stat()
	if err != nil {
		return cpuMark{}
	}
	t := st.CPUTotal
	return cpuMark{
		ok:   true,
		busy: t.User + t.Nice + t.System + t.IRQ + t.SoftIRQ + t.Steal,
		idle: t.Idle + t.Iowait,
	}
}

// since returns the CPU use from m to now, or nil when /proc/stat could
// not be read.
func (m cpuMark) since() *CPU {
	now := markCPU()
	if !m.ok || !now.ok {
		return nil
	}
	busy, idle := now.busy-m.busy, now.idle-m.idle
	c := &CPU{Cores: runtime.NumCPU(), BusySeconds: busy}
	if busy+idle > 0 {
		c.BusyPct = 100 * busy / (busy + idle)
	}
	return c
}

// cpuText is "; machine CPU 97 % busy, 31 core-ms per 1,000 jobs" or "".
func cpuText(c *CPU, n int64, what string) string {
	if c == nil {
		return ""
	}
	return fmt.Sprintf("; machine CPU %.0f%% busy, %s %s", c.BusyPct, c.PerThousand(n), what)
}
