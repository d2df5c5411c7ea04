package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// claimVia registers worker id with token and claims one job through
// base, returning the job's id and lease token.
func claimVia(t *testing.T, base, token, id string) (int64, string) {
	t.Helper()
	if code, body := call(t, "PUT", base+"/v1/workers/"+id, token, `{"queues":["default"]}`); code != 200 {
		t.Fatalf("register %s: %d %s", id, code, body)
	}
	code, body := call(t, "POST", base+"/v1/workers/"+id+"/claim", token, `{}`)
	var out struct {
		Jobs []struct {
			ID         int64  `json:"id"`
			LeaseToken string `json:"lease_token"`
		} `json:"jobs"`
	}
	if code != 200 || json.Unmarshal([]byte(body), &out) != nil || len(out.Jobs) != 1 {
		t.Fatalf("claim for %s: %d %s", id, code, body)
	}
	return out.Jobs[0].ID, out.Jobs[0].LeaseToken
}

// TestServeLeaseSecretInTheDatabase: two servers on one database take
// each other's lease tokens, and so does a server started after the one
// that issued them stopped: the secret is kept in the database.
func TestServeLeaseSecretInTheDatabase(t *testing.T) {
	db := tempDB(t)
	vars := map[string]string{"BACKLOG_ADMIN_TOKEN": "adm"}
	first, a := startServe(t, db, vars)
	_, b := startServe(t, db, vars)
	for range 2 {
		if code, body := call(t, "POST", a+"/v1/jobs", "adm", `{"kind":"k"}`); code != 201 {
			t.Fatalf("submit: %d %s", code, body)
		}
	}
	id1, tok1 := claimVia(t, a, "adm", "w")
	id2, tok2 := claimVia(t, a, "adm", "w")
	if code, body := call(t, "POST", b+"/v1/jobs/"+itoa(id1)+"/complete", "adm", `{"lease_token":"`+tok1+`"}`); code != 200 {
		t.Fatalf("complete on the other server: %d %s", code, body)
	}
	first.stop(t)
	_, c := startServe(t, db, vars)
	if code, body := call(t, "POST", c+"/v1/jobs/"+itoa(id2)+"/complete", "adm", `{"lease_token":"`+tok2+`"}`); code != 200 {
		t.Fatalf("complete after a restart: %d %s", code, body)
	}
}

// TestServeWorkerCredentials: per-worker tokens from flags and from a
// file each work for the worker calls, and a worker id registered with
// one cannot be used with another (403).
func TestServeWorkerCredentials(t *testing.T) {
	db := tempDB(t)
	file := filepath.Join(t.TempDir(), "workers")
	if err := os.WriteFile(file, []byte("# team b\nteam-b = tok-b\n\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte(strings.Repeat("s", 40)+"\n"+strings.Repeat("p", 40)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, base := startServe(t, db, map[string]string{"BACKLOG_ADMIN_TOKEN": "adm", "BACKLOG_WORKER_CREDENTIALS_FILE": file},
		"--worker-credential", "team-a=tok-a", "--lease-secret-file", secret)
	if code, body := call(t, "POST", base+"/v1/jobs", "adm", `{"kind":"k"}`); code != 201 {
		t.Fatalf("submit: %d %s", code, body)
	}
	id, tok := claimVia(t, base, "tok-a", "wa")
	if code, body := call(t, "POST", base+"/v1/workers/wa/heartbeat", "tok-b", `{"leases":[]}`); code != 403 {
		t.Fatalf("heartbeat of a's worker with b's token: %d %s", code, body)
	}
	if code, body := call(t, "POST", base+"/v1/jobs/"+itoa(id)+"/complete", "tok-b", `{"lease_token":"`+tok+`"}`); code != 403 {
		t.Fatalf("complete a's job with b's token: %d %s", code, body)
	}
	if code, body := call(t, "DELETE", base+"/v1/workers/wa", "tok-b", ""); code != 403 {
		t.Fatalf("deregister a's worker with b's token: %d %s", code, body)
	}
	if code, body := call(t, "POST", base+"/v1/jobs/"+itoa(id)+"/complete", "tok-a", `{"lease_token":"`+tok+`"}`); code != 200 {
		t.Fatalf("complete with a's own token: %d %s", code, body)
	}
	if code, body := call(t, "PUT", base+"/v1/workers/wb", "tok-b", `{"queues":["default"]}`); code != 200 {
		t.Fatalf("register with the token from the file: %d %s", code, body)
	}
}

// TestServeAuthFlagsAreChecked: bad secrets and credentials stop serve
// with a usage error that never shows a token.
func TestServeAuthFlagsAreChecked(t *testing.T) {
	db := tempDB(t)
	file := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(file, []byte(strings.Repeat("s", 40)+"\nshort\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--lease-secret", "short"}, "at least 32"},
		{[]string{"--lease-secret", strings.Repeat("s", 40), "--lease-secret-file", file}, "use one"},
		{[]string{"--lease-secret-file", file}, "previous secret 1"},
		{[]string{"--lease-secret-file", filepath.Join(t.TempDir(), "missing")}, "--lease-secret-file"},
		{[]string{"--worker-credential", "no-equals-sign-secret"}, "NAME=TOKEN"},
		{[]string{"--worker-credential", "a=x", "--worker-credential", "a=y"}, "twice"},
		{[]string{"--worker-credential", "admin=secret-admin-tok"}, "role token"},
	} {
		r := cli(t, db, append([]string{"serve", "--listen", "127.0.0.1:0"}, c.args...)...)
		if r.code == 0 || !strings.Contains(r.stderr, c.want) {
			t.Errorf("serve %v: %s; want a failure mentioning %q", c.args, r, c.want)
		}
		if strings.Contains(r.stderr, "secret-admin-tok") || strings.Contains(r.stderr, "no-equals-sign-secret") {
			t.Errorf("serve %v shows a token: %s", c.args, r.stderr)
		}
	}
}
