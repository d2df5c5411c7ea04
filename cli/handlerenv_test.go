//go:build unix

package cli

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/backlogq/backlog/core"
)

func TestHandlerBaseEnv(t *testing.T) {
	t.Parallel()
	environ := []string{
		"PATH=/bin", "HOME=/home/w", "LANG=C.UTF-8", "LC_ALL=C", "TZ=UTC", "TMPDIR=/tmp",
		"TRACEPARENT=00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
		"BACKLOG_ADMIN_TOKEN=s3cret", "BACKLOG_DB=postgres://u:pw@db/app", "AWS_SECRET_ACCESS_KEY=k",
		"KEEP=kept", "OVERRIDE=worker's", "=bad", "noequals",
	}
	got := handlerBaseEnv(environ, []string{"KEEP", "OVERRIDE=given", "SET=v", "ABSENT"})
	want := []string{
		"PATH=/bin", "HOME=/home/w", "LANG=C.UTF-8", "LC_ALL=C", "TZ=UTC", "TMPDIR=/tmp",
		"TRACEPARENT=00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
		"KEEP=kept", "OVERRIDE=given", "SET=v",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("got  %q\nwant %q", got, want)
	}
	if got := handlerBaseEnv(nil, nil); got == nil || len(got) != 0 {
		t.Fatalf("empty environment: %#v, want an empty non-nil slice", got)
	}
}

func TestCheckHandlerEnv(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{"NAME", "NAME=", "NAME=a=b"} {
		if err := checkHandlerEnv(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "=x", "A=\x00"} {
		if err := checkHandlerEnv(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	if r := cli(t, tempDB(t), "work", "--handler", "k=true", "--handler-env", "=x"); r.code != 2 || !strings.Contains(r.stderr, "--handler-env") {
		t.Fatalf("a bad --handler-env must be a usage error: %s", r)
	}
}

// TestWorkHandlersDoNotSeeWorkerSecrets: a shell handler's environment is
// the allow-list, the variables the flags and the config file name, and the
// job's own; the worker's tokens and database URL never reach it.
func TestWorkHandlersDoNotSeeWorkerSecrets(t *testing.T) {
	// Not parallel: the secrets are in the process environment, where a
	// worker's secrets are.
	dir := t.TempDir()
	db := "sqlite:" + filepath.Join(dir, "env.db")
	for k, v := range map[string]string{
		"HOME": "/home/w", "LC_ALL": "C",
		"BACKLOG_ADMIN_TOKEN": "admin-s3cret", "BACKLOG_WORKER_TOKEN": "worker-s3cret", "BACKLOG_DB": db, keysEnv: "k1=keys-s3cret",
		"DATABASE_URL": "postgres://u:pw@db/app", "FROM_FILE": "file-value", "FROM_FLAG": "flag-value",
	} {
		t.Setenv(k, v)
	}
	cfg := writeFile(t, dir, "backlog.json", `{"handler_env": ["FROM_FILE", "FIXED=fixed"],
	  "handlers": {"show": {"command": "env | sort", "env": {"KIND_VAR": "kind"}}}}`)
	mustCLI(t, db, "enqueue", "show", "{}")
	w := startWorker(t, db, "--config", cfg, "--handler-env", "FROM_FLAG")
	st := openStore(t, db)
	waitFor(t, 20*time.Second, "the job to complete", func() bool {
		return counts(t, st)[core.StateCompleted] == 1
	})
	if code := w.stop(t); code != 0 {
		t.Fatalf("work exited %d: %s", code, w.stderr)
	}
	out := string(allJobs(t, st)[0].Result)
	for _, secret := range []string{"s3cret", "BACKLOG_DB", "DATABASE_URL", "pw@db"} {
		if strings.Contains(out, secret) {
			t.Errorf("the handler saw %q:\n%s", secret, out)
		}
	}
	for _, want := range []string{"HOME=/home/w", "LC_ALL=C", "FROM_FILE=file-value", "FIXED=fixed", "FROM_FLAG=flag-value", "KIND_VAR=kind", "BACKLOG_JOB_ID=1", "BACKLOG_JOB_KIND=show"} {
		if !strings.Contains(out, want+"\n") {
			t.Errorf("the handler did not get %s:\n%s", want, out)
		}
	}
}
