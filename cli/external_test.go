//go:build unix

package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// externalMain is the whole program a store author writes to get the
// stock CLI on their store: here the memory store, under a scheme of its
// own ("memx"), registered the way a third-party store registers itself.
const externalMain = `package main

import (
	"context"
	"net/url"
	"os"

	"github.com/backlogq/backlog/cli"
	"github.com/backlogq/backlog/core/contract"
	"github.com/backlogq/backlog/store"
	"github.com/backlogq/backlog/store/memory"
)

func init() {
	store.Register("memx", func(ctx context.Context, u *url.URL) (contract.Store, error) {
		return memory.New(), nil
	})
}

func main() { os.Exit(cli.Main(context.Background(), os.Args[1:])) }
`

// TestMainFromAnotherModule builds, in a module outside this repository
// (a replace directive points at this checkout), a program that registers
// a store under a new scheme and calls cli.Main, then runs `serve` on that
// store and has a job enqueued through the server's HTTP API (by the same
// binary) run by the server's shell handler: the stock CLI, every command,
// on a third party's store through one import.
func TestMainFromAnotherModule(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a program")
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool")
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	goMod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	goSum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	goLine := "go 1.26.0"
	for _, l := range strings.Split(string(goMod), "\n") {
		if strings.HasPrefix(l, "go ") {
			goLine = l
		}
	}
	dir := t.TempDir()
	mod := "module example.com/backlogext\n\n" + goLine + "\n\n" +
		"require github.com/backlogq/backlog v0.0.0-00010101000000-000000000000\n\n" +
		"replace github.com/backlogq/backlog => " + root + "\n"
	for name, body := range map[string][]byte{"go.mod": []byte(mod), "go.sum": goSum, "main.go": []byte(externalMain)} {
		if err := os.WriteFile(filepath.Join(dir, name), body, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// The modules come from this machine's module cache, served as a
	// proxy, and only then from the configured proxy (a go.mod the cache
	// lacks: some of another platform's dependencies); this checkout's
	// go.sum verifies them.
	goEnvOut, err := exec.Command(goTool, "env", "GOMODCACHE", "GOPROXY").Output()
	if err != nil {
		t.Fatal(err)
	}
	vals := strings.Split(strings.TrimSpace(string(goEnvOut)), "\n")
	proxy := "file://" + filepath.Join(vals[0], "cache", "download")
	if len(vals) > 1 && vals[1] != "" && vals[1] != "off" {
		proxy += "," + vals[1]
	}
	goEnv := append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off", "GONOSUMDB=github.com/backlogq/backlog", "GOPROXY="+proxy)
	gorun := func(args ...string) {
		t.Helper()
		cmd := exec.Command(goTool, args...)
		cmd.Dir, cmd.Env = dir, goEnv
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	bin := filepath.Join(dir, "backlog-memx")
	gorun("build", "-o", bin, ".")

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var serveOut bytes.Buffer
	serve := exec.CommandContext(ctx, bin, "--db", "memx:", "--log-level", "warn", "serve",
		"--listen", addr, "--handler", `hello=echo "hello, $(cat)"`)
	serve.Stdout, serve.Stderr = &serveOut, &serveOut
	serve.Dir = dir
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = serve.Process.Signal(os.Interrupt)
		_ = serve.Wait()
		if t.Failed() {
			t.Logf("serve's output:\n%s", serveOut.String())
		}
	}()

	server := "http://" + addr
	cli := func(args ...string) ([]byte, error) {
		cmd := exec.CommandContext(ctx, bin, append([]string{"--server", server, "-o", "json"}, args...)...)
		cmd.Dir = dir
		return cmd.Output()
	}
	var out []byte
	waitFor(t, 30*time.Second, "the server to take a job", func() bool {
		out, err = cli("enqueue", "hello", `{"name":"ada"}`)
		return err == nil
	})
	var job struct {
		ID int64 `json:"id"`
	}
	if err := json.Unmarshal(out, &job); err != nil || job.ID == 0 {
		t.Fatalf("enqueue printed %q: %v", out, err)
	}
	var got struct {
		State  string `json:"state"`
		Result string `json:"result"`
	}
	waitFor(t, 30*time.Second, "the job to complete", func() bool {
		out, err := cli("jobs", "get", strconv.FormatInt(job.ID, 10))
		return err == nil && json.Unmarshal(out, &got) == nil && got.State == "completed"
	})
	if !strings.Contains(got.Result, `hello, {"name":"ada"}`) {
		t.Fatalf("result %q, want the handler's output", got.Result)
	}
}
