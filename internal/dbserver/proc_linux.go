//go:build linux

package dbserver

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// osUser is the account the server programs run as when the caller is
// root.
type osUser struct {
	name     string
	uid, gid int
}

// credential returns the user to run as: nil when the caller is not root,
// else the named user (def when name is ""). A missing user is reported as
// ErrUnavailable.
func credential(name, def string) (*osUser, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	if name == "" {
		name = def
	}
	u, err := user.Lookup(name)
	if err != nil {
		return nil, fmt.Errorf("%w: running as root, the server must run as OS user %q: %v", ErrUnavailable, name, err)
	}
	uid, err1 := strconv.Atoi(u.Uid)
	gid, err2 := strconv.Atoi(u.Gid)
	if err1 != nil || err2 != nil {
		return nil, fmt.Errorf("dbserver: user %s has non-numeric ids %s:%s", name, u.Uid, u.Gid)
	}
	return &osUser{name: name, uid: uid, gid: gid}, nil
}

// sysProcAttr makes a child run as cred (if not nil). A server process
// also gets its own process group (a Ctrl-C at the terminal does not reach
// it; the test decides when it stops) and SIGKILL when its parent dies.
func sysProcAttr(cred *osUser, server bool) *syscall.SysProcAttr {
	a := &syscall.SysProcAttr{}
	if cred != nil {
		a.Credential = &syscall.Credential{Uid: uint32(cred.uid), Gid: uint32(cred.gid), Groups: []uint32{}}
	}
	if server {
		a.Setpgid = true
		a.Pdeathsig = syscall.SIGKILL
	}
	return a
}

// process is one run of a server program.
type process struct {
	pid  int
	done chan struct{} // closed when the process has exited and been reaped
	err  error         // its exit status; read only after done is closed
}

// spawn starts argv as the server, its output appended to the log.
func (s *Server) spawn(argv []string) (*process, error) {
	logf, err := os.OpenFile(s.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("dbserver: %w", err)
	}
	defer logf.Close() // the child keeps its own descriptor
	fmt.Fprintf(logf, "\n===== dbserver: %s starting: %s\n", time.Now().Format(time.RFC3339Nano), strings.Join(argv, " "))
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = s.dir
	cmd.Env = s.env()
	cmd.Stdout = logf
	cmd.Stderr = logf
	cmd.SysProcAttr = sysProcAttr(s.cred, true)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("dbserver: start %s: %w", argv[0], err)
	}
	p := &process{pid: cmd.Process.Pid, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// wait blocks until the process has exited or ctx ends.
func (p *process) wait(ctx context.Context) error {
	select {
	case <-p.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// signal sends sig to the process unless it has exited.
func (p *process) signal(sig syscall.Signal) error {
	if p.exited() {
		return os.ErrProcessDone
	}
	if err := syscall.Kill(p.pid, sig); err != nil {
		if errors.Is(err, syscall.ESRCH) {
			return os.ErrProcessDone
		}
		return err
	}
	return nil
}

// killTree SIGKILLs the process and every process descended from it, and
// waits (at most 30 s) until all are gone.
func (p *process) killTree() error {
	desc := descendants(p.pid)
	if err := p.signal(syscall.SIGKILL); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("dbserver: kill %d: %w", p.pid, err)
	}
	for _, d := range desc {
		_ = syscall.Kill(d.pid, syscall.SIGKILL)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := p.wait(ctx); err != nil {
		return fmt.Errorf("dbserver: process %d survived SIGKILL: %w", p.pid, err)
	}
	for _, d := range desc {
		for alive(d) {
			if ctx.Err() != nil {
				return fmt.Errorf("dbserver: process %d survived SIGKILL", d.pid)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	return nil
}

// procID names a process by pid and start time, so a reused pid is not
// mistaken for it.
type procID struct {
	pid   int
	start string
}

// descendants lists the processes descended from pid, from /proc.
func descendants(pid int) []procID {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	children := map[int][]procID{}
	for _, e := range ents {
		n, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		st, ok := readStat(n)
		if !ok {
			continue
		}
		children[st.ppid] = append(children[st.ppid], procID{pid: n, start: st.start})
	}
	var out []procID
	queue := []int{pid}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, c := range children[p] {
			out = append(out, c)
			queue = append(queue, c.pid)
		}
	}
	return out
}

type stat struct {
	state byte
	ppid  int
	start string // start time in clock ticks after boot
}

// readStat parses /proc/PID/stat.
func readStat(pid int) (stat, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return stat{}, false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return stat{}, false
	}
	f := strings.Fields(s[i+1:]) // state ppid pgrp session … (field 3 onwards)
	if len(f) < 20 {
		return stat{}, false
	}
	ppid, err := strconv.Atoi(f[1])
	if err != nil || len(f[0]) == 0 {
		return stat{}, false
	}
	return stat{state: f[0][0], ppid: ppid, start: f[19]}, true
}

// alive reports whether the process still exists and is not a zombie.
func alive(p procID) bool {
	st, ok := readStat(p.pid)
	return ok && st.start == p.start && st.state != 'Z' && st.state != 'X'
}

// machineLock takes an exclusive flock on name in the temporary directory,
// waiting for any other process of this machine that holds it, and
// returns the function that releases it.
func machineLock(name string) (func(), error) {
	f, err := os.OpenFile(filepath.Join(os.TempDir(), name), os.O_RDWR|os.O_CREATE, 0o666)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, err
	}
	return func() { f.Close() }, nil // closing the file releases the lock
}
