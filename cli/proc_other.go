//go:build !unix

package cli

import (
	"os"
	"os/exec"
)

// Without Unix process groups only the command's own process is stopped;
// processes it started may outlive it, and nothing stops the command when
// this process dies.

func watchdogParent(func(string) string) (int, bool) { return 0, false }

func runWatchdog(int) int { return exitRuntime }

// procGroup stands for the command's own process.
type procGroup struct{}

func newProcGroup() (*procGroup, error) { return &procGroup{}, nil }

func (g *procGroup) attach(*exec.Cmd) {}

func (g *procGroup) id(cmd *exec.Cmd) int {
	if cmd.Process == nil {
		return 0
	}
	return cmd.Process.Pid
}

func (g *procGroup) release(cmd *exec.Cmd) {
	if cmd.Process != nil {
		_ = cmd.Process.Kill() // a no-op once it was waited for
	}
}

func runLocked(cmd *exec.Cmd) error { return cmd.Run() }

func terminateGroup(pid int) error { return killProcess(pid) }

func killGroup(pid int) error { return killProcess(pid) }

func killProcess(pid int) error {
	p, err := os.FindProcess(pid)
	if err != nil {
		return os.ErrProcessDone
	}
	return p.Kill()
}
