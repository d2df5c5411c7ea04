//go:build unix && !linux

package cli

import (
	"os"
	"os/exec"
	"syscall"
)

// selfExecutable is the running binary.
func selfExecutable() (string, error) { return os.Executable() }

// setPdeathsig does nothing: only the watchdog ties the command's group to
// this process here.
func setPdeathsig(*syscall.SysProcAttr) {}

// runLocked runs cmd; no thread lock is needed without Pdeathsig.
func runLocked(cmd *exec.Cmd) error { return cmd.Run() }
