//go:build !unix

package main

import (
	"os"
	"os/exec"
)

// Without Unix process groups only the command's own process is stopped;
// processes it started may outlive it.

func newProcessGroup(*exec.Cmd) {}

func terminateGroup(pid int) error { return killProcess(pid) }

func killGroup(pid int) error { return killProcess(pid) }

func killProcess(pid int) error {
	p, err := os.FindProcess(pid)
	if err != nil {
		return os.ErrProcessDone
	}
	return p.Kill()
}
