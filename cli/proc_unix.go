//go:build unix

package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"syscall"
	"time"
)

// A shell command runs in a process group of its own, so a signal to the
// group reaches everything it starts. The group must also die with this
// process, however this process ends (SIGKILL, the OOM killer, systemd's
// KillMode=process): otherwise the job is rescued and run again elsewhere
// while the first run goes on.
//
// Two mechanisms see to that:
//
//   - The command gets Pdeathsig=SIGKILL (Linux): the kernel kills it when
//     the thread that forked it exits, so it is forked and waited on a
//     locked OS thread (runLocked).
//   - The group is led by a watchdog: this binary started again in
//     watchdog mode (runWatchdog), before the command, which then joins the
//     watchdog's group. The watchdog reads its stdin, a pipe whose only
//     writer is this process; the kernel closes that pipe when this process
//     dies, however it dies, and the watchdog then SIGKILLs the whole group
//     (the command's own children included, which Pdeathsig does not reach)
//     and itself with it. It also compares its parent pid each second.
//     It ignores the catchable signals a cancellation sends the group, so
//     the command's SIGTERM grace period is unchanged; the SIGKILL at its
//     end, and the one after the command exits, end the watchdog too. As
//     the group's leader, unreaped until the group is killed, it also keeps
//     the group id from being reused while this process may signal it.
//
// The command stays this process's child, so its stdin, stdout, stderr and
// exit status reach the handler exactly as without the watchdog.

// watchdogEnv marks a process started as a watchdog; its value is the pid
// of the process it watches (its parent).
const watchdogEnv = "BACKLOG_INTERNAL_GROUP_WATCHDOG"

// watchdogParent reports whether this process was started as a watchdog,
// and of which parent.
func watchdogParent(getenv func(string) string) (int, bool) {
	v := getenv(watchdogEnv)
	if v == "" {
		return 0, false
	}
	pid, err := strconv.Atoi(v)
	if err != nil || pid < 1 { // 1: a worker that is a container's init
		return 0, false
	}
	return pid, true
}

// runWatchdog is the watchdog's main: it waits until its parent is gone,
// then SIGKILLs its process group, itself included. It does not return
// unless the kill fails.
func runWatchdog(parent int) int {
	// Signals sent to the whole group (a cancellation's SIGTERM, a
	// command's own "kill 0") are the command's business.
	signal.Ignore(syscall.SIGHUP, syscall.SIGINT, syscall.SIGQUIT, syscall.SIGTERM,
		syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGPIPE, syscall.SIGALRM)
	gone := make(chan struct{})
	go func() {
		// The parent never writes: Read returns at EOF, when it has died.
		_, _ = io.Copy(io.Discard, os.Stdin)
		close(gone)
	}()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
wait:
	for os.Getppid() == parent {
		select {
		case <-gone:
			break wait
		case <-tick.C:
		}
	}
	err := syscall.Kill(0, syscall.SIGKILL)
	fmt.Fprintf(os.Stderr, "backlog watchdog: kill process group: %v\n", err)
	return exitRuntime
}

// procGroup is the process group one command runs in.
type procGroup struct {
	pgid     int       // the group; 0 until the command starts when it leads its own
	watchdog *exec.Cmd // leads the group; nil when it could not start
	alive    *os.File  // write end of the watchdog's stdin, never written: closing it ends the watchdog
}

// newProcGroup starts the watchdog leading a new process group. When the
// watchdog cannot start, the group is still usable (the command leads it,
// with Pdeathsig but no watchdog) and err says why.
func newProcGroup() (g *procGroup, err error) {
	g = &procGroup{}
	exe, err := selfExecutable()
	if err != nil {
		return g, fmt.Errorf("start process group watchdog: %w", err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		return g, fmt.Errorf("start process group watchdog: %w", err)
	}
	defer r.Close()
	wd := exec.Command(exe)
	wd.Args = []string{"backlog-watchdog"}
	wd.Env = []string{watchdogEnv + "=" + strconv.Itoa(os.Getpid()), "GOMAXPROCS=1"}
	wd.Dir = "/"
	wd.Stdin = r // stdout and stderr: /dev/null
	wd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := wd.Start(); err != nil {
		w.Close()
		return g, fmt.Errorf("start process group watchdog: %w", err)
	}
	g.pgid, g.watchdog, g.alive = wd.Process.Pid, wd, w
	return g, nil
}

// attach makes cmd join the group (or lead its own when there is no
// watchdog) and die with this process. Call it before cmd.Start.
func (g *procGroup) attach(cmd *exec.Cmd) {
	attr := &syscall.SysProcAttr{Setpgid: true, Pgid: g.pgid}
	setPdeathsig(attr)
	cmd.SysProcAttr = attr
}

// id returns the group's id; call it once cmd has started.
func (g *procGroup) id(cmd *exec.Cmd) int {
	if g.pgid == 0 && cmd.Process != nil {
		return cmd.Process.Pid
	}
	return g.pgid
}

// release kills whatever is left in the group (also after a normal exit:
// no orphans) and reaps the watchdog. Call it once cmd was waited for (or
// failed to start).
func (g *procGroup) release(cmd *exec.Cmd) {
	if pgid := g.id(cmd); pgid != 0 {
		_ = killGroup(pgid)
	}
	if g.watchdog != nil {
		g.alive.Close()
		_ = g.watchdog.Wait()
	}
}

// terminateGroup sends SIGTERM to the process group pgid. A group that is
// gone already reports os.ErrProcessDone.
func terminateGroup(pgid int) error { return signalGroup(pgid, syscall.SIGTERM) }

// killGroup sends SIGKILL to the process group pgid.
func killGroup(pgid int) error { return signalGroup(pgid, syscall.SIGKILL) }

func signalGroup(pgid int, sig syscall.Signal) error {
	err := syscall.Kill(-pgid, sig)
	if errors.Is(err, syscall.ESRCH) {
		return os.ErrProcessDone
	}
	return err
}
