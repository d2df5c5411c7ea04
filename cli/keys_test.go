//go:build unix

package cli

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/core/contract"
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
	if !contract.IsSealed(jobs[0].Args) || strings.Contains(string(jobs[0].Args), "4111") {
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
		if !contract.IsSealed(j.Result) || strings.Contains(string(j.Result), "card") {
			t.Fatalf("job %d: stored result is not sealed: %s", j.ID, j.Result)
		}
		got, err := ring.OpenResult(j.Kind, j.Result)
		if err != nil || string(got) != want+"\n" {
			t.Fatalf("job %d: the handler saw %q (%v), want %s", j.ID, got, err, want)
		}
	}
}

// TestServeAndRemoteWorkersWithKeys: `backlog serve` with keys seals the
// args producers submit in clear and the results its remote workers
// report; a remote worker without keys gets args opened (the worker role
// is among --open-sealed-for by default) for its shell handler, producers
// read ciphertext and the admin reads plain values. A remote worker
// holding the keys itself runs jobs on a server that opens for nobody.
func TestServeAndRemoteWorkersWithKeys(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := "sqlite:" + filepath.Join(dir, "serve-keys.db")
	spec := testKeyring(t, "k1")
	keys := writeFile(t, dir, "keys", spec+"\n")
	_, base := startServe(t, db, nil, "--keys-file", keys, "--encrypt-results",
		"--producer-token", "p", "--worker-token", "w", "--admin-token", "a")
	st := openStore(t, db)

	if code, body := call(t, "POST", base+"/v1/jobs", "p", `{"kind":"pay","args":{"card":"4111-1111"}}`); code != 201 {
		t.Fatalf("submit: %d %s", code, body)
	}
	if j := allJobs(t, st)[0]; !contract.IsSealed(j.Args) || strings.Contains(string(j.Args), "4111") {
		t.Fatalf("stored args %s; want sealed by the server", j.Args)
	}
	w := startRemote(t, func(k string) string { return map[string]string{"BACKLOG_TOKEN": "w"}[k] }, base, "--handler", "pay=cat")
	waitFor(t, 20*time.Second, "the job to complete", func() bool { return counts(t, st)[core.StateCompleted] == 1 })
	w.stop(t)
	if j := allJobs(t, st)[0]; !contract.IsSealed(j.Result) || strings.Contains(string(j.Result), "4111") {
		t.Fatalf("stored result %s; want sealed by the server", j.Result)
	}
	if _, body := call(t, "GET", base+"/v1/jobs/1", "p", ""); strings.Contains(body, "4111") || !strings.Contains(body, "backlog_enc") {
		t.Fatalf("producer read %s; want ciphertext", body)
	}
	if _, body := call(t, "GET", base+"/v1/jobs/1", "a", ""); !strings.Contains(body, `"result":{"card":"4111-1111"}`) {
		t.Fatalf("admin read %s; want the handler's result opened", body)
	}

	// Keys at the worker only.
	db2 := "sqlite:" + filepath.Join(dir, "worker-keys.db")
	_, base2 := startServe(t, db2, nil, "--open-sealed-for", "none")
	if r := cliEnv(t, map[string]string{keysEnv: spec}, db2, "enqueue", "pay", `{"card":"5500"}`); r.code != 0 {
		t.Fatalf("enqueue: %s", r)
	}
	w2 := startRemote(t, func(k string) string { return map[string]string{keysEnv: spec}[k] }, base2, "--handler", "pay=cat", "--encrypt-results")
	st2 := openStore(t, db2)
	waitFor(t, 20*time.Second, "the job to complete", func() bool { return counts(t, st2)[core.StateCompleted] == 1 })
	w2.stop(t)
	ring, err := core.ParseKeyring(spec)
	if err != nil {
		t.Fatal(err)
	}
	j := allJobs(t, st2)[0]
	if got, err := ring.OpenResult(j.Kind, j.Result); err != nil || string(got) != `{"card":"5500"}`+"\n" {
		t.Fatalf("result %s opens to %q (%v); want the args the worker opened", j.Result, got, err)
	}
}

// TestKeysFlagsErrors: --encrypt-*
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
		{nil, []string{"serve", "--listen", "127.0.0.1:0", "--keys-file", keys, "--open-sealed-for", "worker,root"}, "root"},
		{nil, []string{"work", "--server", "http://127.0.0.1:1", "--handler", "k=true", "--encrypt-errors"}, "need keys"},
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
