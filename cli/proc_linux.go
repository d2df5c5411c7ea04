package cli

import (
	"os/exec"
	"runtime"
	"syscall"
)

// selfExecutable is the running binary, also after it was replaced or
// deleted on disk (an upgrade while workers run).
func selfExecutable() (string, error) { return "/proc/self/exe", nil }

// setPdeathsig has the kernel SIGKILL the command when the thread that
// forked it exits.
func setPdeathsig(attr *syscall.SysProcAttr) { attr.Pdeathsig = syscall.SIGKILL }

// runLocked runs cmd on a locked OS thread. Pdeathsig fires when the
// forking thread exits, not the process: without the lock the Go runtime
// may end that thread (or hand it to another goroutine that does) while
// the command still runs, killing it for no reason. The goroutine stays
// on the thread until the command was waited for.
func runLocked(cmd *exec.Cmd) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	return cmd.Run()
}
