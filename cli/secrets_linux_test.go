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

// TestShellHandlersCannotReadServerSecretsInProc: a shell handler runs as
// the server's child under the server's uid, so /proc/$PPID/environ and
// /proc/$PPID/cmdline are a step away. Neither shows it the tokens given
// as flags, the BACKLOG_* variables, or any other variable of the server's
// environment. As root the server runs as nobody: root reads every
// process's /proc files whatever they say, which docs/security.md says.
func TestShellHandlersCannotReadServerSecretsInProc(t *testing.T) {
	bin := buildBacklog(t)
	flagSecrets := []string{"flag-s3cret-admin", "flag-s3cret-worker", "flag-s3cret-lease-0123456789abcdef0123"}
	const producer, other = "env-s3cret-producer", "env-s3cret-other"
	if os.Getuid() != 0 {
		got := peekAtServer(t, bin, nil, flagSecrets, producer, other)
		mustNotContain(t, got, append(flagSecrets, producer, other))
		return
	}
	for _, d := range []string{filepath.Dir(bin), filepath.Dir(filepath.Dir(bin))} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Run("same-uid", func(t *testing.T) {
		got := peekAtServer(t, bin, &syscall.Credential{Uid: 65534, Gid: 65534}, flagSecrets, producer, other)
		mustNotContain(t, got, append(flagSecrets, producer, other))
		if !strings.Contains(got, "environ: Permission denied") {
			t.Errorf("the server's environ was readable:\n%s", got)
		}
	})
	t.Run("root", func(t *testing.T) {
		// Root reads every /proc file: what the server overwrote stays
		// hidden, other variables do not.
		got := peekAtServer(t, bin, nil, flagSecrets, producer, other)
		mustNotContain(t, got, append(flagSecrets, producer))
	})
}

// peekAtServer runs bin serve (as cred; nil: this process's uid) with
// flagSecrets as its --admin-token, --worker-token and --lease-secret,
// producer as BACKLOG_PRODUCER_TOKEN and other as OTHER_PASSWORD, and one
// job whose shell handler reads the cmdline and environ of its own process,
// its parent (the server) and the server's parent. It returns what the
// handler read, after checking it did read the server's command line.
func peekAtServer(t *testing.T, bin string, cred *syscall.Credential, flagSecrets []string, producer, other string) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "backlog-proc-secrets-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	db := "sqlite:" + filepath.Join(dir, "s.db")
	peek := filepath.Join(dir, "peek.txt")
	script := `p=$$; for i in 1 2 3; do
	  echo "== $p"; tr '\0' ' ' < /proc/$p/cmdline; echo; tr '\0' '\n' < /proc/$p/environ
	  p=$(awk '{print $4}' /proc/$p/stat)
	done > ` + peek + ` 2>&1; echo END >> ` + peek
	cmd := exec.Command(bin, "--db", db, "--log-level", "warn", "serve", "--listen", "127.0.0.1:0",
		"--admin-token", flagSecrets[0], "--worker-token="+flagSecrets[1], "--lease-secret", flagSecrets[2],
		"--poll-interval", "50ms", "--handler", "peek="+script)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=/", "BACKLOG_PRODUCER_TOKEN=" + producer, "OTHER_PASSWORD=" + other}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	var out syncBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	})
	waitFor(t, 30*time.Second, "the server's start line", func() bool { return strings.Contains(out.String(), "serving") })
	mustCLI(t, db, "enqueue", "peek", "{}")
	var got string
	waitFor(t, 30*time.Second, "the handler's output", func() bool {
		b, _ := os.ReadFile(peek)
		got = string(b)
		return strings.HasSuffix(got, "END\n")
	})
	if !strings.Contains(got, "== "+strconv.Itoa(cmd.Process.Pid)+"\n") || !strings.Contains(got, " serve --listen ") {
		t.Fatalf("the handler did not reach the server's /proc files (pid %d):\n%s", cmd.Process.Pid, got)
	}
	if strings.Contains(out.String(), "may read") {
		t.Errorf("the server could not hide its secrets:\n%s", out.String())
	}
	return got
}

func mustNotContain(t *testing.T, got string, secrets []string) {
	t.Helper()
	for _, s := range secrets {
		if strings.Contains(got, s) {
			t.Errorf("the handler read %q in /proc:\n%s", s, got)
		}
	}
}

// TestMaskArgsAndEnviron: a secret is hidden as an argument of its own and
// after "--flag="; BACKLOG_* values and values equal to a secret are
// hidden in the environment; the block keeps its length and separators.
func TestMaskArgsAndEnviron(t *testing.T) {
	t.Parallel()
	args := []byte("backlog\x00--admin-token\x00tok1\x00--db=postgres://u:pw@h/db\x00--queue=tok1x\x00serve\x00")
	maskArgs(args, []string{"tok1", "postgres://u:pw@h/db", ""})
	if want := "backlog\x00--admin-token\x00xxxx\x00--db=xxxxxxxxxxxxxxxxxxxx\x00--queue=tok1x\x00serve\x00"; string(args) != want {
		t.Errorf("args %q\nwant %q", args, want)
	}
	env := []byte("PATH=/bin\x00BACKLOG_KEYS=k1=abc\x00DATABASE_URL=dsn\x00OTHER=dsnx\x00BACKLOG_EMPTY=\x00")
	maskEnviron(env, []string{"dsn"})
	if want := "PATH=/bin\x00BACKLOG_KEYS=xxxxxx\x00DATABASE_URL=xxx\x00OTHER=dsnx\x00BACKLOG_EMPTY=\x00"; string(env) != want {
		t.Errorf("environ %q\nwant %q", env, want)
	}
}
