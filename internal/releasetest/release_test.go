// Package releasetest checks what ships besides the Go packages: the release
// build (scripts/release.sh), the container image (Dockerfile, run by
// scripts/container-check.sh), the deployment examples (examples/deploy)
// and the upgrade notes in CHANGELOG.md.
package releasetest

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"debug/buildinfo"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// repoRoot is the checkout this test file lives in.
func repoRoot(t *testing.T) string {
	t.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("no caller information")
	}
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// need skips the test when one of the tools is not on PATH.
func need(t *testing.T, tools ...string) {
	t.Helper()
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("needs %s, which is not installed: %v", tool, err)
		}
	}
}

// testContext ends a little before the test's deadline, so that a command
// that hangs is killed and its output reported.
func testContext(t *testing.T) context.Context {
	t.Helper()
	ctx := t.Context()
	if d, ok := t.Deadline(); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, d.Add(-10*time.Second))
		t.Cleanup(cancel)
	}
	return ctx
}

// script runs bash scripts/NAME with args in the checkout and returns its
// stdout and stderr and its error (an *exec.ExitError for a non-zero exit).
func script(ctx context.Context, t *testing.T, name string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	cmd := exec.CommandContext(ctx, "bash", append([]string{filepath.Join(repoRoot(t), "scripts", name)}, args...)...)
	cmd.Dir = repoRoot(t)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	cmd.WaitDelay = 5 * time.Second
	err = cmd.Run()
	return o.String(), e.String(), err
}

const releaseVersion = "v0.0.0-releasetest.1"

// TestReleaseBuild builds the linux/amd64 release archive and checks its
// contents, SHA256SUMS, the build settings of the binary and, where the host
// can run it, the version it prints.
func TestReleaseBuild(t *testing.T) {
	need(t, "bash", "tar")
	const goos, goarch = "linux", "amd64"
	target := goos + "/" + goarch
	ctx := testContext(t)
	out := filepath.Join(t.TempDir(), "dist")
	_, stderr, err := script(ctx, t, "release.sh", "--version", releaseVersion, "--targets", target, "--out", out)
	if err != nil {
		t.Fatalf("release.sh: %v\n%s", err, stderr)
	}

	name := "backlog_" + releaseVersion + "_" + goos + "_" + goarch
	archive := name + ".tar.gz"
	entries, err := os.ReadDir(out)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if strings.Join(names, " ") != "SHA256SUMS "+archive {
		t.Fatalf("%s holds %v, want %s and SHA256SUMS", out, names, archive)
	}

	// SHA256SUMS: one line for the archive, checked by sha256sum -c and here.
	sums, err := os.ReadFile(filepath.Join(out, "SHA256SUMS"))
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(out, archive))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	if want := hex.EncodeToString(sum[:]) + "  " + archive + "\n"; string(sums) != want {
		t.Errorf("SHA256SUMS = %q, want %q", sums, want)
	}
	if _, err := exec.LookPath("sha256sum"); err == nil {
		cmd := exec.CommandContext(ctx, "sha256sum", "-c", "SHA256SUMS")
		cmd.Dir = out
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("sha256sum -c SHA256SUMS: %v\n%s", err, b)
		}
	} else {
		t.Log("sha256sum is not installed: SHA256SUMS checked in Go only")
	}

	// The archive: one directory named like it, holding the binary,
	// LICENSE and README.md.
	bin := filepath.Join(t.TempDir(), "backlog")
	files := untar(t, data, name+"/backlog", bin)
	for _, f := range []string{name + "/", name + "/LICENSE", name + "/README.md", name + "/backlog"} {
		if _, ok := files[f]; !ok {
			t.Errorf("%s has no %s (it holds %v)", archive, f, files)
		}
	}
	if len(files) != 4 {
		t.Errorf("%s holds %v, want the directory, backlog, LICENSE and README.md", archive, files)
	}
	if files[name+"/backlog"]&0o111 == 0 {
		t.Errorf("%s/backlog is not executable: mode %v", name, files[name+"/backlog"])
	}

	// How it was built: static, trimmed, stripped, the version stamped.
	bi, err := buildinfo.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	settings := map[string]string{}
	for _, s := range bi.Settings {
		settings[s.Key] = s.Value
	}
	for k, want := range map[string]string{"CGO_ENABLED": "0", "-trimpath": "true", "GOOS": goos, "GOARCH": goarch} {
		if settings[k] != want {
			t.Errorf("build setting %s = %q, want %q", k, settings[k], want)
		}
	}
	// -trimpath keeps -ldflags out of the build info; -s shows as a
	// binary without a symbol table, the stamped version below.
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Symbols(); !errors.Is(err, elf.ErrNoSymbols) {
		t.Errorf("the binary has a symbol table (err %v): not linked with -s", err)
	}
	f.Close()
	if bi.Path != "github.com/backlogq/backlog/cmd/backlog" {
		t.Errorf("main package %q", bi.Path)
	}

	// backlog version prints the stamped version, as text and as JSON.
	if host := runtime.GOOS + "/" + runtime.GOARCH; host != target {
		t.Skipf("built and checked the %s archive; this %s host cannot run its binary to see the version", target, host)
	}
	text, err := exec.CommandContext(ctx, bin, "version").Output()
	if err != nil {
		t.Fatalf("backlog version: %v", err)
	}
	if want := "backlog " + releaseVersion + " "; !strings.HasPrefix(string(text), want) ||
		!strings.Contains(string(text), bi.GoVersion) {
		t.Errorf("backlog version printed %q, want %q… %s", text, want, bi.GoVersion)
	}
	js, err := exec.CommandContext(ctx, bin, "version", "-o", "json").Output()
	if err != nil {
		t.Fatalf("backlog version -o json: %v", err)
	}
	var v struct{ Module, Version, Go string }
	if err := json.Unmarshal(js, &v); err != nil {
		t.Fatalf("backlog version -o json printed %q: %v", js, err)
	}
	if v.Version != releaseVersion || v.Module != "github.com/backlogq/backlog" || v.Go != bi.GoVersion {
		t.Errorf("backlog version -o json = %+v, want version %s, module github.com/backlogq/backlog, go %s", v, releaseVersion, bi.GoVersion)
	}
}

// untar reads the .tar.gz in data and returns the mode of each entry by
// name; the regular file named extract is written to dst.
func untar(t *testing.T, data []byte, extract, dst string) map[string]os.FileMode {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	files := map[string]os.FileMode{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		files[h.Name] = h.FileInfo().Mode()
		if h.Uid != 0 || h.Gid != 0 {
			t.Errorf("%s is owned by %d:%d, want 0:0", h.Name, h.Uid, h.Gid)
		}
		if h.Name == extract && h.Typeflag == tar.TypeReg {
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(dst, b, 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	return files
}

// TestReleaseRefusesBadInput: a version, target or argument the script does
// not know is refused with a message saying what is wrong, before anything
// is built or written.
func TestReleaseRefusesBadInput(t *testing.T) {
	need(t, "bash", "tar")
	ctx := testContext(t)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--version", "1.2.3"}, `version "1.2.3" is not a semantic version`},
		{[]string{"--version", "v1.2"}, `version "v1.2" is not a semantic version`},
		{[]string{"--version", "v1.2.3", "--targets", "windows/amd64"}, `target "windows/amd64" is not one of`},
		{[]string{"--version", "v1.2.3", "--targets", ""}, "--targets is empty"},
		{[]string{"--version"}, "--version needs a value"},
		{[]string{"--bogus"}, `unknown argument "--bogus"`},
	} {
		out := filepath.Join(t.TempDir(), "dist")
		_, stderr, err := script(ctx, t, "release.sh", append([]string{"--out", out}, c.args...)...)
		var exit *exec.ExitError
		if !errors.As(err, &exit) {
			t.Errorf("%q: err = %v, want a non-zero exit\n%s", c.args, err, stderr)
			continue
		}
		if !strings.Contains(stderr, c.want) {
			t.Errorf("%q: stderr %q lacks %q", c.args, stderr, c.want)
		}
		if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%q: %s was created (%v)", c.args, out, err)
		}
	}
}
