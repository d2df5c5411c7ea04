//go:build unix

package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/backlogq/backlog/core"
)

// testKeyring returns a fresh keyring in its text form.
func testKeyring(t *testing.T, id string) string {
	t.Helper()
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return id + "=" + base64.StdEncoding.EncodeToString(b)
}

// cliEnv runs the command line in-process with env vars visible to it.
func cliEnv(t *testing.T, vars map[string]string, db string, args ...string) result {
	t.Helper()
	e, out, errb := testEnv("")
	e.getenv = func(k string) string { return vars[k] }
	if db != "" {
		args = append([]string{"--db", db}, args...)
	}
	code := run(context.Background(), e, args)
	return result{code: code, stdout: out.String(), stderr: errb.String()}
}

// TestEnqueueAndWorkWithKeys: enqueue with keys stores sealed args; a
// worker with the same keys gives its shell handler the plain args and
// seals the result; a job enqueued without keys still runs.
func TestEnqueueAndWorkWithKeys(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := "sqlite:" + filepath.Join(dir, "keys.db")
	spec := testKeyring(t, "k1")
	ring, err := core.ParseKeyring(spec)
	if err != nil {
		t.Fatal(err)
	}
	if r := cliEnv(t, map[string]string{keysEnv: spec}, db, "enqueue", "pay", `{"card":"4111-1111"}`); r.code != 0 {
		t.Fatalf("enqueue: %s", r)
	}
	mustCLI(t, db, "enqueue", "pay", `{"card":"plain"}`) // enqueued before keys were in use
	st := openStore(t, db)
	jobs := allJobs(t, st)
	if !core.IsSealed(jobs[0].Args) || strings.Contains(string(jobs[0].Args), "4111") {
		t.Fatalf("stored args are not sealed: %s", jobs[0].Args)
	}
	if strings.Contains(mustCLI(t, db, "jobs", "get", "1").stdout, "4111") {
		t.Fatal("jobs get without keys shows the plain args")
	}

	keys := writeFile(t, dir, "keys", "# current key first\n"+spec+"\n")
	w := startWorker(t, db, "--keys-file", keys, "--encrypt-results", "--handler", "pay=cat")
	waitFor(t, 20*time.Second, "both jobs to complete", func() bool {
		return counts(t, st)[core.StateCompleted] == 2
	})
	if code := w.stop(t); code != 0 {
		t.Fatalf("work exited %d: %s", code, w.stderr)
	}
	for i, want := range []string{`{"card":"4111-1111"}`, `{"card":"plain"}`} {
		j := allJobs(t, st)[i]
		if !core.IsSealed(j.Result) || strings.Contains(string(j.Result), "card") {
			t.Fatalf("job %d: stored result is not sealed: %s", j.ID, j.Result)
		}
		got, err := ring.OpenResult(j.Kind, j.Result)
		if err != nil || string(got) != want+"\n" {
			t.Fatalf("job %d: the handler saw %q (%v), want %s", j.ID, got, err, want)
		}
	}
}

// TestKeysFlagsErrors: keys where they are not supported yet, --encrypt-*
// without keys and a bad keyring are usage errors that never print a key.
func TestKeysFlagsErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := "sqlite:" + filepath.Join(dir, "e.db")
	spec := testKeyring(t, "k1")
	keys := writeFile(t, dir, "keys", spec+"\n")
	bad := writeFile(t, dir, "bad", "k1=c2hvcnQ=\n") // 5 bytes, not 32
	for _, tc := range []struct {
		vars map[string]string
		args []string
		want string
	}{
		{nil, []string{"serve", "--listen", "127.0.0.1:0", "--keys-file", keys}, "not supported by backlog serve"},
		{map[string]string{keysEnv: spec}, []string{"work", "--server", "http://127.0.0.1:1", "--handler", "k=true"}, "not supported by remote workers"},
		{nil, []string{"work", "--handler", "k=true", "--encrypt-results"}, "need keys"},
		{nil, []string{"work", "--handler", "k=true", "--keys-file", bad}, "--keys-file"},
		{map[string]string{keysEnv: "k1=c2hvcnQ="}, []string{"enqueue", "k", "{}"}, keysEnv},
		{nil, []string{"enqueue", "k", "{}", "--keys-file", filepath.Join(dir, "missing")}, "--keys-file"},
	} {
		d := db
		if tc.args[0] == "work" && tc.args[1] == "--server" {
			d = "" // the job server decides the store
		}
		r := cliEnv(t, tc.vars, d, tc.args...)
		if r.code != 2 || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("backlog %s: want a usage error naming %q: %s", strings.Join(tc.args, " "), tc.want, r)
		}
		if strings.Contains(r.stderr, spec[3:]) || strings.Contains(r.stderr, "c2hvcnQ") {
			t.Errorf("backlog %s printed key material: %s", strings.Join(tc.args, " "), r.stderr)
		}
	}
}
