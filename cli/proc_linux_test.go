package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// buildBacklog builds the backlog binary into a temp dir.
func buildBacklog(t *testing.T) string {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool to build the binary with")
	}
	bin := filepath.Join(t.TempDir(), "backlog")
	args := []string{"build", "-o", bin}
	if raceEnabled {
		args = append(args, "-race")
	}
	out, err := exec.Command(goTool, append(args, "github.com/backlogq/backlog/cmd/backlog")...).CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// readPid waits for a pid written to path.
func readPid(t *testing.T, path string) int {
	t.Helper()
	var pid int
	waitFor(t, 20*time.Second, "pid file "+filepath.Base(path), func() bool {
		b, _ := os.ReadFile(path)
		pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		return pid > 0
	})
	return pid
}

// groupMembers lists the live processes of process group pgid.
func groupMembers(pgid int) []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		// After "comm)": state ppid pgrp …
		f := strings.Fields(s[i+1:])
		if len(f) < 3 || f[0] == "Z" || f[0] == "X" {
			continue
		}
		if g, _ := strconv.Atoi(f[2]); g == pgid {
			out = append(out, pid)
		}
	}
	return out
}

func pgidOf(t *testing.T, pid int) int {
	t.Helper()
	pgid, err := syscall.Getpgid(pid)
	if err != nil {
		t.Fatalf("getpgid %d: %v", pid, err)
	}
	return pgid
}

// TestShellHandlersDieWithTheWorker: SIGKILL of the worker process alone
// (the OOM killer, systemd's KillMode=process) ends the running handler and
// what it started, instead of leaving them to run on while the job is
// rescued and run a second time elsewhere.
func TestShellHandlersDieWithTheWorker(t *testing.T) {
	t.Parallel()
	bin := buildBacklog(t)
	dir := t.TempDir()
	db := "sqlite:" + filepath.Join(dir, "jobs.db")
	mustCLI(t, db, "migrate")
	mustCLI(t, db, "enqueue", "hang", "{}")

	// The handler (sh) starts a grandchild that ignores SIGTERM and waits.
	script := `echo $$ > handler.pid; sh -c 'trap "" TERM; exec sleep 300' & echo $! > child.pid; wait`
	var stdout, stderr syncBuffer
	cmd := exec.Command(bin, "--db", db, "work", "--poll-interval", "50ms", "--handler", "hang="+script)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var pids []int
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		for _, pid := range pids {
			if alive(pid) {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	})
	handler := readPid(t, filepath.Join(dir, "handler.pid"))
	pids = append(pids, handler)
	child := readPid(t, filepath.Join(dir, "child.pid"))
	pids = append(pids, child)
	pgid := pgidOf(t, handler)
	if pgidOf(t, child) != pgid {
		t.Fatalf("the grandchild is not in the handler's process group")
	}
	pids = append(pids, groupMembers(pgid)...)

	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	waitFor(t, 5*time.Second, "the handler and its child to die with the worker", func() bool {
		return !alive(handler) && !alive(child) && len(groupMembers(pgid)) == 0
	})
	if t.Failed() {
		t.Logf("stdout:\n%s\nstderr:\n%s", &stdout, &stderr)
	}
}
