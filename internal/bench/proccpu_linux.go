package bench

import (
	"slices"

	"github.com/prometheus/procfs"
)

// userHZ is the unit of the times in /proc/<pid>/stat (USER_HZ, 100 on
// every Linux architecture Go supports).
const userHZ = 100

// markProcs reads the CPU time of this process and of every process
// whose name is one of names.
func markProcs(names []string) procMark {
	fs, err := procfs.NewDefaultFS()
	if err != nil {
		return procMark{}
	}
	self, err := fs.Self()
	if err != nil {
		return procMark{}
	}
	st, err := self.Stat()
	if err != nil {
		return procMark{}
	}
	m := procMark{ok: true, client: float64(st.UTime+st.STime) / userHZ, server: map[procKey]float64{}}
	if len(names) == 0 {
		return m
	}
	procs, err := fs.AllProcs()
	if err != nil {
		return procMark{}
	}
	for _, p := range procs {
		ps, err := p.Stat()
		if err != nil || !slices.Contains(names, ps.Comm) {
			continue // exited since the listing, or another program
		}
		// The children's times hold the backends that exited and were
		// reaped by the server's main process.
		t := float64(int64(ps.UTime+ps.STime)+int64(ps.CUTime+ps.CSTime)) / userHZ
		m.server[procKey{ps.PID, ps.Starttime}] = t
	}
	return m
}
