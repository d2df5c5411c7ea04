//go:build unix

package main

import (
	"errors"
	"os"
	"os/exec"
	"syscall"
)

// newProcessGroup makes the command lead its own process group, so a
// signal to the group reaches everything it starts.
func newProcessGroup(cmd *exec.Cmd) { cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} }

// terminateGroup sends SIGTERM to the process group led by pid. A group
// that is gone already reports os.ErrProcessDone.
func terminateGroup(pid int) error { return signalGroup(pid, syscall.SIGTERM) }

// killGroup sends SIGKILL to the process group led by pid.
func killGroup(pid int) error { return signalGroup(pid, syscall.SIGKILL) }

func signalGroup(pid int, sig syscall.Signal) error {
	err := syscall.Kill(-pid, sig)
	if errors.Is(err, syscall.ESRCH) {
		return os.ErrProcessDone
	}
	return err
}
