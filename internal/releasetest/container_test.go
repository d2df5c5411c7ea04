package releasetest

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
)

// TestContainer runs scripts/container-check.sh: with a container engine
// (docker or podman answering) it builds the image from the Dockerfile and
// runs it until the engine reports it healthy; without one it performs the
// Dockerfile's build steps and runs the binary with the image's command, as
// the image's user, until /healthz answers. The log says which ran.
func TestContainer(t *testing.T) {
	need(t, "bash", "go")
	_, errCurl := exec.LookPath("curl")
	_, errWget := exec.LookPath("wget")
	if errCurl != nil && errWget != nil {
		t.Skip("needs curl or wget to poll /healthz; neither is installed")
	}
	if runtime.GOOS != "linux" {
		t.Skipf("the image's binary is a linux one; this is %s", runtime.GOOS)
	}
	const version = "v0.0.0-containertest.1"
	_, stderr, err := script(testContext(t), t, "container-check.sh", "--version", version)
	if err != nil {
		t.Fatalf("container-check.sh: %v\n%s", err, stderr)
	}
	lines := strings.Split(strings.TrimSpace(stderr), "\n")
	last := lines[len(lines)-1]
	if !strings.HasPrefix(last, "container-check: ok: ") {
		t.Fatalf("container-check.sh ended with %q\n%s", last, stderr)
	}
	t.Log(strings.TrimPrefix(last, "container-check: ok: "))
}

// TestDockerfile checks what the container check cannot: the build stage's
// Go matches go.mod's go line, the final stage runs as a user other than
// root, and the build context leaves out the repository's history and
// local databases.
func TestDockerfile(t *testing.T) {
	root := repoRoot(t)
	mod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^go (\d+\.\d+)(\.\d+)?$`).FindSubmatch(mod)
	if m == nil {
		t.Fatal("go.mod has no go line")
	}
	df, err := os.ReadFile(filepath.Join(root, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	var from []string
	var user, volume string
	sc := bufio.NewScanner(strings.NewReader(string(df)))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 {
			continue
		}
		switch f[0] {
		case "FROM":
			from = append(from, f[1])
		case "USER":
			user = f[1]
		case "VOLUME":
			volume = f[1]
		}
	}
	if want := "golang:" + string(m[1]); len(from) < 2 || from[0] != want {
		t.Errorf("stages FROM %v: want the build stage on %s (go.mod: go %s%s) and a final stage", from, want, m[1], m[2])
	}
	if name, _, _ := strings.Cut(user, ":"); name == "" || name == "0" || name == "root" {
		t.Errorf("final stage USER %q: want a user other than root", user)
	}
	if volume != "/data" {
		t.Errorf("VOLUME %q, want /data", volume)
	}
	for _, want := range []string{`CMD ["serve", "--db", "sqlite:/data/backlog.db", "--listen", "0.0.0.0:8080"]`, "/healthz", "CGO_ENABLED=0", "-trimpath"} {
		if !strings.Contains(string(df), want) {
			t.Errorf("Dockerfile lacks %q", want)
		}
	}
	ignore, err := os.ReadFile(filepath.Join(root, ".dockerignore"))
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, l := range strings.Split(string(ignore), "\n") {
		have[strings.TrimSpace(l)] = true
	}
	for _, want := range []string{".git", "dist", "*.db"} {
		if !have[want] {
			t.Errorf(".dockerignore does not leave out %s", want)
		}
	}
}
