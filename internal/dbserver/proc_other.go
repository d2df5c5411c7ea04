//go:build !linux

package dbserver

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"syscall"
)

// osUser is unused off Linux.
type osUser struct {
	name     string
	uid, gid int
}

// credential reports that servers cannot be started here.
func credential(name, def string) (*osUser, error) {
	return nil, fmt.Errorf("%w: private servers need Linux, this is %s", ErrUnavailable, runtime.GOOS)
}

func sysProcAttr(*osUser, bool) *syscall.SysProcAttr { return nil }

// process is never created off Linux.
type process struct {
	pid  int
	done chan struct{}
	err  error
}

func (s *Server) spawn([]string) (*process, error) {
	return nil, fmt.Errorf("%w: private servers need Linux", ErrUnavailable)
}

func (p *process) exited() bool                { return true }
func (p *process) wait(context.Context) error  { return nil }
func (p *process) signal(syscall.Signal) error { return os.ErrProcessDone }
func (p *process) killTree() error             { return nil }

// machineLock is a no-op off Linux, where no server starts.
func machineLock(string) (func(), error) { return func() {}, nil }
